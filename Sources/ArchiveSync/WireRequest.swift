import ArchiveStore
import Foundation

extension Wire {
    /// One request of a session, declared once: the client encodes it and the far side
    /// decodes it, checked in full before the store is touched.
    ///
    /// ```swift
    /// let request = try Wire.Request.decode(frame: bytes)   // a WireError for anything malformed
    /// ```
    package enum Request: Sendable {
        case hello(Hello)
        case begin, end, makeCurrent, changeSequence, liveObjectCount
        case checkpoint(peer: ReplicaID)
        case setCheckpoint(peer: ReplicaID, sequence: Int)
        case sequenceAfterOwnWrites(since: Int)
        case entriesAfter(ObjectID?, limit: Int)
        case entriesChanged(after: Int, through: Int, limit: Int)
        case entriesFor([ObjectID])
        /// Each object's id and the hash the client expects it to hold.
        case contents([ContentRequest])
        case apply([IncomingObject])
        case mergeVectors([VectorMerge])
        /// Each object's id and the vector of the base a field merge wants.
        case mergeBases([MergeBaseQuery])
        /// Version 3: watch the store (gathering its events for `debounce`) and keep the link
        /// alive, pinging after `keepalive` of silence (see ``Wire/Live``).
        case watch(keepalive: Duration, debounce: Duration)

        package struct ContentRequest: Sendable {
            package var id: ObjectID
            package var hash: ContentHash?
        }

        package var kind: Kind {
            switch self {
            case .hello: .hello
            case .begin: .begin
            case .end: .end
            case .makeCurrent: .makeCurrent
            case .changeSequence: .changeSequence
            case .liveObjectCount: .liveObjectCount
            case .checkpoint: .checkpoint
            case .setCheckpoint: .setCheckpoint
            case .sequenceAfterOwnWrites: .sequenceAfterOwnWrites
            case .entriesAfter: .entriesAfter
            case .entriesChanged: .entriesChanged
            case .entriesFor: .entriesFor
            case .contents: .contents
            case .apply: .apply
            case .mergeVectors: .mergeVectors
            case .mergeBases: .mergeBases
            case .watch: .watch
            }
        }

        /// The payload. The caller keeps lists within ``Wire/maximumCount`` and objects within
        /// ``Wire/maximumObject``; ``FrameChannel/send(_:_:)`` refuses a payload over a frame.
        package func encode() -> [UInt8] {
            var writer = WireWriter()
            switch self {
            case .hello(let hello): return hello.encode()
            case .begin, .end, .makeCurrent, .changeSequence, .liveObjectCount: break
            case .watch(let keepalive, let debounce):
                writer.count(Wire.Live.milliseconds(keepalive))
                writer.count(Wire.Live.milliseconds(debounce))
            case .checkpoint(let peer): writer.replica(peer)
            case .setCheckpoint(let peer, let sequence):
                writer.replica(peer)
                writer.count(sequence)
            case .sequenceAfterOwnWrites(let sequence): writer.count(sequence)
            case .entriesAfter(let id, let limit):
                writer.bool(id != nil)
                if let id { writer.id(id) }
                writer.count(limit)
            case .entriesChanged(let after, let through, let limit):
                writer.count(after)
                writer.count(through)
                writer.count(limit)
            case .entriesFor(let ids):
                writer.count(ids.count)
                for id in ids { writer.id(id) }
            case .contents(let wanted):
                writer.count(wanted.count)
                for object in wanted {
                    writer.id(object.id)
                    writer.hash(object.hash)
                }
            case .apply(let objects):
                writer.count(objects.count)
                for object in objects {
                    writer.id(object.id)
                    writer.string(object.fileExtension)
                    writer.bool(object.content != nil)
                    if let content = object.content {
                        writer.data(content)
                        writer.hash(ContentHash(of: content))
                    }
                    writer.vector(object.version.vector)
                    writer.signed(object.version.modified)
                    writer.replica(object.version.author)
                    writer.hash(object.version.expected)
                }
            case .mergeVectors(let merges):
                writer.count(merges.count)
                for merge in merges {
                    writer.id(merge.id)
                    writer.hash(merge.hash)
                    writer.vector(merge.vector)
                }
            case .mergeBases(let queries):
                writer.count(queries.count)
                for query in queries {
                    writer.id(query.id)
                    writer.vector(query.base)
                }
            }
            return writer.bytes
        }

        /// Decodes a whole frame (header and payload) as a request.
        package static func decode(frame: [UInt8]) throws -> Request {
            let (kind, payload) = try Wire.decodeFrame(frame)
            return try decode(kind, payload)
        }

        /// Decodes a request's payload, checking every value; a write's bytes must hash to
        /// what the client claimed.
        package static func decode(_ kind: Kind, _ payload: [UInt8]) throws -> Request {
            var reader = WireReader(payload)
            let request: Request
            switch kind {
            case .hello: return .hello(try Hello.decode(payload))
            case .ok, .failure: throw WireError("a reply where a request belongs")
            case .ping, .changed: throw WireError("a notice where a request belongs")
            case .watch:
                request = .watch(
                    keepalive: try Wire.Live.keepalive(&reader),
                    debounce: .milliseconds(try reader.count(max: Wire.Live.maximumDebounce, "a debounce in milliseconds")))
            case .begin: request = .begin
            case .end: request = .end
            case .makeCurrent: request = .makeCurrent
            case .changeSequence: request = .changeSequence
            case .liveObjectCount: request = .liveObjectCount
            case .checkpoint: request = .checkpoint(peer: try reader.replica())
            case .setCheckpoint: request = .setCheckpoint(peer: try reader.replica(), sequence: try reader.count("a change sequence"))
            case .sequenceAfterOwnWrites: request = .sequenceAfterOwnWrites(since: try reader.count("a change sequence"))
            case .entriesAfter:
                let id = try reader.bool() ? try reader.id() : nil
                request = .entriesAfter(id, limit: try reader.count(max: Wire.maximumCount, "a page size"))
            case .entriesChanged:
                request = .entriesChanged(
                    after: try reader.count("a change sequence"), through: try reader.count("a change sequence"),
                    limit: try reader.count(max: Wire.maximumCount, "a page size"))
            case .entriesFor: request = .entriesFor(try reader.list("ids") { try $0.id() })
            case .contents: request = .contents(try reader.list("objects") { ContentRequest(id: try $0.id(), hash: try $0.hash()) })
            case .apply: request = .apply(try reader.list("objects") { try $0.incomingObject() })
            case .mergeVectors:
                request = .mergeVectors(
                    try reader.list("vector merges") { VectorMerge(id: try $0.id(), hash: try $0.hash(), vector: try $0.vector()) })
            case .mergeBases:
                request = .mergeBases(try reader.list("merge bases") { MergeBaseQuery(id: try $0.id(), base: try $0.vector()) })
            }
            try reader.finish()
            return request
        }
    }
}

extension WireReader {
    /// One object of a write, its bytes checked against the hash sent with them.
    mutating func incomingObject() throws -> IncomingObject {
        let id = try id()
        let ext = try fileExtension()
        var content: Data?
        if try bool() {
            let data = try data()
            guard let hash = try hash(), ContentHash(of: data) == hash else {
                throw WireError("the bytes sent for \(id) do not match their hash")
            }
            content = data
        }
        let version = IncomingVersion(vector: try vector(), modified: try signed(), author: try replica(), expected: try hash())
        return IncomingObject(id: id, fileExtension: ext, content: content, version: version)
    }
}
