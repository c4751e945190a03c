import Foundation

/// Stages a large batch's files on a thread of its own while the batch's body is still
/// encoding the next objects, so that encoding (which must stay on the caller's thread: a
/// model need not be `Sendable`) and creating files, the two largest costs of a batch, run on
/// two cores at once. When the body returns, the caller's thread stages what is left beside it.
///
/// A file staged here is what ``ArchiveStore/apply(_:stagedBy:)`` would have staged itself:
/// written in `.archive-sync/staging`, unflushed, its object's hash computed on the way. What
/// is staged before a failure, or for a body that throws, is removed; a process killed
/// meanwhile leaves it to the next open, which empties the staging directory.
///
/// A collection that has no directory yet is staged whole (``StagedCollection``): its saves
/// are written under their own names in a directory of its own in the staging directory, and
/// after the commit one rename puts that directory in place, instead of a rename per file.
///
/// Once the body has returned, the commit records each write as soon as it is staged
/// (``staged(_:)``): the caller's thread records while this one stages, and stages itself
/// whenever the next write to record is not ready, so that both cores work until the end.
/// A sync's page of conditional writes is staged and recorded the same way
/// (``ArchiveStore/applyChecked(_:then:)``), its collections never whole.
final class BatchStager: @unchecked Sendable {
    /// A batch starts staging in the background once it holds this many writes: below it, a
    /// thread costs more than it saves.
    static let threshold = 256
    /// Writes claimed at once by a thread, so that the lock is taken once per chunk.
    private static let chunk = 16

    private let store: ArchiveStore
    private let staging: Descriptor
    /// Whether a new collection may be staged whole: not for conditional writes (a sync's
    /// page), whose commit checks each object's own file on disk.
    private let wholeCollections: Bool
    private let racyBefore = Manifest.now() - Manifest.racyWindow

    // Guarded by `condition`.
    private let condition = NSCondition()
    private var writes: [PendingWrite] = []
    private var temps: [String?] = []
    /// Where each write is staged when not under a temp name: its new collection's directory.
    private var wholes: [StagedCollection?] = []
    /// Whether each write is staged (or given up on, with `failure` set).
    private var done: [Bool] = []
    /// The collections saved into so far, with the directory each is staged in whole, if it is.
    private var collections: [ExactName: StagedCollection?] = [:]
    /// The objects written so far: only an object's first write can be staged whole (a later
    /// one is staged under a temp name, and put in place after the directory, in order).
    private var seen: Set<ObjectID> = []
    /// The first write no thread has claimed.
    private var next = 0
    /// Writes claimed and not yet staged (or given up on).
    private var inFlight = 0
    private var closed = false
    private var workerWaiting = false
    private var failure: (any Error)?

    /// Starts staging `writes` and whatever ``add(_:)`` brings next; nil when the store takes
    /// no writes now (``ArchiveStore/apply(_:stagedBy:)`` then says why) or has one core only.
    static func start(for store: ArchiveStore, with writes: [PendingWrite], wholeCollections: Bool = true) -> BatchStager? {
        guard parallelLanes(threshold, threshold: threshold) > 1,
            (try? store.refuseIfReadOnly()) != nil, (try? store.requireRecovered()) != nil,
            let staging = try? store.stagingDirectory()
        else { return nil }
        let stager = BatchStager(store: store, staging: staging, wholeCollections: wholeCollections)
        for write in writes { stager.add(write) }
        Thread { stager.drain() }.start()
        return stager
    }

    private init(store: ArchiveStore, staging: Descriptor, wholeCollections: Bool) {
        self.store = store
        self.staging = staging
        self.wholeCollections = wholeCollections
    }

    /// Queues one more write of the batch, in order.
    func add(_ write: PendingWrite) {
        condition.withLock {
            writes.append(write)
            temps.append(nil)
            done.append(false)
            wholes.append(stagedWhole(write))
            if workerWaiting, writes.count - next >= Self.chunk { condition.signal() }
        }
    }

    /// Where `write` is staged: in its collection's own directory when the collection has no
    /// directory in the store and this is a save and the first write of its object in the
    /// batch; else (nil) under a temp name. Called in the batch's order, under `condition`.
    private func stagedWhole(_ write: PendingWrite) -> StagedCollection? {
        guard wholeCollections, seen.insert(write.id).inserted, write.content != nil else { return nil }
        let name = ExactName(write.id.collection)
        if collections[name] == nil {
            // Looked at once, at the batch's first save into the collection. A directory another
            // writer makes meanwhile is found at the rename: the files then go one by one.
            let absent = FileSystem.identity(of: FileName.encode(write.id.collection), in: store.root) == nil
            collections[name] = .some(absent ? StagedCollection(write.id.collection, in: staging, of: store) : nil)
        }
        return collections[name] ?? nil
    }

    /// Ends the batch: no write is added after this. Gives the writes as they are known now,
    /// not yet staged (each with the collection it is staged whole in, if it is); the commit
    /// takes each one staged from ``staged(_:)``.
    func close() -> [StagedWrite] {
        condition.withLock {
            closed = true
            condition.broadcast()
            return writes.indices.map { StagedWrite(write: writes[$0], temp: nil, whole: wholes[$0]) }
        }
    }

    /// Write `index` once it is staged, with its staged file. While it is not, this thread
    /// stages writes no thread has claimed yet, or waits. Throws the first staging failure.
    /// Called after ``close()``.
    func staged(_ index: Int) throws -> StagedWrite {
        while true {
            let claimed = try condition.withLock { () throws -> (Int, [PendingWrite], [StagedCollection?])? in
                while true {
                    if let failure { throw failure }
                    if done[index] { return nil }
                    if let claimed = claimReady() { return claimed }
                    condition.wait()
                }
            }
            guard let (start, writes, wholes) = claimed else {
                return condition.withLock { StagedWrite(write: self.writes[index], temp: temps[index], whole: self.wholes[index]) }
            }
            stage(writes, from: start, wholes: wholes)
        }
    }

    /// Every write with its staged file, staging on this thread too what is left (nothing,
    /// once ``staged(_:)`` has given every write). On a failure, removes every staged file and
    /// throws the first error. Called after ``close()``.
    func finish() throws -> [StagedWrite] {
        drain()
        let (writes, temps, wholes, failure) = waitForWorker()
        if let failure {
            removeStaged(temps)
            throw failure
        }
        return writes.indices.map { StagedWrite(write: writes[$0], temp: temps[$0], whole: wholes[$0]) }
    }

    /// Stops staging and removes what was staged: the batch is not applied.
    func cancel() {
        condition.withLock {
            closed = true
            failure = failure ?? CancellationError()
            condition.broadcast()
        }
        removeStaged(waitForWorker().temps)
    }

    /// Waits until no thread stages any more; gives the writes and what was staged for them.
    private func waitForWorker() -> (writes: [PendingWrite], temps: [String?], wholes: [StagedCollection?], failure: (any Error)?) {
        condition.withLock {
            while inFlight > 0 || !closed { condition.wait() }
            return (writes, temps, wholes, failure)
        }
    }

    private func removeStaged(_ temps: [String?]) {
        for temp in temps.compactMap({ $0 }) { _ = try? store.removeStaged(temp, in: staging) }
        for case let whole?? in condition.withLock({ collections.values }) { whole.remove() }
    }

    /// Stages writes until there are none left to claim and the batch is closed (or a staging failed).
    private func drain() {
        while let (start, claimed, wholes) = claim() { stage(claimed, from: start, wholes: wholes) }
    }

    /// Stages `claimed`, the writes from index `start` on, and marks them done.
    private func stage(_ claimed: [PendingWrite], from start: Int, wholes: [StagedCollection?]) {
        var staged: [(PendingWrite, String?)] = []
        var error: (any Error)?
        for (offset, var write) in claimed.enumerated() where error == nil {
            let whole = wholes[offset]
            let temp = write.content == nil || whole != nil ? nil : store.tempName()
            do {
                if write.content != nil {
                    if write.hash == nil { write.hash = write.content.map(ContentHash.init(of:)) }
                    write.stamp = try store.stageFile(write, as: temp ?? write.file, in: whole?.directory ?? staging, racyBefore: racyBefore)
                }
            } catch let failed {
                error = failed
            }
            // Kept on a failure too: the create may have made the file before the write failed.
            staged.append((write, temp))
        }
        condition.withLock {
            for (offset, (write, temp)) in staged.enumerated() {
                writes[start + offset] = write
                temps[start + offset] = temp
                done[start + offset] = true
            }
            inFlight -= claimed.count
            if let error { failure = failure ?? error }
            condition.broadcast()
        }
    }

    /// The next writes to stage, the index of the first, and where each is staged whole (if
    /// it is); nil when there is nothing more to do.
    private func claim() -> (Int, [PendingWrite], [StagedCollection?])? {
        condition.withLock {
            while failure == nil {
                if let claimed = claimReady() { return claimed }
                if closed { return nil }
                workerWaiting = true
                condition.wait()
                workerWaiting = false
            }
            return nil
        }
    }

    /// ``claim()`` without waiting: a chunk (or, once closed, what is left), or nil. Under `condition`.
    private func claimReady() -> (Int, [PendingWrite], [StagedCollection?])? {
        let ready = writes.count - next
        guard ready >= Self.chunk || (closed && ready > 0) else { return nil }
        let start = next
        next += min(ready, Self.chunk)
        inFlight += next - start
        // A copy, not a slice: a slice would share `writes`'s storage, and every `add`
        // meanwhile would copy the whole array.
        return (start, Array(writes[start..<next]), Array(wholes[start..<next]))
    }
}

extension ArchiveStore {
    /// Writes `write`'s new bytes as `name` in `directory` (the staging directory, or a new
    /// collection's directory staged whole), unflushed.
    ///
    /// A sync's file keeps the time its object was modified, as `rsync -a` keeps times. A
    /// time older than `racyBefore` also makes its stamp trustworthy at once: any later write
    /// gives the file a new mtime. (A file written now may be written again within the
    /// clock's granularity without its stamp changing, so the next scan reads it.)
    func stageFile(_ write: PendingWrite, as name: String, in directory: Descriptor, racyBefore: Int64) throws -> FileStamp {
        let modified = write.incoming.map(\.modified).flatMap { $0 > 0 && $0 < racyBefore ? $0 : nil }
        return try FileSystem.writeNewFile(
            name, in: directory, data: write.content ?? Data(), sync: false, modified: modified, path: directory.path.appendingComponent(name))
    }

    /// Removes a staged file; one already gone is not an error.
    func removeStaged(_ temp: String, in staging: Descriptor) throws {
        try FileSystem.removeFile(temp, in: staging, path: staging.path.appendingComponent(temp))
    }
}

/// A new collection's directory that a batch stages whole (``BatchStager``): made in
/// `.archive-sync/staging` under a temp name (which names its owner, for the clean-up of an
/// open), it receives the batch's saves of the collection under their own file names, and
/// after the commit one rename makes it the collection's directory
/// (``ArchiveStore/apply(_:stagedBy:)``). A cut before that rename leaves it where the next
/// open removes it, and the commit's intent puts the files back from the manifest.
final class StagedCollection: Sendable {
    let collection: String
    /// Its name in the staging directory.
    let name: String
    /// Open on it wherever it is: after the rename, on the collection's directory.
    let directory: Descriptor
    private let staging: Descriptor

    /// Makes the directory; nil when it cannot (the batch then stages the collection file by file).
    init?(_ collection: String, in staging: Descriptor, of store: ArchiveStore) {
        let name = store.tempName()
        let path = staging.path.appendingComponent(name)
        guard (try? FileSystem.makeDirectory(name, in: staging, path: path)) == true,
            let directory = try? FileSystem.openDirectory(name, in: staging, path: path)
        else { return nil }
        self.collection = collection
        self.name = name
        self.directory = directory
        self.staging = staging
    }

    /// Removes the directory and its files if it is still in the staging directory (looked up
    /// by name there: once renamed into place, it is the collection's and is left alone).
    func remove() {
        try? FileSystem.removeDirectory(name, in: staging, path: staging.path.appendingComponent(name))
    }
}
