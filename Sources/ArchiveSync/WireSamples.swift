import ArchiveStore
import Foundation

extension Wire {
    /// One valid message of every kind (two shapes for some), as the two sides write them.
    /// The protocol's round-trip tests and the fuzz targets' seeds both start from these, so a
    /// new message is sampled in one place.
    package enum Samples {
        /// The replica the samples name.
        package static let peer = ReplicaID(rawValue: "0123456789abcdef")

        /// One valid request of every kind.
        package static func requests() throws -> [Request] {
            let id = try ObjectID(collection: "Person", key: "p1")
            let data = Data("{\"v\":1}".utf8)
            let hash = ContentHash(of: data)
            let vector = VersionVector([peer: 3, ReplicaID(rawValue: "fedcba9876543210"): 200])
            return [
                .hello(Wire.Hello(versions: 1...1, peer: peer)), .hello(Wire.Hello(versions: 1...3, peer: nil)),
                .begin, .end, .makeCurrent, .changeSequence, .liveObjectCount,
                .checkpoint(peer: peer), .setCheckpoint(peer: peer, sequence: 300), .sequenceAfterOwnWrites(since: 129),
                .entriesAfter(nil, limit: 1_000), .entriesAfter(id, limit: 1_000), .entriesChanged(after: 5, through: 70_000, limit: 1_000),
                .entriesFor([id, try ObjectID(collection: "Car", key: "c")]),
                .contents([.init(id: id, hash: hash), .init(id: id, hash: nil)]),
                .apply([
                    IncomingObject(
                        id: id, fileExtension: "json", content: data,
                        version: IncomingVersion(vector: vector, modified: -5, author: peer, expected: hash)),
                    IncomingObject(
                        id: id, fileExtension: "json", content: nil,
                        version: IncomingVersion(vector: vector, modified: 1_700_000_000_000_000_000, author: peer, expected: nil)),
                ]),
                .mergeVectors([VectorMerge(id: id, hash: hash, vector: vector), VectorMerge(id: id, hash: nil, vector: VersionVector())]),
                .mergeBases([MergeBaseQuery(id: id, base: vector), MergeBaseQuery(id: id, base: VersionVector())]),
                .watch(keepalive: .seconds(10), debounce: .milliseconds(20)),
            ]
        }

        /// One valid `ok` reply to every kind of request (two shapes for some), as the server writes them.
        package static func replies() throws -> [(Kind, [UInt8])] {
            let id = try ObjectID(collection: "Person", key: "p1")
            let data = Data("{\"v\":1}".utf8)
            let live = ReplicaEntry(
                id: id, file: "p1.json", vector: VersionVector([peer: 2]), hash: ContentHash(of: data), size: data.count, modified: 77, author: peer,
                isDeleted: false, sequence: 9)
            let tombstone = ReplicaEntry(
                id: try ObjectID(collection: "Car", key: "c"), file: "c.json", vector: VersionVector([peer: 4]), hash: nil, size: 0, modified: -3,
                author: peer, isDeleted: true, sequence: 10)
            func reply(_ kind: Wire.Kind, _ build: (inout WireWriter) -> Void) -> (Wire.Kind, [UInt8]) {
                var writer = WireWriter()
                build(&writer)
                return (kind, writer.bytes)
            }
            return [
                (.hello, Wire.HelloReply(versions: 1...1, chosen: 1, store: (peer, "/srv/store")).encode()),
                (.hello, Wire.HelloReply(versions: 1...2, chosen: nil, store: nil).encode()),
                reply(.begin) { _ in }, reply(.mergeVectors) { _ in }, reply(.watch) { _ in },
                // The live session's unanswered frames, either way.
                reply(.ping) { _ in }, reply(.changed) { $0.count(70_001) },
                reply(.makeCurrent) { $0.bool(true) },
                reply(.changeSequence) { $0.count(70_000) },
                reply(.checkpoint) {
                    $0.bool(true)
                    $0.count(300)
                },
                reply(.entriesAfter) {
                    $0.bool(false)
                    $0.count(2)
                    $0.entry(live)
                    $0.entry(tombstone)
                },
                reply(.entriesFor) {
                    $0.count(2)
                    $0.bool(true)
                    $0.entry(live)
                    $0.bool(false)
                },
                reply(.contents) {
                    $0.count(2)
                    $0.bool(true)
                    $0.data(data)
                    $0.bool(false)
                },
                reply(.apply) {
                    $0.count(2)
                    $0.bool(true)
                    $0.bool(false)
                },
                reply(.mergeBases) {
                    $0.count(2)
                    $0.count(2)
                    $0.vector(VersionVector([peer: 1]))
                    $0.vector(VersionVector([peer: 2]))
                    $0.bool(true)
                    $0.data(data)
                    $0.count(0)
                    $0.bool(false)
                },
                reply(.failure) { $0.string("another sync of this store is running") },
            ]
        }
    }
}
