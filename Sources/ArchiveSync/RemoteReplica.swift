import ArchiveLocking
import ArchiveProcess
import ArchiveStore
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A store at the far end of a pipe: `archive-sync serve --stdio STORE`, started through ssh
/// (or any command that runs a program on another host and joins its stdin and stdout).
///
/// ```swift
/// let far = try RemoteReplica(
///     command: ["ssh", "backup.example.com", "archive-sync serve --stdio /srv/store"],
///     name: "backup.example.com:/srv/store")
/// let report = try Sync(a: LocalReplica(store), b: far, options: SyncOptions()).runNow()
/// ```
///
/// The initializer starts the command and does the handshake, so ``replica`` is known before
/// ``begin()``. Each method is one request and one reply. A far side that breaks the protocol,
/// fails, or goes away throws ``SyncError/remote(_:)`` with what it (or ssh) said.
package final class RemoteReplica: SyncReplica {
    package let name: String
    package let replica: ReplicaID
    /// The protocol version both sides speak.
    package let version: UInt32
    /// Requests of several threads at once (a sync's window of pages being written) go out
    /// without waiting for one another's replies.
    private let connection: PipelinedConnection

    /// Starts `command` and does the handshake.
    ///
    /// - Parameters:
    ///   - command: the program and its arguments; the first word is looked up on `PATH`.
    ///   - name: how the store is named to the user, `host:path`.
    ///   - peer: the replica id of the store on this side, named in the handshake.
    ///   - versions: the protocol versions to offer (tests offer others).
    package init(command: [String], name: String, peer: ReplicaID? = nil, versions: ClosedRange<UInt32> = Wire.versions) throws {
        self.name = name
        let connection = try Connection(command: command)
        do {
            let hello = Wire.Request.hello(Wire.Hello(versions: versions, peer: peer))
            let reply = try Wire.HelloReply.decode(try connection.call(hello, name: name, beforeHandshake: true))
            version = try reply.agreedVersion(offered: versions, name: name)
            guard let store = reply.store else { throw WireError("the handshake reply names no store") }
            replica = store.replica
        } catch let error as WireError {
            connection.close()
            throw SyncError.remote("\(name): the far side sent a malformed handshake reply: \(error.description)")
        } catch {
            connection.close()
            throw error
        }
        self.connection = PipelinedConnection(connection, name: name)
    }

    deinit {
        connection.exclusive { $0.close() }
    }

    /// Sends one request and decodes its reply with `decode`, turning a malformed reply into
    /// ``SyncError/remote(_:)`` and ending the session.
    private func call<T>(_ request: Wire.Request, _ decode: ([UInt8]) throws -> T) throws -> T {
        let reply = try connection.call(request)
        do {
            return try decode(reply)
        } catch let error as WireError {
            connection.exclusive { $0.close() }
            throw SyncError.remote("\(name): the far side replied with a malformed message: \(error.description)")
        }
    }

    /// A reply that decodes but cannot be the answer to what was asked.
    private func malformed(_ what: String) -> SyncError {
        connection.exclusive { $0.close() }
        return SyncError.remote("\(name): the far side replied with a malformed message: \(what)")
    }

    package func begin() throws { try call(.begin, Wire.Reply.empty) }

    /// Ends the session: the far side releases its store's lock and exits. In a live
    /// session only the lock is released: the connection stays for the next cycle.
    ///
    /// Once the far side has answered `end`, this side does not wait for its process to exit:
    /// what it does then (its store's settle: a `syncfs` over its file system, SQLite's
    /// checkpoint) makes no write more durable than its commits did (docs/format.md#writes),
    /// and it was a third of a 1,000-object sync's time (remote-bench 3, Benchmarks/LOG.md).
    package func end() {
        let live = isLive.withLock { $0 }
        let ended = isOpen && (try? connection.call(.end)) != nil
        if !live { connection.exclusive { $0.close(waitingForExit: !ended) } }
    }

    private let isLive = TracedMutex(false)

    /// Makes this a live session's connection (protocol version 3): the far side watches its
    /// store (gathering events for `debounce`) and sends `notice` its change sequence whenever it moves; both sides keep the link
    /// alive, and `lost` is called once, with why, when it is gone (closed, or silent for
    /// ``Wire/Live/silence(after:)``).
    /// - Throws: ``SyncError/farSideCannotServe(_:)`` when the far side speaks an older version.
    package func goLive(
        keepalive: Duration, debounce: Duration, notice: @escaping @Sendable (Int) -> Void, lost: @escaping @Sendable (String) -> Void
    ) throws {
        guard version >= Wire.liveVersion else {
            throw SyncError.farSideCannotServe(
                "\(name): the far side speaks protocol version \(version), which has no live sessions (version \(Wire.liveVersion)); install the same release of archive-sync on both hosts"
            )
        }
        try call(.watch(keepalive: keepalive, debounce: debounce), Wire.Reply.empty)
        isLive.withLock { $0 = true }
        connection.exclusive { $0.goLive(keepalive: keepalive, notice: notice, lost: lost) }
    }

    /// Closes the connection (a live session's, at its end or when it is given up).
    package func close() {
        connection.exclusive { $0.close() }
    }

    /// The most requests that were on their way or being answered at once (``Sync``'s window).
    var mostRequestsInFlight: Int { connection.mostInFlight }

    /// False once the connection is closed (by either side, or given up).
    package var isOpen: Bool { connection.exclusive { !$0.isClosed } }

    package func makeCurrent() throws -> Bool { try call(.makeCurrent, Wire.Reply.flag) }
    package func changeSequence() throws -> Int { try call(.changeSequence) { try Wire.Reply.count($0, "a change sequence") } }
    package func liveObjectCount() throws -> Int { try call(.liveObjectCount) { try Wire.Reply.count($0, "an object count") } }
    package func checkpoint(for peer: ReplicaID) throws -> Int? { try call(.checkpoint(peer: peer), Wire.Reply.checkpoint) }

    package func setCheckpoint(for peer: ReplicaID, to sequence: Int) throws {
        try call(.setCheckpoint(peer: peer, sequence: sequence), Wire.Reply.empty)
    }

    package func sequenceAfterOwnWrites(since sequence: Int) throws -> Int {
        try call(.sequenceAfterOwnWrites(since: sequence)) { try Wire.Reply.count($0, "a change sequence") }
    }

    /// Pages of entries in id order, each id after the one before: a page out of order, or one
    /// cut short with nothing in it, would stall the walk of both manifests.
    package func entries(after id: ObjectID?, limit: Int) throws -> [ReplicaEntry] {
        var entries: [ReplicaEntry] = []
        var cursor = id
        while entries.count < limit {
            let want = min(limit - entries.count, Wire.maximumCount)
            let (page, cut) = try call(.entriesAfter(cursor, limit: want), Wire.Reply.page)
            try check(page, want: want, cut: cut)
            for entry in page {
                if let cursor, !(cursor < entry.id) { throw malformed("a page of the manifest is not in id order") }
                cursor = entry.id
            }
            entries += page
            if page.count < want && !cut { break }
        }
        return entries
    }

    /// Pages of entries in change order, each after the one before and none past `through`.
    package func entries(changedAfter after: Int, through: Int, limit: Int) throws -> [ReplicaEntry] {
        var entries: [ReplicaEntry] = []
        var after = after
        while entries.count < limit {
            let want = min(limit - entries.count, Wire.maximumCount)
            let (page, cut) = try call(.entriesChanged(after: after, through: through, limit: want), Wire.Reply.page)
            try check(page, want: want, cut: cut)
            for entry in page {
                guard entry.sequence > after, entry.sequence <= through else {
                    throw malformed("a page of changes is not in order after sequence \(after) and up to \(through)")
                }
                after = entry.sequence
            }
            entries += page
            if page.count < want && !cut { break }
        }
        return entries
    }

    private func check(_ page: [ReplicaEntry], want: Int, cut: Bool) throws {
        if page.count > want { throw malformed("\(page.count) entries came back where at most \(want) were asked for") }
        if cut && page.isEmpty { throw malformed("a page cut short holds no entries") }
    }

    package func entries(for ids: [ObjectID]) throws -> [ReplicaEntry?] {
        var entries: [ReplicaEntry?] = []
        entries.reserveCapacity(ids.count)
        for start in stride(from: 0, to: ids.count, by: 1_000) {
            let chunk = Array(ids[start..<min(start + 1_000, ids.count)])
            let page = try call(.entriesFor(chunk), Wire.Reply.entries)
            guard page.count == chunk.count else {
                throw SyncError.remote("\(name): the far side answered for \(page.count) of \(chunk.count) objects")
            }
            for (id, entry) in zip(chunk, page) where entry.map({ $0.id != id }) ?? false {
                throw malformed("the entry sent for \(id) names another object")
            }
            entries += page
        }
        return entries
    }

    /// Fetches contents in batches of at most ``Wire/batchBytes``, checking each object's
    /// bytes against the hash its entry names.
    package func contents(of entries: [ReplicaEntry]) throws -> [Data?] {
        if let large = entries.first(where: { !$0.isDeleted && $0.size > Wire.maximumObject }) {
            throw SyncError.remote("\(large.id) in \(name) is \(large.size) bytes, over \(Wire.describeObjectLimit)")
        }
        var result: [Data?] = []
        result.reserveCapacity(entries.count)
        for batch in batches(entries, size: { Wire.size(of: $0.id) + ($0.isDeleted ? 0 : $0.size) }) {
            let wanted = batch.map { Wire.Request.ContentRequest(id: $0.id, hash: $0.liveHash) }
            let page = try call(.contents(wanted), Wire.Reply.contents)
            guard page.count == batch.count else { throw SyncError.remote("\(name): the far side sent \(page.count) of \(batch.count) objects") }
            for (entry, data) in zip(batch, page) {
                if let data, ContentHash(of: data) != entry.hash {
                    close()
                    throw SyncError.remote("\(name): the bytes received for \(entry.id) do not match their hash; nothing was written")
                }
                result.append(data)
            }
        }
        return result
    }

    /// Sends writes in batches; an object over ``Wire/maximumObject`` is not sent and comes
    /// back false, as one that changed since the plan does.
    package func apply(_ objects: [IncomingObject]) throws -> [Bool] {
        // The sync refuses objects over the limit before it writes; one here got past that on a
        // manifest that understates its size. It is not sent, and is left for the next sync.
        let fits = objects.map { ($0.content?.count ?? 0) <= Wire.maximumObject }
        let sent = zip(objects, fits).filter(\.1).map(\.0)
        var landed: [Bool] = []
        landed.reserveCapacity(sent.count)
        // A write's size counts its id and vector too: a page of objects with long keys or
        // vectors must not outgrow a frame.
        for batch in batches(sent, size: { ($0.content?.count ?? 0) + Wire.size(of: $0.id) + Wire.size(of: $0.version.vector) + 200 }) {
            let applied = try call(.apply(Array(batch)), Wire.Reply.applied)
            guard applied.count == batch.count else {
                throw SyncError.remote("\(name): the far side answered for \(applied.count) of \(batch.count) writes")
            }
            landed += applied
        }
        var next = landed.makeIterator()
        return fits.map { fit in fit ? next.next() ?? false : false }
    }

    package func mergeVectors(_ merges: [VectorMerge]) throws {
        for batch in batches(merges, size: { Wire.size(of: $0.id) + Wire.size(of: $0.vector) + 40 }) {
            try call(.mergeVectors(Array(batch)), Wire.Reply.empty)
        }
    }

    package func mergeBases(_ queries: [MergeBaseQuery]) throws -> [MergeBaseAnswer] {
        // A far side of protocol version 1 has no such request (it would end the session over
        // a frame of unknown kind): its history is not asked; the other side's may hold the base.
        guard version >= 2 else { return queries.map { _ in .none } }
        var answers: [MergeBaseAnswer] = []
        // A batch of 100 keeps most replies (vectors and a base's bytes each) well within a frame.
        for start in stride(from: 0, to: queries.count, by: 100) {
            let batch = Array(queries[start..<min(start + 100, queries.count)])
            let page = try call(.mergeBases(batch), Wire.Reply.mergeBases)
            guard page.count == batch.count else {
                throw SyncError.remote("\(name): the far side answered for \(page.count) of \(batch.count) objects")
            }
            answers += page
        }
        return answers
    }

    /// Splits `items` into runs of at most ``Wire/maximumCount`` items and, past the first
    /// item of a run, at most ``Wire/batchBytes`` bytes.
    private func batches<T>(_ items: [T], size: (T) -> Int) -> [ArraySlice<T>] {
        var result: [ArraySlice<T>] = []
        var start = 0
        var bytes = 0
        for (i, item) in items.enumerated() {
            let itemSize = size(item)
            if i > start && (bytes + itemSize > Wire.batchBytes || i - start >= Wire.maximumCount) {
                result.append(items[start..<i])
                start = i
                bytes = 0
            }
            bytes += itemSize
        }
        if start < items.count { result.append(items[start...]) }
        return result
    }
}
