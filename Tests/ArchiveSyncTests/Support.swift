import ArchiveStore
import ArchiveSync
import Foundation
import TestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// A seeded generator (SplitMix64): the same seed gives the same test, so a failure can be replayed.
struct SeededGenerator: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

extension ArchiveStore {
    /// Every live object's content hash, from the manifest.
    func liveHashes() throws -> [ObjectID: ContentHash] {
        var result: [ObjectID: ContentHash] = [:]
        for entry in try replicaEntries(after: nil, limit: .max) where !entry.isDeleted { result[entry.id] = entry.hash }
        return result
    }

    /// Every content hash the store can still give back: live objects and all kept history.
    func allKeptHashes() throws -> Set<ContentHash> {
        var hashes: Set<ContentHash> = []
        for entry in try replicaEntries(after: nil, limit: .max) {
            if let hash = entry.hash { hashes.insert(hash) }
            for version in try history(entry.id) { if let hash = version.hash { hashes.insert(hash) } }
        }
        return hashes
    }
}

/// Every file under `store` but the manifest's directory, with its bytes.
func filesOnDisk(_ store: String) -> [String: Data] {
    var files: [String: Data] = [:]
    for path in (try? FileManager.default.subpathsOfDirectory(atPath: store)) ?? [] where !path.hasPrefix(".archive-sync") {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: store + "/" + path, isDirectory: &isDirectory), !isDirectory.boolValue {
            files[path] = FileManager.default.contents(atPath: store + "/" + path)
        }
    }
    return files
}
