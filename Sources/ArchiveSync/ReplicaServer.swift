import ArchiveStore
import Foundation

/// The far side of a sync between hosts: `archive-sync serve --stdio STORE`.
///
/// Answers one request per frame with the store's ``LocalReplica``, the same operations as
/// ``SyncReplica``'s methods. It is confined to its store: a request names objects by id
/// (checked with the same rules as keys), never by path, and contents are read from the
/// files its own manifest names. Each request is decoded and checked in full before the
/// store is touched, so a frame that breaks the protocol changes nothing; the session then
/// ends with exit status 2.
///
/// ```swift
/// let server = ReplicaServer(storePath: "/srv/store", channel: FrameChannel(input: 0, output: 1)) { line in
///     FileHandle.standardError.write(Data((line + "\n").utf8))
/// }
/// exit(server.run())
/// ```
package final class ReplicaServer {
    private let storePath: String
    private let create: Bool
    private let channel: FrameChannel
    private let log: (String) -> Void
    private var replica: LocalReplica?
    /// The protocol version the handshake chose.
    private var version: UInt32 = 0
    /// Set by a live session's watch request: sends then go through it, one at a time.
    private var live: ServerLive?

    /// - Parameters:
    ///   - storePath: the store this server is confined to.
    ///   - create: make the directory a store when it is not one (`sync --force`).
    ///   - channel: where requests come from and replies go.
    ///   - log: where one-sentence errors go (stderr: stdout carries only frames).
    package init(storePath: String, create: Bool = false, channel: FrameChannel, log: @escaping (String) -> Void) {
        self.storePath = storePath
        self.create = create
        self.channel = channel
        self.log = log
    }

    /// Serves until the client ends the session.
    /// - Returns: the exit status: 0 when the client ended the session, 1 when the connection
    ///   closed before that, 2 when a frame broke the protocol or the store could not be opened.
    package func run() -> Int32 {
        defer { live?.stop() }
        while true {
            let request: Wire.Request
            do {
                live?.waiting(true)
                let (kind, payload) = try channel.receive()
                live?.waiting(false)
                if kind == .ping && live != nil { continue }
                request = try Wire.Request.decode(kind, payload)
            } catch is ChannelClosed {
                // A live session has no last request: the client closes the connection.
                if live != nil { return 0 }
                log("the other side closed the connection before the end of the session")
                return 1
            } catch {
                return refuse("\(error)")
            }
            do {
                let reply = try handle(request)
                try send(.ok, reply)
                if case .watch(_, let debounce) = request, let live, let store = replica?.store { try live.start(store: store, debounce: debounce) }
                if case .end = request, live == nil { return 0 }
            } catch let error as WireError {
                return refuse(error.description)
            } catch is ChannelClosed {
                log("the other side closed the connection before the end of the session")
                return 1
            } catch let error as HandshakeFailed {
                sendFailure(error.message)
                log(error.message)
                return 2
            } catch {
                // The store refused a valid request (another sync holds its lock, a disk error):
                // the client reports it and ends the session.
                sendFailure("\(error)")
            }
        }
    }

    /// Objects this session has written (each write of a sync lands whole or not at all).
    private var written = 0

    /// Ends the session over a frame that broke the protocol: says why on both channels, and
    /// what the session changed (the refused frame itself changed nothing).
    private func refuse(_ message: String) -> Int32 {
        sendFailure(message)
        let changed =
            written == 0
            ? "no object in the store was changed"
            : "nothing of that request was applied (\(written == 1 ? "1 object" : "\(written) objects") written earlier in this session \(written == 1 ? "stays" : "stay"))"
        log("refused a request: \(message); \(changed)")
        return 2
    }

    private func sendFailure(_ message: String) {
        var writer = WireWriter()
        writer.string(String(message.prefix(4_000)))
        try? send(.failure, writer.bytes)
    }

    private func send(_ kind: Wire.Kind, _ payload: [UInt8]) throws {
        if let live { try live.send(kind, payload) } else { try channel.send(kind, payload) }
    }

    private struct HandshakeFailed: Error {
        let message: String
    }

    private func handle(_ request: Wire.Request) throws -> [UInt8] {
        var writer = WireWriter()
        guard let replica else {
            guard case .hello(let hello) = request else { throw WireError("the first request of a session must be the handshake") }
            return try self.hello(hello)
        }
        switch request {
        case .hello:
            throw WireError("a second handshake in one session")
        case .begin:
            try replica.begin()
        case .end:
            replica.end()
        case .makeCurrent:
            writer.bool(try replica.makeCurrent())
        case .changeSequence:
            writer.count(try replica.changeSequence())
        case .liveObjectCount:
            writer.count(try replica.liveObjectCount())
        case .checkpoint(let peer):
            let sequence = try replica.checkpoint(for: peer)
            writer.bool(sequence != nil)
            if let sequence { writer.count(sequence) }
        case .setCheckpoint(let peer, let sequence):
            try replica.setCheckpoint(for: peer, to: sequence)
        case .sequenceAfterOwnWrites(let sequence):
            writer.count(try replica.sequenceAfterOwnWrites(since: sequence))
        case .entriesAfter(let id, let limit):
            Self.page(try replica.entries(after: id, limit: limit), into: &writer)
        case .entriesChanged(let after, let through, let limit):
            Self.page(try replica.entries(changedAfter: after, through: through, limit: limit), into: &writer)
        case .entriesFor(let ids):
            let entries = try replica.entries(for: ids)
            writer.count(entries.count)
            for entry in entries {
                writer.bool(entry != nil)
                if let entry { writer.entry(entry) }
            }
            guard writer.bytes.count <= Wire.maximumFrame else {
                throw SyncError.remote("the manifest rows asked for do not fit in one frame")
            }
        case .contents(let wanted):
            try contents(wanted, &writer, replica)
        case .apply(let objects):
            let applied = try replica.apply(objects)
            written += applied.count { $0 }
            writer.count(applied.count)
            for ok in applied { writer.bool(ok) }
        case .mergeVectors(let merges):
            try replica.mergeVectors(merges)
        case .watch(let keepalive, _):
            guard version >= Wire.liveVersion else { throw WireError("a watch request in a session of protocol version \(version), which has none") }
            guard live == nil else { throw WireError("a second watch request in one session") }
            live = try ServerLive(channel: channel, keepalive: keepalive, store: replica.store)
        case .mergeBases(let queries):
            // As a server of version 1 would: it knows no such request.
            guard version >= 2 else { throw WireError("a merge-base request in a session of protocol version \(version), which has none") }
            Self.mergeBases(try replica.mergeBases(queries), into: &writer)
        }
        return writer.bytes
    }

    /// The handshake: the protocol versions each side speaks, then the store is opened.
    private func hello(_ hello: Wire.Hello) throws -> [UInt8] {
        let chosen = min(hello.versions.upperBound, Wire.versions.upperBound)
        guard Wire.versions.contains(chosen), hello.versions.contains(chosen) else {
            try channel.send(.ok, Wire.HelloReply(versions: Wire.versions, chosen: nil, store: nil).encode())
            throw HandshakeFailed(
                message:
                    "the other side speaks protocol version \(Wire.describe(hello.versions)) and this side \(Wire.describe(Wire.versions)); install the same release of archive-sync on both hosts"
            )
        }
        let store: ArchiveStore
        do {
            store = try ArchiveStore(directory: storePath, options: .init(create: false))
        } catch ArchiveError.notAStore(let path, let reason) where create {
            _ = (path, reason)
            store = try ArchiveStore(directory: storePath, options: .init(create: true))
        } catch {
            throw HandshakeFailed(message: "\(error)")
        }
        let local = LocalReplica(store)
        replica = local
        version = chosen
        if let peer = hello.peer { log("serving \(store.path) (replica \(local.replica)) to replica \(peer)") }
        return Wire.HelloReply(versions: Wire.versions, chosen: chosen, store: (local.replica, store.path)).encode()
    }

    /// A page of entries, cut short (and marked so) when it would outgrow a batch.
    private static func page(_ entries: [ReplicaEntry], into writer: inout WireWriter) {
        var body = WireWriter()
        var count = 0
        for entry in entries {
            if body.bytes.count > Wire.batchBytes { break }
            body.entry(entry)
            count += 1
        }
        writer.bool(count < entries.count)
        writer.count(count)
        writer.append(body)
    }

    /// Answers to merge-base queries, within a frame: the newest ``Wire/maximumCount`` vectors
    /// of a history, and a base's bytes only while they fit (without them there is no merge,
    /// only a conflict copy).
    private static func mergeBases(_ answers: [MergeBaseAnswer], into writer: inout WireWriter) {
        writer.count(answers.count)
        for answer in answers {
            let vectors = answer.vectors.suffix(Wire.maximumCount)
            writer.count(vectors.count)
            for vector in vectors { writer.vector(vector) }
            let base = answer.base.flatMap { writer.bytes.count + $0.count < Wire.maximumFrame - 4096 ? $0 : nil }
            writer.bool(base != nil)
            if let base { writer.data(base) }
        }
    }

    /// The bytes of objects the client asks for by id and hash, read from the files this
    /// store's own manifest names; nil where the object no longer holds that hash.
    private func contents(_ wanted: [Wire.Request.ContentRequest], _ writer: inout WireWriter, _ replica: LocalReplica) throws {
        let rows = try replica.entries(for: wanted.map(\.id))
        writer.count(wanted.count)
        for (object, row) in zip(wanted, rows) {
            var data: Data?
            if let row, !row.isDeleted, let hash = object.hash, row.hash == hash, writer.bytes.count + row.size < Wire.maximumFrame - 4096 {
                data = try replica.store.contents(of: row)
            }
            // The manifest's size is only a claim: bytes that would not fit are sent as nil,
            // which the client takes for an object that changed (the next sync looks again).
            if let got = data?.count, writer.bytes.count + got >= Wire.maximumFrame - 4096 { data = nil }
            writer.bool(data != nil)
            if let data { writer.data(data) }
        }
    }
}
