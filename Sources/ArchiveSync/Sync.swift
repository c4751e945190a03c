import ArchiveLocking
import ArchiveStore
import Foundation

/// Makes two stores equal without losing anything either side wrote.
///
/// ```swift
/// let report = try await Sync(local: storeA, remote: storeB).run()
/// print(report.summary)      // 3 copied to B, 1 copied to A, 1 conflict
/// ```
///
/// A sync makes both manifests current (a scan, unless a watcher keeps the store current),
/// compares them (only what changed since the two last met, when their checkpoints match;
/// otherwise everything), and applies the plan through each store's atomic, durable batch
/// write. Each side then records how far it has merged the other's changes. A sync killed at
/// any moment leaves every object old or new; running it again completes it.
public final class Sync: Sendable {
    let a: any SyncReplica
    let b: any SyncReplica
    private let options: SyncOptions
    /// Live sessions: told of each object once it has landed, and asked between pages
    /// whether to stop (each object is then old or new; the next sync completes the work).
    private let observer: SyncObserver?
    /// Objects compared, read and written per step: bounds memory whatever the stores' size.
    /// Two steps are in memory at once (one landing, the next being read); 1,000 keeps a first
    /// sync of 100,000 objects at about 35 MB, 2,000 took it to 45 MB (Benchmarks/README.md).
    static let pageSize = 1_000
    /// Pages landing at once on a far side (see ``runNow()``).
    static let remoteWindow = 3

    /// A sync of two stores on this machine.
    public convenience init(local: ArchiveStore, remote: ArchiveStore, options: SyncOptions = SyncOptions()) {
        self.init(a: LocalReplica(local), b: LocalReplica(remote), options: options)
    }

    package init(a: any SyncReplica, b: any SyncReplica, options: SyncOptions, observer: SyncObserver? = nil) {
        self.a = a
        self.b = b
        self.options = options
        self.observer = observer
    }

    /// Runs the sync (or, with ``SyncOptions/dryRun``, plans it) and reports what it did.
    ///
    /// The work is file and pipe I/O that blocks: it runs on a thread of its own, not on the
    /// caller's executor, so a long sync never holds one of Swift's few cooperative threads.
    public func run() async throws -> SyncReport {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try self.runNow() }) }.start()
        }
    }

    /// ``run()``, on the calling thread.
    package func runNow() throws -> SyncReport {
        guard a.replica != b.replica else { throw SyncError.sameReplica(a.name, b.name) }
        try a.begin()
        defer { a.end() }
        try b.begin()
        defer { b.end() }
        observer?.step?("begun")
        // Both sides scan at once. A scan alone stats on every core, but lists its directories
        // and reads its manifest on one; two at once, a core each, keep both cores busy. (A scan
        // streams the manifest, so the second one adds a few MB, not a second copy of it.)
        let (scannedA, scannedB) =
            observer?.manifestsCurrent == true
            ? (false, false) : try inParallel(splittingCores: bothHere, { try self.a.makeCurrent() }, { try self.b.makeCurrent() })
        let walk = try Walk(a: a, b: b, full: options.full)
        observer?.step?("current")
        var report = SyncReport(a: a.name, b: b.name, dryRun: options.dryRun, incremental: walk.incremental, scannedA: scannedA, scannedB: scannedB)

        // First the plan alone: it says how much there is to do, and whether the safety valve trips.
        var planned = SyncReport(a: a.name, b: b.name, dryRun: true, incremental: walk.incremental, scannedA: scannedA, scannedB: scannedB)
        planned.actions = options.dryRun ? [] : nil
        let betweenHosts = a is RemoteReplica || b is RemoteReplica
        var tooLarge: SyncError?
        // A plan of at most one page is kept and carried out as it is: walking it again would
        // ask each side for the same rows a second time (round trips, on a far side), and the
        // writes are conditional, so an object that changed since the plan is still refused.
        // (A live session's cycles are mostly this size.) Larger plans are walked again, so
        // that memory stays at a page or two.
        var kept: [[(ReplicaEntry?, ReplicaEntry?)]]? = []
        var keptPairs = 0
        try walk.forEachPage { pairs in
            keptPairs += pairs.count
            if keptPairs <= Sync.pageSize { kept?.append(pairs) } else { kept = nil }
            let actions = pairs.map { SyncPlanner.action(a: $0.0, b: $0.1, preference: options.preference, merge: options.merge) }
            // A dry run says what would merge: it reads the concurrent pairs' bytes and bases.
            let merges = options.dryRun ? try fieldMerges(actions, contents: try fieldMergeContents(actions)) : [:]
            for action in actions {
                record(action, merge: merges, in: &planned)
                if betweenHosts && tooLarge == nil { tooLarge = overLimit(action) }
            }
        }
        observer?.step?("planned")
        if options.dryRun { return planned }
        // Refused before anything is written: the sync carries every object or none.
        if let tooLarge { throw tooLarge }
        let total = planned.changes + planned.vectorsMerged
        guard total > 0 else {
            try moveCheckpoints(walk, after: report)
            return report
        }
        if !options.force {
            for (side, deletes) in [(SyncSide.b, planned.deletedOnB), (.a, planned.deletedOnA)] where deletes > 0 {
                let objects = try replica(side).liveObjectCount()
                if deletes * 2 > objects { throw SyncError.tooManyDeletes(store: replica(side).name, deletes: deletes, objects: objects) }
            }
        }

        // Pipelined: while a page's writes land, on a thread of their own, the next page is
        // walked and its bytes are read. Pages hold different objects and every write is
        // conditional, so the overlap changes no outcome. Here, a page's writes start only once
        // the previous page's have landed; into a far side, up to `window` pages land at once:
        // their requests queue on the connection, so the far side goes from one page's commit
        // straight to the next page instead of waiting a round trip and a page's transfer
        // (remote-bench 1 in Benchmarks/README.md).
        // Each reply comes after its page's commit, and checkpoints move only once every page
        // has landed. A live session's observer hears of each page in order: one at a time.
        let window = betweenHosts && observer == nil ? Sync.remoteWindow : 1
        var done = 0
        var landing: [InBackground<PageOutcome>] = []
        // Whatever happens, no write is left running once the sync returns or throws.
        defer {
            for pending in landing { _ = try? pending.value() }
        }
        func finish(_ pending: InBackground<PageOutcome>) throws {
            let outcome = try pending.value()
            outcome.add(to: &report)
            observer?.pageLanded?(report)
            done += outcome.actions
            options.progress?(min(done, total), total)
        }
        func execute(_ pairs: [(ReplicaEntry?, ReplicaEntry?)]) throws {
            if observer?.shouldStop() == true { throw CancellationError() }
            let page = try prepare(pairs.map { SyncPlanner.action(a: $0.0, b: $0.1, preference: options.preference, merge: options.merge) })
            if landing.count >= window { try finish(landing.removeFirst()) }
            landing.append(InBackground { try self.land(page) })
        }
        if let kept {
            for pairs in kept { try execute(pairs) }
        } else {
            try walk.forEachPage(execute)
        }
        while !landing.isEmpty { try finish(landing.removeFirst()) }
        observer?.step?("landed")
        try moveCheckpoints(walk, after: report)
        return report
    }

    func replica(_ side: SyncSide) -> any SyncReplica { side == .a ? a : b }

    /// The error for an object `action` would carry between hosts that is over the protocol's
    /// limit; nil when it carries none.
    private func overLimit(_ action: SyncAction) -> SyncError? {
        let carried: [(entry: ReplicaEntry, from: SyncSide)]
        switch action {
        case .copy(let to, let source, _, _): carried = [(source, to.other)]
        // The kept version goes to the loser's side and the lost one is read to save its copy.
        case .conflict(let winner, let kept, let lost, _, _): carried = [(kept, winner), (lost, winner.other)]
        case .fieldMerge(_, _, let otherwise): return overLimit(otherwise)
        case .none, .merge: return nil
        }
        guard let large = carried.first(where: { !$0.entry.isDeleted && $0.entry.size > Wire.maximumObject }) else { return nil }
        return .tooLarge(id: large.entry.id.description, store: replica(large.from).name, size: large.entry.size)
    }

    /// Counts one action in `report` (and lists it, when the report lists actions). A field
    /// merge counts as what `merges` says it gave, as a conflict when it says nothing.
    private func record(_ action: SyncAction, merge merges: [ObjectID: FieldMergeOutcome] = [:], paths: [String]? = nil, in report: inout SyncReport)
    {
        switch action {
        case .none: return
        case .merge: report.vectorsMerged += 1
        case .copy(let to, let source, _, _):
            switch (to, source.isDeleted) {
            case (.a, false): report.copiedToA += 1
            case (.b, false): report.copiedToB += 1
            case (.a, true): report.deletedOnA += 1
            case (.b, true): report.deletedOnB += 1
            }
            report.actions?.append(.init(id: source.id.description, kind: source.isDeleted ? .delete : .copy, to: to))
        case .conflict(let winner, let kept, _, _, let copy):
            report.conflicts.append(.init(id: kept.id.description, winner: winner, copy: copy?.description, paths: paths))
            report.actions?.append(.init(id: kept.id.description, kind: .conflict, to: winner.other, copy: copy?.description, paths: paths))
        case .fieldMerge(let a, _, let otherwise):
            switch merges[a.id] {
            case .merged(_, let paths)?:
                report.merges.append(.init(id: a.id.description, paths: paths))
                report.actions?.append(.init(id: a.id.description, kind: .merge, to: .a, paths: paths))
            case .conflict(let paths)?: record(otherwise, paths: paths, in: &report)
            case nil: record(otherwise, in: &report)
            }
        }
    }

    /// What one write of a sync counts as in the report, once the side has applied it.
    enum Tally: Sendable {
        case copy(to: SyncSide, deleted: Bool)
        case conflict(SyncReport.Conflict, copy: ObjectID?)
        /// A conflict copy: reported with its conflict.
        case conflictCopy
        /// One side's write of a field merge: reported once all `writes` (one per side that
        /// did not already hold the merged bytes) have landed.
        case fieldMerge(SyncReport.Merge, writes: Int)
    }

    /// One write for one side, what it counts as, and the vector merge the sending side makes
    /// once it has landed (the sender has then seen what the receiver had).
    struct PlannedWrite: Sendable {
        var object: IncomingObject
        var tally: Tally
        var then: VectorMerge?
    }

    /// A page with its bytes read: what each side must write and merge.
    private struct PreparedPage: Sendable {
        var writes: [SyncSide: [PlannedWrite]] = [.a: [], .b: []]
        var merges: [SyncSide: [VectorMerge]] = [.a: [], .b: []]
        /// The conflict copies each side already holds with the right bytes (a sync cut short made them).
        var copied: [SyncSide: Set<ObjectID>] = [:]
        /// Objects whose bytes changed after the manifest was read, and merges of equal contents.
        var outcome = PageOutcome()
    }

    /// What a page did, added to the report once it has landed.
    private struct PageOutcome: Sendable {
        var copiedToA = 0
        var copiedToB = 0
        var deletedOnA = 0
        var deletedOnB = 0
        var vectorsMerged = 0
        var merges: [SyncReport.Merge] = []
        var conflicts: [SyncReport.Conflict] = []
        var skipped: [SyncReport.Skipped] = []
        /// The page's actions that did something, for the progress line.
        var actions = 0

        func add(to report: inout SyncReport) {
            report.copiedToA += copiedToA
            report.copiedToB += copiedToB
            report.deletedOnA += deletedOnA
            report.deletedOnB += deletedOnB
            report.vectorsMerged += vectorsMerged
            report.merges += merges
            report.conflicts += conflicts
            report.skipped += skipped
        }
    }

    /// Reads the bytes each side must send for one page of actions (both sides at once) and
    /// plans each side's writes. Writes nothing.
    private func prepare(_ actions: [SyncAction]) throws -> PreparedPage {
        var page = PreparedPage()
        page.outcome.actions = actions.count { $0 != .none }
        // The entries each side sends bytes of, and the conflict copies that may exist already.
        var reads: [SyncSide: [ReplicaEntry]] = [.a: [], .b: []]
        var copyIDs: [ObjectID] = []
        for action in actions {
            switch action {
            case .copy(let to, let source, _, _) where !source.isDeleted:
                reads[to.other]!.append(source)
            case .conflict(let winner, let kept, let lost, _, let copy):
                reads[winner]!.append(kept)
                reads[winner.other]!.append(lost)
                if let copy { copyIDs.append(copy) }
            case .fieldMerge(let a, let b, .conflict(_, _, _, _, let copy)):
                reads[.a]!.append(a)
                reads[.b]!.append(b)
                if let copy { copyIDs.append(copy) }
            default: break
            }
        }
        let (readA, readB) = try bothSides(busy: { !reads[$0]!.isEmpty || !copyIDs.isEmpty }) { [self, reads, copyIDs] side in
            try self.read(reads[side]!, copies: copyIDs, on: side)
        }
        let contents: [SyncSide: [ObjectID: Data]] = [.a: readA.contents, .b: readB.contents]
        let existingCopies: [SyncSide: [ObjectID: ContentHash]] = [.a: readA.copies, .b: readB.copies]
        let merged = try fieldMerges(actions, contents: contents)

        /// Queues `entry` (bytes read on `from`) for the other side, unless its bytes changed
        /// after the manifest was read (the next sync picks that up).
        func send(_ entry: ReplicaEntry, from: SyncSide, vector: VersionVector, expected: ContentHash?, tally: Tally) {
            var content: Data?
            if !entry.isDeleted {
                guard let data = contents[from]![entry.id] else {
                    page.outcome.skipped.append(.init(id: entry.id.description, side: from))
                    return
                }
                content = data
            }
            let version = IncomingVersion(vector: vector, modified: entry.modified, author: entry.author, expected: expected)
            let then = vector == entry.vector ? nil : VectorMerge(id: entry.id, hash: entry.hash, vector: vector)
            page.writes[from.other]!.append(
                PlannedWrite(
                    object: IncomingObject(id: entry.id, fileExtension: fileExtension(entry.file), content: content, version: version),
                    tally: tally, then: then))
        }
        /// Keeps `kept` at the id on both sides and `lost` as the conflict copy `copy`.
        func keepBoth(winner: SyncSide, kept: ReplicaEntry, lost: ReplicaEntry, vector: VersionVector, copy: ObjectID?, paths: [String]?) {
            let loser = winner.other
            guard let lostBytes = contents[loser]![lost.id] else {
                page.outcome.skipped.append(.init(id: lost.id.description, side: loser))
                return
            }
            if let copy {
                for side in SyncSide.allCases where existingCopies[side]![copy] != lost.hash {
                    let version = IncomingVersion(
                        vector: lost.vector, modified: lost.modified, author: lost.author, expected: existingCopies[side]![copy])
                    page.writes[side]!.append(
                        PlannedWrite(
                            object: IncomingObject(id: copy, fileExtension: fileExtension(lost.file), content: lostBytes, version: version),
                            tally: .conflictCopy, then: nil))
                }
            }
            let conflict = SyncReport.Conflict(id: kept.id.description, winner: winner, copy: copy?.description, paths: paths)
            send(kept, from: winner, vector: vector, expected: lost.hash, tally: .conflict(conflict, copy: copy))
        }
        for action in actions {
            switch action {
            case .none:
                continue
            case .merge(let merge):
                page.merges[.a]!.append(merge)
                page.merges[.b]!.append(merge)
                page.outcome.vectorsMerged += 1
            case .copy(let to, let source, let target, let vector):
                send(source, from: to.other, vector: vector, expected: target?.liveHash, tally: .copy(to: to, deleted: source.isDeleted))
            case .fieldMerge(let a, let b, let otherwise):
                guard case .merged(let bytes, let paths)? = merged[a.id] else {
                    guard case .conflict(let winner, let kept, let lost, let vector, let copy) = otherwise else { continue }
                    let paths: [String]? = if case .conflict(let paths)? = merged[a.id] { paths } else { nil }
                    keepBoth(winner: winner, kept: kept, lost: lost, vector: vector, copy: copy, paths: paths)
                    continue
                }
                let version = SyncPlanner.mergedVersion(a, b)
                let merge = SyncReport.Merge(id: a.id.description, paths: paths)
                // A side that already holds the merged bytes (it made the other's change too)
                // only takes the merged vector: the store makes no version of unchanged bytes.
                let hash = ContentHash(of: bytes)
                let writes = [(SyncSide.a, a), (.b, b)].filter { side, entry in
                    guard entry.hash == hash else { return true }
                    page.merges[side]!.append(VectorMerge(id: a.id, hash: hash, vector: version.vector))
                    return false
                }
                for (side, entry) in writes {
                    let incoming = IncomingVersion(vector: version.vector, modified: version.modified, author: version.author, expected: entry.hash)
                    page.writes[side]!.append(
                        PlannedWrite(
                            object: IncomingObject(id: a.id, fileExtension: fileExtension(a.file), content: bytes, version: incoming),
                            tally: .fieldMerge(merge, writes: writes.count), then: nil))
                }
            case .conflict(let winner, let kept, let lost, let vector, let copy):
                keepBoth(winner: winner, kept: kept, lost: lost, vector: vector, copy: copy, paths: nil)
            }
        }
        page.copied = existingCopies.mapValues { Set($0.keys) }
        return page
    }

    /// The bytes of `entries` on one side (where they still match their hashes), and the
    /// hashes of the conflict copies among `copies` that side holds.
    func read(_ entries: [ReplicaEntry], copies: [ObjectID], on side: SyncSide) throws -> (
        contents: [ObjectID: Data], copies: [ObjectID: ContentHash]
    ) {
        let data = entries.isEmpty ? [] : try replica(side).contents(of: entries)
        let contents = Dictionary(zip(entries.map(\.id), data).compactMap { id, data in data.map { (id, $0) } }, uniquingKeysWith: { a, _ in a })
        let found = copies.isEmpty ? [] : try replica(side).entries(for: copies)
        let hashes = Dictionary(found.compactMap { $0.flatMap { e in e.hash.map { (e.id, $0) } } }, uniquingKeysWith: { a, _ in a })
        return (contents, hashes)
    }

    /// Writes one page: each side's objects in one batch, the two sides at once, then merges
    /// vectors where contents were already alike.
    private func land(_ page: PreparedPage) throws -> PageOutcome {
        var outcome = page.outcome
        var merges = page.merges
        var copied = page.copied
        // A field merge is reported once its version has landed on every side it was written to.
        var mergeLanded: [String: Int] = [:]
        // Conflict copies land first, on both sides, in batches of their own: a loser's side
        // gives up the id only once the losing version is saved beside it.
        for copies in [true, false] {
            var queued: [SyncSide: [PlannedWrite]] = [:]
            for side in SyncSide.allCases {
                queued[side] = page.writes[side]!.filter { write in
                    if case .conflictCopy = write.tally { return copies }
                    if !copies, case .conflict(_, let copy?) = write.tally {
                        return copied[side]!.contains(copy)
                    }
                    return !copies
                }
            }
            let (appliedA, appliedB) = try bothSides(busy: { !queued[$0]!.isEmpty }) { [self, queued] side in
                try self.apply(queued[side]!, on: side)
            }
            for (side, applied) in [(SyncSide.a, appliedA), (.b, appliedB)] {
                for (write, ok) in zip(queued[side]!, applied) {
                    guard ok else {
                        outcome.skipped.append(.init(id: write.object.id.description, side: side))
                        continue
                    }
                    if let then = write.then { merges[side.other]!.append(then) }
                    observer?.landed(write.object, on: side, tally: write.tally)
                    switch write.tally {
                    case .copy(.a, false): outcome.copiedToA += 1
                    case .copy(.b, false): outcome.copiedToB += 1
                    case .copy(.a, true): outcome.deletedOnA += 1
                    case .copy(.b, true): outcome.deletedOnB += 1
                    case .conflict(let conflict, _): outcome.conflicts.append(conflict)
                    case .conflictCopy: copied[side]!.insert(write.object.id)
                    case .fieldMerge(let merge, let writes):
                        mergeLanded[merge.id, default: 0] += 1
                        if mergeLanded[merge.id] == writes { outcome.merges.append(merge) }
                    }
                }
            }
        }
        // A kept version held back because its copy did not land on the loser's side waits
        // for the next sync, as a skipped write does.
        for side in SyncSide.allCases {
            for write in page.writes[side]! {
                guard case .conflict(let conflict, let copy?) = write.tally, !copied[side]!.contains(copy) else { continue }
                outcome.skipped.append(.init(id: conflict.id, side: side))
            }
        }
        for side in SyncSide.allCases where !merges[side]!.isEmpty {
            try replica(side).mergeVectors(merges[side]!)
        }
        return outcome
    }

    /// Runs `body` for side A and side B: at once, on this thread and one more, when both are
    /// `busy`; one after the other on this thread when one is not (no thread for nothing to do).
    func bothSides<T: Sendable>(busy: (SyncSide) -> Bool, _ body: @escaping @Sendable (SyncSide) throws -> T) throws -> (T, T) {
        if busy(.a) && busy(.b) { return try inParallel(splittingCores: bothHere, { try body(.a) }, { try body(.b) }) }
        return (try body(.a), try body(.b))
    }

    /// Both stores are in directories on this machine, worked on by this process: when both
    /// sides work at once, each gets half the cores. (A far side has its own process and host.)
    private var bothHere: Bool { a is LocalReplica && b is LocalReplica }

    /// Applies `writes` on one side; no call at all when there are none.
    private func apply(_ writes: [PlannedWrite], on side: SyncSide) throws -> [Bool] {
        writes.isEmpty ? [] : try replica(side).apply(writes.map(\.object))
    }

    /// Moves each side's checkpoint of the other past everything this sync merged. Called
    /// once every write is durable, never before; not at all when a write was skipped (an
    /// object changed meanwhile, perhaps only in its stamp, which gives it no new sequence):
    /// the next sync then compares the same rows again.
    /// A checkpoint that would not move is not written again: a no-op then makes no durable
    /// commit on either side (over ssh, a round trip and a flush on the far host).
    private func moveCheckpoints(_ walk: Walk, after report: SyncReport) throws {
        guard report.skipped.isEmpty else { return }
        let ofB = try b.sequenceAfterOwnWrites(since: walk.sequenceB)
        if ofB != walk.mergedOfB { try a.setCheckpoint(for: b.replica, to: ofB) }
        let ofA = try a.sequenceAfterOwnWrites(since: walk.sequenceA)
        if ofA != walk.mergedOfA { try b.setCheckpoint(for: a.replica, to: ofA) }
    }
}

extension ReplicaEntry {
    /// The hash of the live contents; nil for a tombstone.
    var liveHash: ContentHash? { isDeleted ? nil : hash }
}
