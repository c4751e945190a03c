// The model of the sync benchmarks (sync-bench, remote-bench).

import ArchiveStore

/// One object of exactly 512 bytes of JSON, as the sync issues' workloads name, saved as
/// Item/itemN.
public struct Blob: Codable, Sendable {
    public var n: Int
    public var pad: String

    public init(_ n: Int, fill: Character = "x") {
        self.n = n
        pad = String(repeating: fill, count: 512 - 15 - String(n).count)
    }

    public static let collection = "Item"
    public static func key(_ n: Int) -> String { "item\(n)" }
    public static func file(_ n: Int) -> String { "item\(n).json" }

    /// Makes a store of `count` blobs at `path`, saved in 10 batches.
    public static func buildStore(at path: String, count: Int) throws -> ArchiveStore {
        let store = try ArchiveStore(directory: path)
        for part in 0..<10 {
            try store.batch { tx in
                for i in part * count / 10..<(part + 1) * count / 10 { try tx.save(Blob(i), forKey: key(i), in: collection) }
            }
        }
        return store
    }
}
