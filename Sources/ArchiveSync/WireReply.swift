import ArchiveStore
import Foundation

extension Wire {
    /// The payloads of the far side's `ok` replies, as the client decodes them: one function
    /// from bytes to a value (or a ``WireError``) per shape of reply, each reading to the end.
    ///
    /// ```swift
    /// let (entries, cut) = try Wire.Reply.page(payload)
    /// ```
    package enum Reply {
        /// The reply to a request that returns nothing.
        package static func empty(_ payload: [UInt8]) throws { try read(payload) { _ in } }

        package static func flag(_ payload: [UInt8]) throws -> Bool { try read(payload) { try $0.bool() } }

        package static func count(_ payload: [UInt8], _ what: String) throws -> Int { try read(payload) { try $0.count(what) } }

        /// A checkpoint: the sequence merged, or nil for none.
        package static func checkpoint(_ payload: [UInt8]) throws -> Int? {
            try read(payload) { try $0.bool() ? try $0.count("a change sequence") : nil }
        }

        /// A page of entries, and whether the far side cut it short to keep the frame small.
        package static func page(_ payload: [UInt8]) throws -> (entries: [ReplicaEntry], cut: Bool) {
            try read(payload) { reader in
                let cut = try reader.bool()
                return (try reader.list("entries") { try $0.entry() }, cut)
            }
        }

        /// One entry, or nil, per id asked for.
        package static func entries(_ payload: [UInt8]) throws -> [ReplicaEntry?] {
            try read(payload) { try $0.list("entries") { try $0.bool() ? try $0.entry() : nil } }
        }

        /// One object's bytes, or nil, per object asked for.
        package static func contents(_ payload: [UInt8]) throws -> [Data?] {
            try read(payload) { try $0.list("objects") { try $0.bool() ? try $0.data() : nil } }
        }

        /// Whether each write landed.
        package static func applied(_ payload: [UInt8]) throws -> [Bool] {
            try read(payload) { try $0.list("results") { try $0.bool() } }
        }

        /// Per object asked for: its history's vectors, and the base's bytes when kept.
        package static func mergeBases(_ payload: [UInt8]) throws -> [MergeBaseAnswer] {
            try read(payload) { reader in
                try reader.list("merge bases") { answer in
                    MergeBaseAnswer(
                        vectors: try answer.list("history vectors") { try $0.vector() }, base: try answer.bool() ? try answer.data() : nil)
                }
            }
        }

        /// The message of a `failure` reply.
        package static func failure(_ payload: [UInt8]) throws -> String {
            try read(payload) { try $0.string(max: 65_536, "a message") }
        }

        /// Decodes `payload` as the `ok` reply to a request of `kind`, discarding the value:
        /// the entry point for tests and fuzzers over every shape of reply.
        package static func decode(replyTo kind: Kind, _ payload: [UInt8]) throws {
            switch kind {
            case .hello: _ = try HelloReply.decode(payload)
            case .begin, .end, .setCheckpoint, .mergeVectors, .watch: try empty(payload)
            case .makeCurrent: _ = try flag(payload)
            case .changeSequence, .liveObjectCount, .sequenceAfterOwnWrites: _ = try count(payload, "a number")
            case .checkpoint: _ = try checkpoint(payload)
            case .entriesAfter, .entriesChanged: _ = try page(payload)
            case .entriesFor: _ = try entries(payload)
            case .contents: _ = try contents(payload)
            case .apply: _ = try applied(payload)
            case .mergeBases: _ = try mergeBases(payload)
            case .ok, .failure: _ = try failure(payload)
            case .ping: try empty(payload)
            case .changed: _ = try count(payload, "a change sequence")
            }
        }

        private static func read<T>(_ payload: [UInt8], _ body: (inout WireReader) throws -> T) throws -> T {
            var reader = WireReader(payload)
            let value = try body(&reader)
            try reader.finish()
            return value
        }
    }
}
