import ArchiveLocking
import Dispatch
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A write of ``ArchiveStore/apply(_:)`` with its file written in `.archive-sync/staging`.
struct StagedWrite: Sendable {
    var write: PendingWrite
    /// The staged file's name; nil for a delete, or for a save staged in `whole`.
    var temp: String?
    /// The new collection's directory this save's file is staged in, under its own name: it
    /// is put in place with the directory, by one rename.
    var whole: StagedCollection? = nil
}

/// One caller's writes waiting in a ``CommitQueue``. The leader sets `outcome` before it
/// signals; a ticket signalled without one is handed the lead.
final class CommitTicket: @unchecked Sendable {
    let writes: [StagedWrite]
    var outcome: Result<[Int], any Error>?
    let signal = DispatchSemaphore(value: 0)

    init(_ writes: [StagedWrite]) { self.writes = writes }
}

/// Group commit: the writes of threads that arrive while a commit is being flushed wait here,
/// and the next leader commits them all in one transaction, with one flush of the WAL.
final class CommitQueue: Sendable {
    private struct State: Sendable {
        var waiting: [CommitTicket] = []
        var leading = false
    }

    private let state = TracedMutex(State())

    /// Commits `ticket`'s writes, alone or with others': `commit` is given every ticket of a
    /// group and sets each one's outcome.
    func submit(_ ticket: CommitTicket, commit: ([CommitTicket]) -> Void) throws -> [Int] {
        let leads = state.withLock { state -> Bool in
            state.waiting.append(ticket)
            defer { state.leading = true }
            return !state.leading
        }
        if !leads { ticket.signal.wait() }
        if ticket.outcome == nil {
            let group = state.withLock { state -> [CommitTicket] in
                defer { state.waiting = [] }
                return state.waiting
            }
            commit(group)
            for other in group where other !== ticket { other.signal.signal() }
            // The lead passes to the first that arrived meanwhile, whose own writes then wait
            // no longer than one flush.
            let next = state.withLock { state -> CommitTicket? in
                if state.waiting.isEmpty { state.leading = false }
                return state.waiting.first
            }
            next?.signal.signal()
        }
        return try ticket.outcome!.get()
    }
}

extension ArchiveStore {
    /// Applies saves and deletes in one durable manifest commit, the only flush they pay:
    ///
    /// 1. write each new file in `.archive-sync/staging`, unflushed (a cut before the commit
    ///    leaves it there, where the next open removes it);
    /// 2. under the manifest's write lock: leave out what is already stored exactly as asked,
    ///    record each new version with its bytes and a *committed intent* naming its object,
    ///    commit (the WAL is flushed: the save is durable);
    /// 3. still excluding every other writer: rename each staged file over its object's file
    ///    (swapped with it, where it is there: ``retire(_:in:for:staging:)``), or unlink the
    ///    file of a delete, flushing neither; a new collection a batch staged whole
    ///    (``StagedCollection``) is put in place by one rename of its directory;
    /// 4. later, one `syncfs` makes the renames durable, the intent goes and the replaced
    ///    files are removed (Durability.swift).
    ///
    /// Writes of several threads that arrive together share step 2 (``CommitQueue``). A large
    /// batch's `stager` holds its writes instead of `requested` and stages them: its commit
    /// is its own, and records each write as soon as it is staged, step 1 and step 2 on two
    /// cores at once (the transaction, and so every other writer's wait, lasts that long).
    ///
    /// - Returns: each object's version afterwards, in the order of `requested`.
    @discardableResult
    func apply(_ requested: [PendingWrite], stagedBy stager: BatchStager? = nil) throws -> [Int] {
        try withStaged(requested, stager: stager) { staged in
            if let stager { return try commitStaged(staged, stager: stager).map { $0 ?? 0 } }
            let ticket = CommitTicket(staged)
            return try commitQueue.submit(ticket) { group in
                // A group that fails keeps its staged files: each caller's are committed below.
                if group.count > 1,
                    let versions = try? commitStaged(group.flatMap(\.writes), inParallelFrom: 2, keepingStagedOnFailure: true)
                {
                    var start = 0
                    for ticket in group {
                        ticket.outcome = .success(versions[start..<start + ticket.writes.count].map { $0 ?? 0 })
                        start += ticket.writes.count
                    }
                    return
                }
                // Alone, or one by one after the group failed: a write refused fails only its caller.
                for ticket in group {
                    ticket.outcome = Result { try commitStaged(ticket.writes).map { $0 ?? 0 } }
                }
            }
        }
    }

    /// Applies writes with a ``PendingWrite/condition`` (a sync's page, a cache's evictions)
    /// as ``apply(_:)`` does, in one commit of their own: a write goes ahead only while its
    /// object holds what its condition names, in the manifest and on disk (a file changed or
    /// created since the last scan is never overwritten).
    ///
    /// `then`, when given, runs in the transaction that records the writes, before any file is
    /// replaced, with whether each write goes ahead (or is already stored as asked); if it
    /// throws, nothing is written.
    ///
    /// Many writes at once (a sync's page) are staged on a second thread while they are
    /// recorded, as a large batch's are.
    ///
    /// - Returns: each object's version afterwards, or nil for a skipped write.
    func applyChecked(_ requested: [PendingWrite], then: ((ManifestTransaction, [Bool]) throws -> Void)? = nil) throws -> [Int?] {
        if requested.count >= BatchStager.threshold, let stager = BatchStager.start(for: self, with: requested, wholeCollections: false) {
            return try withStaged([], stager: stager) { staged in try commitStaged(staged, stager: stager, then: then) }
        }
        return try withStaged(requested) { staged in try commitStaged(staged, then: then) }
    }

    /// Stages `requested` and gives them to `commit`, after the checks every write makes. A
    /// batch's `stager` holds its writes instead (`requested` is then empty): `commit` is
    /// given them not yet staged, and takes each one staged from the stager.
    private func withStaged<T>(_ requested: [PendingWrite], stager: BatchStager? = nil, commit: ([StagedWrite]) throws -> [T]) throws -> [T] {
        guard !requested.isEmpty || stager != nil else { return [] }
        do {
            try refuseIfReadOnly()
            try requireRecovered()
        } catch {
            stager?.cancel()
            throw error
        }
        do {
            return try commit(try stager.map { $0.close() } ?? stage(requested))
        } catch {
            throw ArchiveError.wrap(error)
        }
    }

    /// Step 1 of ``apply(_:)``: writes each new file in the staging directory, on every core
    /// for a large batch.
    private func stage(_ writes: [PendingWrite]) throws -> [StagedWrite] {
        let temps = writes.map { $0.content == nil ? nil : tempName() }
        guard temps.contains(where: { $0 != nil }) else { return writes.map { StagedWrite(write: $0, temp: nil) } }
        let staging = try stagingDirectory()
        let racyBefore = Manifest.now() - Manifest.racyWindow
        do {
            let stamps = try parallelMap(writes.count, threshold: 256) { [staging] index -> FileStamp? in
                guard let temp = temps[index] else { return nil }
                return try stageFile(writes[index], as: temp, in: staging, racyBefore: racyBefore)
            }
            return writes.indices.map { index in
                var write = writes[index]
                write.stamp = stamps[index]
                return StagedWrite(write: write, temp: temps[index])
            }
        } catch {
            for temp in temps.compactMap({ $0 }) { _ = try? removeStaged(temp, in: staging) }
            throw error
        }
    }

    /// What a commit puts in place after it: a staged file renamed over an object's file, or
    /// an object's file removed. `write` is the index of the write it belongs to.
    private enum Placement: Sendable {
        /// `replacing`: the object's row names a file at `to` already, which the rename replaces.
        case rename(temp: String, to: String, in: Descriptor, write: Int, replacing: Bool)
        case remove(String, in: Descriptor, write: Int)

        var write: Int {
            switch self {
            case .rename(_, _, _, let write, _), .remove(_, _, let write): write
            }
        }
    }

    private struct Committed: Sendable {
        var versions: [Int?]
        var placements: [Placement] = []
        /// What each conditional write expects on disk, checked again just before its placements.
        var expectations: [Int: DiskExpectation] = [:]
        /// The commit's own committed intent, when it has one (a change of codec).
        var intent: Int64?
        /// The settle period it committed in, and whether this commit began it.
        var period: (id: Int64, isNew: Bool)?
        var entries: [WriteIntent.Entry] = []
    }

    /// Steps 2 and 3 of ``apply(_:)`` for `staged`, which may hold the writes of several
    /// callers; `then` as ``applyChecked(_:then:)`` says.
    ///
    /// - Parameters:
    ///   - threshold: from how many placements step 3 runs on every core. A group's callers
    ///     wait for its renames, which every other writer waits for too (`writer.lock`): a
    ///     group commit makes even a few of them at once, its caller's one save each.
    ///   - keepingStagedOnFailure: when the commit fails, leave the staged files for a retry
    ///     (a group's, whose callers' writes are then committed one by one).
    ///   - stager: a batch's, still staging `staged` (which then name no staged file yet):
    ///     each write is recorded once it gives it staged.
    private func commitStaged(
        _ staged: [StagedWrite], inParallelFrom threshold: Int = 256, keepingStagedOnFailure: Bool = false, stager: BatchStager? = nil,
        then: ((ManifestTransaction, [Bool]) throws -> Void)? = nil
    ) throws -> [Int?] {
        // Made by ``stage(_:)`` whenever a file was staged; the metadata directory stands in
        // for a write that stages nothing (removes), which never names a staged file.
        let staging = staging.withLock { $0 } ?? root
        // A new collection staged whole: its directory stands in for the collection's until
        // the rename after the commit makes it the collection's.
        var wholes: [StagedCollection] = []
        for case let whole? in staged.lazy.map(\.whole) where !wholes.contains(where: { $0 === whole }) { wholes.append(whole) }
        var directories = Dictionary(wholes.map { (ExactName($0.collection), $0.directory) }, uniquingKeysWith: { first, _ in first })
        var committed: Committed?
        // The period this commit keeps, having failed to put its files in place.
        var kept: Int64?
        var placed: Set<String> = []
        var changedOnDisk: Set<Int> = []
        // `staged` with every staged file named, once the stager has staged them all.
        var finished: [StagedWrite]? = stager == nil ? staged : nil
        defer {
            // Staged files not renamed: already stored as asked, skipped, or the commit failed.
            if committed != nil || !keepingStagedOnFailure {
                if finished == nil { stager?.cancel() }
                for temp in (finished ?? []).compactMap(\.temp) where !placed.contains(temp) {
                    _ = try? removeStaged(temp, in: staging)
                }
                for whole in wholes { whole.remove() }
            }
        }
        do {
            for write in staged.map(\.write) where directories[ExactName(write.id.collection)] == nil {
                directories[ExactName(write.id.collection)] = try openCollection(write.id.collection, create: write.content != nil)
            }
            var outcome = try manifest.write(
                { tx in
                    let outcome = try self.record(
                        staged, completing: stager.map { stager in { try stager.staged($0) } }, directories: directories, tx: tx)
                    if let stager { finished = try stager.finish() }
                    try then?(tx, outcome.versions.map { $0 != nil })
                    return outcome
                },
                afterCommit: { outcome in
                    committed = outcome
                    if let period = outcome.period, period.isNew { durability.withLock { $0.period = period.id } }
                    let independent = staged.count == 1 || Set(staged.lazy.map(\.write.id)).count == staged.count
                    var redirected: [ObjectIdentifier: Descriptor] = [:]
                    do {
                        for whole in wholes {
                            if let into = try putInPlace(whole, staging: staging, with: staged) {
                                redirected[ObjectIdentifier(whole.directory)] = into
                            }
                        }
                        let done = try place(
                            outcome, staging: staging, inParallelFrom: independent ? threshold : .max, redirecting: redirected)
                        for (index, placement) in outcome.placements.enumerated() {
                            if !done[index] { changedOnDisk.insert(placement.write) }
                            if done[index], case let .rename(temp, _, _, _, _) = placement { placed.insert(temp) }
                        }
                    } catch {
                        // Still under the writer lock, so before any settle could end the period:
                        // it must outlive this process unless the files are put back below.
                        if outcome.intent == nil, let period = outcome.period {
                            keepPeriod(period.id)
                            kept = period.id
                        }
                        throw error
                    }
                })
            if !outcome.entries.isEmpty || outcome.period?.isNew == true { noteCommitted(outcome.intent) }
            if !changedOnDisk.isEmpty {
                try recordChangedOnDisk(changedOnDisk.sorted().map { staged[$0].write }, directories: directories)
                for index in changedOnDisk { outcome.versions[index] = nil }
            }
            return outcome.versions
        } catch {
            // Committed, but a file could not be put in place: put it back from the manifest
            // now, or leave it to the next open.
            if let committed, let intent = committed.intent {
                try? restoreCommitted(committed.entries, intent: (intent, .current))
            } else if let committed, let kept, (try? restoreCommitted(committed.entries, intent: nil)) != nil {
                releasePeriod(kept)
            }
            throw error
        }
    }

    /// Step 3 of ``apply(_:)`` for a new collection staged whole: renames its directory into
    /// place, unless another writer made the collection's directory since the batch looked
    /// (its files then go into that one by one). Returns the collection's directory, where
    /// the commit's other placements for `whole.directory` go; nil if it is gone again.
    private func putInPlace(_ whole: StagedCollection, staging: Descriptor, with staged: [StagedWrite]) throws -> Descriptor? {
        let name = FileName.encode(whole.collection)
        if try FileSystem.renameIfAbsent(whole.name, in: staging, to: name, in: root, path: path.appendingComponent(name)) {
            // Opened again by its name, so that messages name it where it now is.
            return try openCollection(whole.collection, create: false)
        }
        guard let directory = try openCollection(whole.collection, create: true) else { return nil }
        for write in staged.lazy.filter({ $0.whole === whole }).map(\.write) {
            try FileSystem.rename(write.file, in: whole.directory, to: write.file, in: directory, path: directory.path.appendingComponent(write.file))
        }
        whole.remove()
        return directory
    }

    /// Step 3 of ``apply(_:)``: makes each placement of `committed`, on every core from
    /// `threshold` placements on; the caller gives `.max` unless the writes are of distinct
    /// objects (whose placements then touch names no other object's do, in any order). A
    /// conditional write whose file changed on disk since its commit checked it is left
    /// alone: each of its placements reports false. A placement in a directory that
    /// `redirecting` names goes to the one it gives instead (``putInPlace(_:staging:with:)``).
    private func place(
        _ committed: Committed, staging: Descriptor, inParallelFrom threshold: Int, redirecting: [ObjectIdentifier: Descriptor] = [:]
    ) throws -> [Bool] {
        let placements = committed.placements
        return try parallelMap(placements.count, threshold: threshold) { [staging] index -> Bool in
            let expectation = committed.expectations[placements[index].write]
            switch placements[index] {
            case let .rename(temp, file, placedIn, _, replacing):
                let directory = redirecting[ObjectIdentifier(placedIn)] ?? placedIn
                switch expectation {
                case .absent?:
                    // Nothing may have appeared at the name since: checked by the rename itself.
                    return try FileSystem.renameIfAbsent(temp, in: staging, to: file, in: directory, path: directory.path.appendingComponent(file))
                case let expectation? where try !diskMatches(expectation, in: directory):
                    return false
                default:
                    if replacing, try retire(file, in: directory, for: temp, staging: staging) { return true }
                    // The path is an autoclosure: made only for an error's message.
                    try FileSystem.rename(temp, in: staging, to: file, in: directory, path: directory.path.appendingComponent(file))
                }
            case let .remove(file, placedIn, _):
                let directory = redirecting[ObjectIdentifier(placedIn)] ?? placedIn
                if let expectation, try !diskMatches(expectation, in: directory) { return false }
                try FileSystem.removeFile(file, in: directory, path: directory.path.appendingComponent(file))
            }
            return true
        }
    }

    /// Records, as a scan would, the files of conditional writes that another program changed
    /// in the instant between their commit and their rename: the write's version stays in
    /// history, the program's file is the object's newest version.
    private func recordChangedOnDisk(_ writes: [PendingWrite], directories: [ExactName: Descriptor]) throws {
        try manifest.write(flushed: false) { tx in
            for write in writes {
                guard let directory = directories[ExactName(write.id.collection)], let row = try tx.object(write.id) else { continue }
                try reconcileFile(row.file, of: write.id, in: directory, tx: tx)
            }
        }
    }

    /// Step 2 of ``apply(_:)``, inside the write transaction: records each write that changes
    /// something, and the committed intent that names them. An object written more than once
    /// in one commit is always written, in order.
    ///
    /// A write whose object's row is damaged (names a file no write makes) is refused, with
    /// the whole commit; a conditional one (a sync's) is skipped instead, as if its object had
    /// changed, so that the rest goes ahead.
    ///
    /// `completing`, when given, gives each write of `staged` staged, waiting for it.
    private func record(
        _ staged: [StagedWrite], completing: ((Int) throws -> StagedWrite)? = nil, directories: [ExactName: Descriptor], tx: ManifestTransaction
    ) throws -> Committed {
        var occurrences: [ObjectID: Int] = [:]
        if staged.count > 1 {
            occurrences.reserveCapacity(staged.count)
            for write in staged { occurrences[write.write.id, default: 0] += 1 }
        }
        // The collections with no row at all as this commit begins (a batch into a new one):
        // an object no other write of the commit touches has no row there to look up.
        var empty: Set<ExactName> = []
        if staged.count >= 64 {
            var collections: [ExactName: String] = [:]
            for item in staged { collections[ExactName(item.write.id.collection)] = item.write.id.collection }
            for (name, collection) in collections where try !tx.hasObjects(in: collection) { empty.insert(name) }
        }
        var committed = Committed(versions: Array(repeating: nil, count: staged.count))
        // The settle period the commit records in, begun before its first record (so that no
        // version a cut may bring back is pruned), and only by a commit that records something
        // (saving an unchanged model writes nothing, and needs no flush).
        func inPeriod() throws {
            guard committed.period == nil else { return }
            if let period = durability.withLock({ $0.period }) {
                committed.period = (period, false)
            } else {
                committed.period = (try tx.addSettlePeriod(), true)
            }
        }
        for index in staged.indices {
            let item = try completing?(index) ?? staged[index]
            let write = item.write
            let unseen = !empty.isEmpty && occurrences[write.id] == 1 && empty.contains(ExactName(write.id.collection))
            let existing = unseen ? nil : try tx.object(write.id)
            let directory = directories[ExactName(write.id.collection)]
            let expectation = diskExpectation(of: write, record: existing, directoryExists: directory != nil)
            if write.condition != nil, expectation == nil { continue }
            if let damage = Self.damage(of: write, record: existing) {
                if write.condition != nil { continue }
                throw damage
            }
            if occurrences[write.id, default: 1] == 1, let version = try storedVersion(matching: write, record: existing) {
                committed.versions[index] = version
                continue
            }
            if let expectation, let directory, try !diskMatches(expectation, in: directory) { continue }
            committed.expectations[index] = expectation
            let origin: StoreChange.Origin = write.incoming == nil ? .local : .sync
            guard let directory else {
                // A delete where the directory is gone: the object is gone too.
                try inPeriod()
                let recorded = try tx.recordDelete(of: existing, origin: origin, incoming: write.incoming)
                committed.versions[index] = recorded?.version ?? existing?.version ?? 0
                continue
            }
            var file = write.file
            var replaced: String?
            if let temp = item.temp {
                let replacing = existing.map { !$0.isDeleted && $0.file == write.file } ?? false
                committed.placements.append(.rename(temp: temp, to: write.file, in: directory, write: index, replacing: replacing))
            }
            if let existing, !existing.isDeleted, existing.file != write.file || write.content == nil {
                committed.placements.append(.remove(existing.file, in: directory, write: index))
                if write.content == nil { file = existing.file } else { replaced = existing.file }
            }
            let change = RecordedChange(
                id: write.id, file: file, content: write.content, hash: write.hash, stamp: write.stamp, schemaVersion: write.schemaVersion,
                origin: origin, incoming: write.incoming)
            try inPeriod()
            let recorded = try tx.record(change, existing: existing)
            committed.versions[index] = recorded?.version ?? existing?.version ?? 0
            // No hash: the recovery of a committed intent reads each object's from its row.
            committed.entries.append(
                WriteIntent.Entry(
                    collection: write.id.collection, key: write.id.key, file: file, hash: nil, schemaVersion: write.schemaVersion,
                    committed: true, previous: existing?.isDeleted == false ? existing?.hash : nil, replaced: replaced))
        }
        // The period names every other commit's files. A change of codec also leaves the old
        // name, which a cut may keep: its commit names it in an intent of its own.
        if committed.entries.contains(where: { $0.replaced != nil }) { committed.intent = try tx.addIntent(committed.entries) }
        return committed
    }
}
