import ArchiveStore
import ArchiveSync
import Foundation
import TestSupport

#if canImport(Glibc)
    import Glibc
#endif

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
