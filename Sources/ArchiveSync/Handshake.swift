import ArchiveStore
import Foundation

extension Wire {
    /// The first request of a session: who is calling and which protocol versions it speaks.
    ///
    /// ```swift
    /// let hello = try Wire.Hello.decode(payload)   // a WireError for anything malformed
    /// ```
    package struct Hello: Sendable, Equatable {
        /// The protocol versions the client speaks: never an empty range.
        package var versions: ClosedRange<UInt32>
        /// The replica id of the client's store, for the far side's log.
        package var peer: ReplicaID?

        package init(versions: ClosedRange<UInt32>, peer: ReplicaID?) {
            self.versions = versions
            self.peer = peer
        }

        static let program = "archive-sync"

        package func encode() -> [UInt8] {
            var writer = WireWriter()
            writer.string(Self.program)
            writer.count(Int(versions.lowerBound))
            writer.count(Int(versions.upperBound))
            writer.bool(peer != nil)
            if let peer { writer.replica(peer) }
            return writer.bytes
        }

        /// Decodes a handshake's payload, checking every value.
        package static func decode(_ payload: [UInt8]) throws -> Hello {
            var reader = WireReader(payload)
            guard try reader.string(max: 64, "the program's name") == program else {
                throw WireError("the handshake does not come from archive-sync")
            }
            let versions = try reader.versionRange("the handshake")
            let peer = try reader.bool() ? try reader.replica() : nil
            try reader.finish()
            return Hello(versions: versions, peer: peer)
        }
    }

    /// The reply to ``Hello``: the versions the far side speaks, the one it chose (none when
    /// the two sides share none), and then its store's replica id and path.
    package struct HelloReply: Sendable, Equatable {
        package var versions: ClosedRange<UInt32>
        /// nil when the two sides share no version; the far side then ends the session.
        package var chosen: UInt32?
        /// The far store's replica id and path; nil exactly when `chosen` is nil.
        package var store: (replica: ReplicaID, path: String)?

        package init(versions: ClosedRange<UInt32>, chosen: UInt32?, store: (replica: ReplicaID, path: String)?) {
            self.versions = versions
            self.chosen = chosen
            self.store = store
        }

        package static func == (lhs: HelloReply, rhs: HelloReply) -> Bool {
            lhs.versions == rhs.versions && lhs.chosen == rhs.chosen && lhs.store?.replica == rhs.store?.replica
                && lhs.store?.path == rhs.store?.path
        }

        package func encode() -> [UInt8] {
            var writer = WireWriter()
            writer.count(Int(versions.lowerBound))
            writer.count(Int(versions.upperBound))
            writer.count(Int(chosen ?? 0))
            if let store {
                writer.replica(store.replica)
                writer.string(store.path)
            }
            return writer.bytes
        }

        /// Decodes a handshake reply's payload, checking every value: a version range that is
        /// not empty, a chosen version inside it, and a store only with a chosen version.
        package static func decode(_ payload: [UInt8]) throws -> HelloReply {
            var reader = WireReader(payload)
            let versions = try reader.versionRange("it")
            let chosen = UInt32(try reader.count(max: Int(UInt32.max), "a protocol version"))
            guard chosen != 0 else {
                try reader.finish()
                return HelloReply(versions: versions, chosen: nil, store: nil)
            }
            guard versions.contains(chosen) else {
                throw WireError(
                    "it chooses protocol version \(chosen), outside the versions \(Wire.describe(versions)) it names")
            }
            let replica = try reader.replica()
            let path = try reader.string(max: 65_536, "the store's path")
            try reader.finish()
            return HelloReply(versions: versions, chosen: chosen, store: (replica, path))
        }

        /// The version both sides speak, checked against what this side `offered`; throws
        /// ``SyncError/remote(_:)`` naming what was wrong.
        package func agreedVersion(offered: ClosedRange<UInt32>, name: String) throws -> UInt32 {
            guard let chosen else {
                throw SyncError.farSideCannotServe(
                    "\(name): the far side speaks protocol version \(Wire.describe(versions)) and this side \(Wire.describe(offered)); install the same release of archive-sync on both hosts"
                )
            }
            guard offered.contains(chosen) else {
                throw SyncError.remote(
                    "\(name): the far side chose protocol version \(chosen), which this side did not offer (it speaks \(Wire.describe(offered))): a malformed handshake reply"
                )
            }
            return chosen
        }
    }

    /// `1`, or `1 to 3`.
    package static func describe(_ versions: ClosedRange<UInt32>) -> String {
        versions.lowerBound == versions.upperBound ? "\(versions.lowerBound)" : "\(versions.lowerBound) to \(versions.upperBound)"
    }
}

extension WireReader {
    /// Two protocol versions, the lowest and the highest: refused unless the first is at most
    /// the second (an empty range is no range at all, and cannot be described as one).
    mutating func versionRange(_ what: String) throws -> ClosedRange<UInt32> {
        let low = UInt32(try count(max: Int(UInt32.max), "a protocol version"))
        let high = UInt32(try count(max: Int(UInt32.max), "a protocol version"))
        guard low <= high else {
            throw WireError("\(what) names protocol versions \(low) to \(high), an empty range (the lowest comes first)")
        }
        return low...high
    }
}
