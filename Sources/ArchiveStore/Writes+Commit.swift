import ArchiveLocking
import Dispatch
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A write of ``ArchiveStore/apply(_:)`` with its file written in `.archive-sync/staging`.
struct StagedWrite: Sendable {
    var write: PendingWrite
    /// The staged file's name; nil for a delete.
    var temp: String?
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
    ///    (or unlink the file of a delete), flushing neither;
    /// 4. later, one `syncfs` makes the renames durable and the intent goes (Durability.swift).
    ///
    /// Writes of several threads that arrive together share step 2 (``CommitQueue``).
    ///
    /// - Returns: each object's version afterwards, in the order of `requested`.
    @discardableResult
    func apply(_ requested: [PendingWrite]) throws -> [Int] {
        guard !requested.isEmpty else { return [] }
        try refuseIfReadOnly()
        try requireRecovered()
        do {
            let ticket = CommitTicket(try stage(requested))
            return try commitQueue.submit(ticket) { group in
                let all = group.flatMap(\.writes)
                if group.count > 1, let versions = try? commitStaged(all) {
                    var start = 0
                    for ticket in group {
                        ticket.outcome = .success(Array(versions[start..<start + ticket.writes.count]))
                        start += ticket.writes.count
                    }
                    return
                }
                // Alone, or one by one after the group failed: a write refused fails only its caller.
                for ticket in group {
                    ticket.outcome = Result { try commitStaged(ticket.writes) }
                }
            }
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
        let where_ = path.appendingComponent(FileName.metadataDirectory).appendingComponent(Self.stagingDirectory)
        do {
            let stamps = try parallelMap(writes.count, threshold: 256) { [staging] index -> FileStamp? in
                guard let temp = temps[index], let content = writes[index].content else { return nil }
                return try FileSystem.writeNewFile(temp, in: staging, data: content, sync: false, path: where_.appendingComponent(temp))
            }
            return writes.indices.map { index in
                var write = writes[index]
                write.stamp = stamps[index]
                return StagedWrite(write: write, temp: temps[index])
            }
        } catch {
            for temp in temps.compactMap({ $0 }) { _ = try? FileSystem.removeFile(temp, in: staging, path: where_.appendingComponent(temp)) }
            throw error
        }
    }

    /// What a commit puts in place after it: a staged file renamed over an object's file, or
    /// an object's file removed.
    private enum Placement: Sendable {
        case rename(temp: String, to: String, in: Descriptor)
        case remove(String, in: Descriptor)
    }

    private struct Committed: Sendable {
        var versions: [Int]
        var placements: [Placement] = []
        var intent: Int64?
        var entries: [WriteIntent.Entry] = []
    }

    /// Steps 2 and 3 of ``apply(_:)`` for `staged`, which may hold the writes of several callers.
    private func commitStaged(_ staged: [StagedWrite]) throws -> [Int] {
        // Made by ``stage(_:)`` whenever a file was staged; the metadata directory stands in
        // for a write that stages nothing (removes), which never names a staged file.
        let staging = staging.withLock { $0 } ?? root
        var directories: [ExactName: Descriptor] = [:]
        var committed: Committed?
        var placed: Set<String> = []
        defer {
            // Staged files not renamed: already stored as asked, or the commit failed.
            let where_ = path.appendingComponent(FileName.metadataDirectory).appendingComponent(Self.stagingDirectory)
            for temp in staged.compactMap(\.temp) where !placed.contains(temp) {
                _ = try? FileSystem.removeFile(temp, in: staging, path: where_.appendingComponent(temp))
            }
        }
        do {
            for write in staged.map(\.write) where directories[ExactName(write.id.collection)] == nil {
                directories[ExactName(write.id.collection)] = try openCollection(write.id.collection, create: write.content != nil)
            }
            let outcome = try manifest.write(
                { tx in try self.record(staged, directories: directories, tx: tx) },
                afterCommit: { outcome in
                    committed = outcome
                    // Each object once: its placements touch names no other object's do, in any
                    // order, so a large batch makes them on every core.
                    let placements = outcome.placements
                    let independent = Set(staged.lazy.map(\.write.id)).count == staged.count
                    _ = try parallelMap(placements.count, threshold: independent ? 256 : .max) { [staging] index -> Bool in
                        switch placements[index] {
                        case let .rename(temp, file, directory):
                            try FileSystem.rename(temp, in: staging, to: file, in: directory, path: directory.path.appendingComponent(file))
                        case let .remove(file, directory):
                            try FileSystem.removeFile(file, in: directory, path: directory.path.appendingComponent(file))
                        }
                        return true
                    }
                    for case let .rename(temp, _, _) in placements { placed.insert(temp) }
                })
            if let intent = outcome.intent { noteCommitted(intent) }
            return outcome.versions
        } catch {
            // Committed, but a file could not be put in place: put it back from the manifest
            // now, or leave it to the next open.
            if let committed, let intent = committed.intent { try? restoreCommitted(intent, committed.entries) }
            throw error
        }
    }

    /// Step 2 of ``apply(_:)``, inside the write transaction: records each write that changes
    /// something, and the committed intent that names them. An object written more than once
    /// in one commit is always written, in order.
    private func record(_ staged: [StagedWrite], directories: [ExactName: Descriptor], tx: ManifestTransaction) throws -> Committed {
        var occurrences: [ObjectID: Int] = [:]
        for write in staged { occurrences[write.write.id, default: 0] += 1 }
        var committed = Committed(versions: Array(repeating: 0, count: staged.count))
        for (index, item) in staged.enumerated() {
            let write = item.write
            let existing = try tx.object(write.id)
            if let damage = Self.damage(of: write, record: existing) { throw damage }
            if occurrences[write.id] == 1, let version = try storedVersion(matching: write, record: existing) {
                committed.versions[index] = version
                continue
            }
            guard let directory = directories[ExactName(write.id.collection)] else {
                // A delete where the directory is gone: the object is gone too.
                let recorded = try tx.recordDelete(of: existing, origin: .local)
                committed.versions[index] = recorded?.version ?? existing?.version ?? 0
                continue
            }
            var file = write.file
            var replaced: String?
            if let temp = item.temp { committed.placements.append(.rename(temp: temp, to: write.file, in: directory)) }
            if let existing, !existing.isDeleted, existing.file != write.file || write.content == nil {
                committed.placements.append(.remove(existing.file, in: directory))
                if write.content == nil { file = existing.file } else { replaced = existing.file }
            }
            let change = RecordedChange(
                id: write.id, file: file, content: write.content, hash: write.hash, stamp: write.stamp, schemaVersion: write.schemaVersion,
                origin: .local)
            let recorded = try tx.record(change, existing: existing)
            committed.versions[index] = recorded?.version ?? existing?.version ?? 0
            committed.entries.append(
                WriteIntent.Entry(
                    collection: write.id.collection, key: write.id.key, file: file, hash: write.hash, schemaVersion: write.schemaVersion,
                    committed: true, previous: existing?.isDeleted == false ? existing?.hash : nil, replaced: replaced))
        }
        if !committed.entries.isEmpty { committed.intent = try tx.addIntent(committed.entries) }
        return committed
    }
}
