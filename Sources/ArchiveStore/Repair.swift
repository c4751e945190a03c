import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// What ``ArchiveStore/repair(directory:force:)`` did.
public struct RepairReport: Sendable, Codable {
    /// Where the rebuilt manifest's replica id came from.
    public enum ReplicaSource: String, Sendable, Codable {
        /// `.archive-sync/replica`, the copy kept outside the manifest.
        case replicaFile
        /// The damaged manifest, which still named it.
        case damagedManifest
        /// Nowhere: the store has a new replica id.
        case new
    }

    /// The store's directory, as given.
    public let path: String
    public let replica: ReplicaID
    public let replicaSource: ReplicaSource
    /// The damaged manifest's files, moved aside (never deleted) under these names in `.archive-sync/`.
    public let movedAside: [String]
    /// Objects found in the object files and recorded, each as version 1.
    public let objects: Int
    /// Entries that are not objects, as `scan` reports them.
    public let ignored: [IgnoredEntry]
    /// What the rebuilt manifest does not have, one sentence each.
    public let notRecovered: [String]
}

extension ArchiveStore {
    /// Rebuilds a missing or damaged manifest from the object files: moves the damaged one's
    /// files aside (never deleting them), makes a new manifest with the store's replica id (from
    /// `.archive-sync/replica`, else from the damaged manifest if it still names one), and
    /// records every object found, as a full scan does.
    ///
    /// History cannot be rebuilt from the files: each object starts again at version 1, and its
    /// version vector holds only this replica's own counter. ``RepairReport/notRecovered`` says so.
    ///
    /// - Parameter force: rebuild even a manifest that opens; without it, such a store is refused
    ///   and left as it is.
    public static func repair(directory: String, force: Bool = false) throws -> RepairReport {
        do {
            if !force {
                do {
                    _ = try ArchiveStore(directory: directory, options: Options(create: false))
                    throw ArchiveError.invalidInput(
                        "the manifest of \(directory) is not damaged, so nothing was changed (`--force` rebuilds it anyway, losing its history)")
                } catch ArchiveError.damagedManifest {
                    // What repair is for.
                }
            }
            let root: Descriptor
            do {
                root = try FileSystem.openDirectory(directory, path: directory, followSymlink: true)
            } catch let error as SystemCallError where error.errno == ENOENT || error.errno == ENOTDIR {
                throw ArchiveError.notAStore(path: directory, reason: error.errno == ENOENT ? "it does not exist" : "it is not a directory")
            }
            let metadataName = FileName.metadataDirectory
            guard let metadata = try FileSystem.openDirectoryIfPresent(metadataName, in: root, path: directory.appendingComponent(metadataName))
            else {
                throw ArchiveError.notAStore(
                    path: directory, reason: "it has no \(metadataName) directory (run `archive-sync init \(directory)` to make it a store)")
            }
            if let refusal = writeRefusal(root: root, path: directory) { throw refusal }
            let manifestPath = try FileSystem.resolvedPath(directory).appendingComponents(metadataName, Manifest.fileName)

            let (movedManifest, movedAside) = try moveAside(in: metadata)
            let old = movedManifest.flatMap { Manifest.salvage(path: String(manifestPath.dropLast(Manifest.fileName.count)) + $0) }
            let kept = try Manifest.readReplicaFile(metadata: metadata, path: directory)
            let replica = kept ?? old?.replica ?? .random()
            try Manifest.create(at: manifestPath, replica: replica, historyLimit: old?.historyLimit ?? Manifest.defaultHistoryLimit)
            if kept == nil { try Manifest.writeReplicaFile(replica, metadata: metadata, path: directory) }

            let scan = try ArchiveStore(directory: directory, options: Options(create: false)).scan()
            var lost = [
                "history: each object starts again at version 1, and earlier versions and deleted objects are not known"
                    + (old?.versions).map { " (the \($0) kept versions stay in the moved-aside manifest)" }.orEmpty,
                "version vectors: each object's holds only this replica's own counter, so a sync may take another replica's older version of an object changed here since they last synced (this store's version stays in history)",
                "sync checkpoints: the next sync with each other replica compares every object",
            ]
            if kept == nil && old?.replica == nil {
                lost.append("replica id: neither \(metadataName)/\(Manifest.replicaFileName) nor the manifest held it, so the store has a new one")
            }
            return RepairReport(
                path: directory, replica: replica, replicaSource: kept != nil ? .replicaFile : old?.replica != nil ? .damagedManifest : .new,
                movedAside: movedAside, objects: scan.created, ignored: scan.ignored, notRecovered: lost)
        } catch {
            throw ArchiveError.wrap(error)
        }
    }

    /// Renames the manifest's files (and its WAL and shared-memory files, which belong with it)
    /// to `manifest.sqlite.damaged-TIME`, never over anything.
    /// - Returns: the manifest's new name, if it was there, and every file's.
    private static func moveAside(in metadata: Descriptor) throws -> (manifest: String?, all: [String]) {
        var now = time(nil)
        var parts = tm()
        gmtime_r(&now, &parts)
        let time = String(
            format: "%04d%02d%02dT%02d%02d%02dZ", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday, parts.tm_hour, parts.tm_min, parts.tm_sec)
        var stem = Manifest.fileName + ".damaged-" + time
        var attempt = 1
        while try ["", "-wal", "-shm", "-journal"].contains(where: { try FileSystem.status(stem + $0, in: metadata, path: stem) != nil }) {
            attempt += 1
            stem = Manifest.fileName + ".damaged-" + time + "-\(attempt)"
        }
        var moved: [String] = []
        for suffix in ["", "-wal", "-shm", "-journal"] where try FileSystem.status(Manifest.fileName + suffix, in: metadata, path: stem) != nil {
            let path = metadata.path.appendingComponent(Manifest.fileName) + suffix
            guard try FileSystem.renameIfAbsent(Manifest.fileName + suffix, to: stem + suffix, in: metadata, path: path) else {
                throw ArchiveError.busy(
                    "\(metadata.path)/\(stem + suffix) appeared while the damaged manifest was being moved aside; run repair again")
            }
            moved.append(stem + suffix)
        }
        try FileSystem.sync(metadata, path: metadata.path)
        return (moved.first { $0 == stem }, moved)
    }
}

extension Manifest {
    /// What can still be read from a damaged manifest, each part nil when it cannot.
    struct Salvage {
        var replica: ReplicaID?
        var historyLimit: Int?
        var versions: Int?
    }

    /// Reads what it can of a damaged manifest, without writing to it.
    static func salvage(path: String) -> Salvage? {
        guard let db = try? SQLiteConnection(path: path, mode: .immutable) else { return nil }
        func meta(_ name: String) -> String? {
            (try? db.first("SELECT value FROM meta WHERE name = ?", [.text(name)]) { $0.text(0) }) ?? nil
        }
        let replica = meta("replica").flatMap(replicaID(from:))
        let versions = (try? db.first("SELECT count(*) FROM history WHERE data IS NOT NULL") { Int($0.int(0)) }) ?? nil
        return Salvage(replica: replica, historyLimit: meta("history_limit").flatMap { Int($0) }, versions: versions)
    }
}

extension Optional where Wrapped == String {
    fileprivate var orEmpty: String { self ?? "" }
}
