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
final class BatchStager: @unchecked Sendable {
    /// A batch starts staging in the background once it holds this many writes: below it, a
    /// thread costs more than it saves.
    static let threshold = 256
    /// Writes claimed at once by a thread, so that the lock is taken once per chunk.
    private static let chunk = 16

    private let store: ArchiveStore
    private let staging: Descriptor
    private let racyBefore = Manifest.now() - Manifest.racyWindow

    // Guarded by `condition`.
    private let condition = NSCondition()
    private var writes: [PendingWrite] = []
    private var temps: [String?] = []
    /// The first write no thread has claimed.
    private var next = 0
    /// Writes claimed and not yet staged (or given up on).
    private var inFlight = 0
    private var closed = false
    private var workerWaiting = false
    private var failure: (any Error)?

    /// Starts staging `writes` and whatever ``add(_:)`` brings next; nil when the store takes
    /// no writes now (``ArchiveStore/apply(_:stagedBy:)`` then says why) or has one core only.
    static func start(for store: ArchiveStore, with writes: [PendingWrite]) -> BatchStager? {
        guard parallelLanes(threshold, threshold: threshold) > 1,
            (try? store.refuseIfReadOnly()) != nil, (try? store.requireRecovered()) != nil,
            let staging = try? store.stagingDirectory()
        else { return nil }
        let stager = BatchStager(store: store, staging: staging)
        for write in writes { stager.add(write) }
        Thread { stager.drain() }.start()
        return stager
    }

    private init(store: ArchiveStore, staging: Descriptor) {
        self.store = store
        self.staging = staging
    }

    /// Queues one more write of the batch, in order.
    func add(_ write: PendingWrite) {
        condition.withLock {
            writes.append(write)
            temps.append(nil)
            if workerWaiting, writes.count - next >= Self.chunk { condition.signal() }
        }
    }

    /// Stages what is left on this thread too, and gives every write with its staged file.
    /// On a failure, removes every staged file and throws the first error.
    func finish() throws -> [StagedWrite] {
        close()
        drain()
        let (writes, temps, failure) = waitForWorker()
        if let failure {
            removeStaged(temps)
            throw failure
        }
        return zip(writes, temps).map { StagedWrite(write: $0, temp: $1) }
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

    private func close() {
        condition.withLock {
            closed = true
            condition.broadcast()
        }
    }

    /// Waits until no thread stages any more; gives the writes and what was staged for them.
    private func waitForWorker() -> (writes: [PendingWrite], temps: [String?], failure: (any Error)?) {
        condition.withLock {
            while inFlight > 0 || !closed { condition.wait() }
            return (writes, temps, failure)
        }
    }

    private func removeStaged(_ temps: [String?]) {
        for temp in temps.compactMap({ $0 }) { _ = try? store.removeStaged(temp, in: staging) }
    }

    /// Stages writes until there are none left to claim and the batch is closed (or a staging failed).
    private func drain() {
        while let (start, claimed) = claim() {
            var staged: [(PendingWrite, String?)] = []
            var error: (any Error)?
            for var write in claimed where error == nil {
                let temp = write.content == nil ? nil : store.tempName()
                do {
                    if let temp {
                        if write.hash == nil { write.hash = write.content.map(ContentHash.init(of:)) }
                        write.stamp = try store.stageFile(write, as: temp, in: staging, racyBefore: racyBefore)
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
                }
                inFlight -= claimed.count
                if let error { failure = failure ?? error }
                condition.broadcast()
            }
        }
    }

    /// The next writes to stage and the index of the first; nil when there is nothing more to do.
    private func claim() -> (Int, [PendingWrite])? {
        condition.withLock {
            while failure == nil {
                let ready = writes.count - next
                if ready >= Self.chunk || (closed && ready > 0) {
                    let start = next
                    next += min(ready, Self.chunk)
                    inFlight += next - start
                    // A copy, not a slice: a slice would share `writes`'s storage, and every
                    // `add` meanwhile would copy the whole array.
                    return (start, Array(writes[start..<next]))
                }
                if closed { return nil }
                workerWaiting = true
                condition.wait()
                workerWaiting = false
            }
            return nil
        }
    }
}

extension ArchiveStore {
    /// Writes `write`'s new bytes as `temp` in the staging directory, unflushed.
    ///
    /// A sync's file keeps the time its object was modified, as `rsync -a` keeps times. A
    /// time older than `racyBefore` also makes its stamp trustworthy at once: any later write
    /// gives the file a new mtime. (A file written now may be written again within the
    /// clock's granularity without its stamp changing, so the next scan reads it.)
    func stageFile(_ write: PendingWrite, as temp: String, in staging: Descriptor, racyBefore: Int64) throws -> FileStamp {
        let modified = write.incoming.map(\.modified).flatMap { $0 > 0 && $0 < racyBefore ? $0 : nil }
        return try FileSystem.writeNewFile(
            temp, in: staging, data: write.content ?? Data(), sync: false, modified: modified, path: stagedPath(temp))
    }

    /// Removes a staged file; one already gone is not an error.
    func removeStaged(_ temp: String, in staging: Descriptor) throws {
        try FileSystem.removeFile(temp, in: staging, path: stagedPath(temp))
    }

    private func stagedPath(_ temp: String) -> String {
        path.appendingComponent(FileName.metadataDirectory).appendingComponent(Self.stagingDirectory).appendingComponent(temp)
    }
}
