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
        while true {
            let kind: Wire.Kind
            let payload: [UInt8]
            do {
                (kind, payload) = try channel.receive()
            } catch is ChannelClosed {
                log("the other side closed the connection before the end of the session")
                return 1
            } catch {
                return refuse("\(error)")
            }
            do {
                var reader = WireReader(payload)
                let reply = try handle(kind, &reader)
                try channel.send(.ok, reply)
                if kind == .end { return 0 }
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

    /// Ends the session over a frame that broke the protocol: says why on both channels.
    private func refuse(_ message: String) -> Int32 {
        sendFailure(message)
        log("refused a request: \(message); the store was not changed")
        return 2
    }

    private func sendFailure(_ message: String) {
        var writer = WireWriter()
        writer.string(String(message.prefix(4_000)))
        try? channel.send(.failure, writer.bytes)
    }

    private struct HandshakeFailed: Error {
        let message: String
    }

    private func handle(_ kind: Wire.Kind, _ reader: inout WireReader) throws -> [UInt8] {
        var writer = WireWriter()
        guard let replica else {
            guard kind == .hello else { throw WireError("the first request of a session must be the handshake") }
            try hello(&reader, &writer)
            return writer.bytes
        }
        switch kind {
        case .hello:
            throw WireError("a second handshake in one session")
        case .ok, .failure:
            throw WireError("a reply where a request belongs")
        case .begin:
            try reader.finish()
            try replica.begin()
        case .end:
            try reader.finish()
            replica.end()
        case .makeCurrent:
            try reader.finish()
            writer.bool(try replica.makeCurrent())
        case .changeSequence:
            try reader.finish()
            writer.count(try replica.changeSequence())
        case .liveObjectCount:
            try reader.finish()
            writer.count(try replica.liveObjectCount())
        case .checkpoint:
            let peer = try reader.replica()
            try reader.finish()
            let sequence = try replica.checkpoint(for: peer)
            writer.bool(sequence != nil)
            if let sequence { writer.count(sequence) }
        case .setCheckpoint:
            let peer = try reader.replica()
            let sequence = try reader.count("a change sequence")
            try reader.finish()
            try replica.setCheckpoint(for: peer, to: sequence)
        case .sequenceAfterOwnWrites:
            let sequence = try reader.count("a change sequence")
            try reader.finish()
            writer.count(try replica.sequenceAfterOwnWrites(since: sequence))
        case .entriesAfter:
            let id = try reader.bool() ? try reader.id() : nil
            let limit = try reader.count(max: Wire.maximumCount, "a page size")
            try reader.finish()
            Self.page(try replica.entries(after: id, limit: limit), into: &writer)
        case .entriesChanged:
            let after = try reader.count("a change sequence")
            let through = try reader.count("a change sequence")
            let limit = try reader.count(max: Wire.maximumCount, "a page size")
            try reader.finish()
            Self.page(try replica.entries(changedAfter: after, through: through, limit: limit), into: &writer)
        case .entriesFor:
            let ids = try reader.list("ids") { try $0.id() }
            try reader.finish()
            let entries = try replica.entries(for: ids)
            writer.count(entries.count)
            for entry in entries {
                writer.bool(entry != nil)
                if let entry { writer.entry(entry) }
            }
            guard writer.bytes.count <= Wire.maximumFrame else {
                throw SyncError.remote("the manifest rows asked for do not fit in one frame")
            }
        case .contents:
            try contents(&reader, &writer, replica)
        case .apply:
            try apply(&reader, &writer, replica)
        case .mergeVectors:
            let merges = try reader.list("vector merges") { VectorMerge(id: try $0.id(), hash: try $0.hash(), vector: try $0.vector()) }
            try reader.finish()
            try replica.mergeVectors(merges)
        }
        return writer.bytes
    }

    /// The handshake: the protocol versions each side speaks, then the store is opened.
    private func hello(_ reader: inout WireReader, _ writer: inout WireWriter) throws {
        guard try reader.string(max: 64, "the program's name") == "archive-sync" else {
            throw WireError("the handshake does not come from archive-sync")
        }
        let low = UInt32(try reader.count(max: Int(UInt32.max), "a protocol version"))
        let high = UInt32(try reader.count(max: Int(UInt32.max), "a protocol version"))
        let peer = try reader.bool() ? try reader.replica() : nil
        try reader.finish()
        let chosen = min(high, Wire.versions.upperBound)
        writer.count(Int(Wire.versions.lowerBound))
        writer.count(Int(Wire.versions.upperBound))
        guard low <= high, Wire.versions.contains(chosen), (low...high).contains(chosen) else {
            writer.count(0)
            try channel.send(.ok, writer.bytes)
            throw HandshakeFailed(
                message:
                    "the other side speaks protocol version \(Self.describe(low...high)) and this side \(Self.describe(Wire.versions)); install the same release of archive-sync on both hosts"
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
        writer.count(Int(chosen))
        writer.replica(local.replica)
        writer.string(store.path)
        if let peer { log("serving \(store.path) (replica \(local.replica)) to replica \(peer)") }
    }

    static func describe(_ versions: ClosedRange<UInt32>) -> String {
        versions.count == 1 ? "\(versions.lowerBound)" : "\(versions.lowerBound) to \(versions.upperBound)"
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

    /// The bytes of objects the client asks for by id and hash, read from the files this
    /// store's own manifest names; nil where the object no longer holds that hash.
    private func contents(_ reader: inout WireReader, _ writer: inout WireWriter, _ replica: LocalReplica) throws {
        let wanted = try reader.list("objects") { (try $0.id(), try $0.hash()) }
        try reader.finish()
        let rows = try replica.entries(for: wanted.map(\.0))
        writer.count(wanted.count)
        for ((_, hash), row) in zip(wanted, rows) {
            var data: Data?
            if let row, !row.isDeleted, let hash, row.hash == hash, writer.bytes.count + row.size < Wire.maximumFrame - 4096 {
                data = try replica.store.contents(of: row)
            }
            writer.bool(data != nil)
            if let data { writer.data(data) }
        }
    }

    /// Writes what the client sent, once every object has been decoded and its bytes hash to
    /// what the client claimed.
    private func apply(_ reader: inout WireReader, _ writer: inout WireWriter, _ replica: LocalReplica) throws {
        let objects = try reader.list("objects") { reader in
            let id = try reader.id()
            let ext = try reader.fileExtension()
            var content: Data?
            if try reader.bool() {
                let data = try reader.data()
                guard let hash = try reader.hash(), ContentHash(of: data) == hash else {
                    throw WireError("the bytes sent for \(id) do not match their hash")
                }
                content = data
            }
            let version = IncomingVersion(
                vector: try reader.vector(), modified: try reader.signed(), author: try reader.replica(), expected: try reader.hash())
            return IncomingObject(id: id, fileExtension: ext, content: content, version: version)
        }
        try reader.finish()
        let applied = try replica.apply(objects)
        writer.count(applied.count)
        for ok in applied { writer.bool(ok) }
    }
}
