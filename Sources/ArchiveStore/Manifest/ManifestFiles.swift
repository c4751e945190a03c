import Foundation

#if canImport(Glibc)
    import Glibc
#endif

// The files under `.archive-sync/` that say which store this is: the manifest, and the
// replica id kept beside it. Opening a store goes through here, and so does `repair`.

extension Manifest {
    /// The manifest's name in the metadata directory.
    static let fileName = "manifest.sqlite"
    /// The file that keeps the replica id outside the manifest, so that a rebuilt manifest
    /// keeps it: one line, the id.
    static let replicaFileName = "replica"

    /// Opens the manifest of the store at `store`, whose metadata directory is `metadata`,
    /// making a new one only for a store that has never had one.
    ///
    /// A missing, empty or unreadable manifest of a store that has had one is refused with
    /// ``ArchiveError/damagedManifest(store:problem:)``, changing nothing.
    ///
    /// - Parameters:
    ///   - resolved: the store's real path (SQLite opens by path).
    ///   - mayCreate: whether a store without a manifest yet may get one.
    ///   - madeMetadata: whether this open made the metadata directory (adopting a directory
    ///     of archives, or making a store), which no manifest can have been in.
    ///   - readOnly: why the store cannot be written, when it cannot.
    static func open(
        store: String, resolved: String, root: Descriptor, metadata: Descriptor, historyLimit: Int?, mayCreate: Bool, madeMetadata: Bool,
        readOnly: ArchiveError?
    ) throws -> Manifest {
        let path = resolved.appendingComponent(FileName.metadataDirectory).appendingComponent(fileName)
        switch try FileSystem.status(fileName, in: metadata, path: path) {
        case nil:
            guard mayCreate, readOnly == nil, try madeMetadata || isUnused(metadata: metadata, root: root, path: store) else {
                throw ArchiveError.damagedManifest(store: store, problem: "is missing")
            }
            try create(at: path, replica: .random(), historyLimit: historyLimit ?? defaultHistoryLimit)
        case let status? where status.kind == .symlink:
            throw ArchiveError.symlinkRefused(path: path)
        case let status? where status.kind != .regular:
            throw ArchiveError.damagedManifest(store: store, problem: "is not a regular file")
        case let status? where status.stamp.size == 0:
            // SQLite may keep a new database's first pages in the WAL alone; only both empty is empty.
            let log = try FileSystem.status(fileName + "-wal", in: metadata, path: path + "-wal")
            if log.map({ $0.stamp.size == 0 }) ?? true {
                throw ArchiveError.damagedManifest(store: store, problem: "is empty")
            }
        default:
            break
        }
        let manifest = try Manifest(path: path, store: store, historyLimit: historyLimit, readOnly: readOnly)
        let recorded = try readReplicaFile(metadata: metadata, path: store)
        if let recorded, recorded != manifest.replica {
            throw ArchiveError.damagedManifest(
                store: store, problem: "is replica \(manifest.replica)'s, but \(FileName.metadataDirectory)/\(replicaFileName) names \(recorded)")
        }
        if recorded == nil && readOnly == nil {
            try writeReplicaFile(manifest.replica, metadata: metadata, path: store)  // a store made before the file existed
        }
        return manifest
    }

    /// Makes a new manifest at `path` for `replica`, all at once: it is built under a temp name
    /// beside it, flushed, and renamed into place only if no manifest is there by then. A
    /// killed create leaves only the temp file (removed by the next create), never a manifest
    /// without settings; of two creates at once, one's manifest is kept and both use it.
    static func create(at path: String, replica: ReplicaID, historyLimit: Int) throws {
        let slash = path.lastIndex(of: "/")!
        let directory = String(path[..<slash])
        let name = String(path[path.index(after: slash)...])
        let me = ProcessIdentity.current
        let tempName = "\(name)\(creationMarker)\(me.pid).\(me.startTime).\(UInt32.random(in: 0...UInt32.max))"
        let temp = directory.appendingComponent(tempName)
        defer { for suffix in ["", "-journal", "-wal", "-shm"] { FileSystem.removeFileIfPresent(atPath: temp + suffix) } }
        do {
            let db = try SQLiteConnection(path: temp, mode: .create)
            try db.execute("PRAGMA journal_mode=WAL; BEGIN IMMEDIATE;")
            try migrate(db)
            try db.setMeta("format", String(formatVersion))
            try db.setMeta("replica", replica.rawValue)
            try db.setMeta("created", String(now()))
            try db.setMeta("history_limit", String(historyLimit))
            try db.execute("COMMIT; PRAGMA wal_checkpoint(TRUNCATE);")
        }  // closed: the WAL is checkpointed into the file and removed
        try FileSystem.sync(FileSystem.openFile(atPath: temp, flags: O_RDONLY), path: temp)
        let handle = try FileSystem.openDirectory(directory, path: directory)
        _ = try FileSystem.renameIfAbsent(tempName, to: name, in: handle, path: path)
        try FileSystem.sync(handle, path: directory)
    }

    /// Between a file's name and its creator's pid, start time and a random number (two threads
    /// of one process may create at once), in the name of the file being made.
    static let creationMarker = ".new."

    /// True for a store that has never had a manifest: its metadata directory holds nothing
    /// but what an interrupted create leaves (removed here when its process is dead), and no
    /// collection directory sits beside it. A store whose manifest was deleted has objects,
    /// or its replica file, or a lock file, and is refused instead.
    private static func isUnused(metadata: Descriptor, root: Descriptor, path: String) throws -> Bool {
        for entry in try FileSystem.listDirectory(metadata, path: metadata.path) {
            guard let owner = creator(of: entry.name) else { return false }
            if !owner.isRunning { try FileSystem.removeFile(entry.name, in: metadata, path: metadata.path.appendingComponent(entry.name)) }
        }
        return try FileSystem.listDirectory(root, path: path).allSatisfy { FileName.isReserved($0.name) }
    }

    /// The process making a manifest under this temp name (or its `-journal`, `-wal`, `-shm`);
    /// nil for any other name.
    private static func creator(of name: String) -> ProcessIdentity? {
        guard name.hasPrefix(fileName + creationMarker) else { return nil }
        let fields = name.dropFirst(fileName.count + creationMarker.count).split(separator: "-")[0].split(separator: ".")
        guard fields.count == 3, let pid = Int32(fields[0]), let start = Int64(fields[1]) else { return nil }
        return ProcessIdentity(pid: pid, startTime: start)
    }

    /// The replica id in the store's replica file; nil when there is none, or it holds no id.
    static func readReplicaFile(metadata: Descriptor, path: String) throws -> ReplicaID? {
        let relative = FileName.metadataDirectory.appendingComponent(replicaFileName)
        guard let data = try FileSystem.readFile(replicaFileName, in: metadata, path: path.appendingComponent(relative)) else { return nil }
        return replicaID(from: String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// `text` as a replica id, or nil when it cannot be one (empty, too long, not letters and digits).
    static func replicaID(from text: String) -> ReplicaID? {
        guard !text.isEmpty, text.utf8.count <= 64, text.utf8.allSatisfy({ $0 < 0x80 && isalnum(Int32($0)) != 0 }) else { return nil }
        return ReplicaID(rawValue: text)
    }

    /// Writes the replica file durably (temp file, flush, rename, flush the directory),
    /// replacing one that holds no id.
    static func writeReplicaFile(_ replica: ReplicaID, metadata: Descriptor, path: String) throws {
        let me = ProcessIdentity.current
        let temp = "\(replicaFileName)\(creationMarker)\(me.pid).\(me.startTime).\(UInt32.random(in: 0...UInt32.max))"
        let where_ = path.appendingComponent(FileName.metadataDirectory)
        _ = try FileSystem.writeNewFile(
            temp, in: metadata, data: Data((replica.rawValue + "\n").utf8), sync: true, path: where_.appendingComponent(temp))
        do {
            try FileSystem.rename(temp, to: replicaFileName, in: metadata, path: where_.appendingComponent(replicaFileName))
        } catch {
            _ = try? FileSystem.removeFile(temp, in: metadata, path: where_.appendingComponent(temp))
            throw error
        }
        try FileSystem.sync(metadata, path: where_)
    }
}

extension ArchiveStore {
    /// Why this store cannot be written by this process, or nil when it can: the metadata
    /// directory or the manifest is on a read-only file system, or not writable by this user.
    static func writeRefusal(root: Descriptor, path: String) -> ArchiveError? {
        for name in [FileName.metadataDirectory, FileName.metadataDirectory.appendingComponent(Manifest.fileName)] {
            switch FileSystem.accessError(name, in: root, mode: W_OK) {
            case nil: continue
            case EROFS: return .readOnly(path: path, reason: "it is on a read-only file system")
            case EACCES, EPERM: return .readOnly(path: path, reason: "this user may not write \(path)/\(name)")
            default: continue
            }
        }
        return nil
    }

    /// Throws ``ArchiveError/readOnly(path:reason:)`` when the store cannot be written: before
    /// a write touches any file.
    package func refuseIfReadOnly() throws {
        if let refusal = manifest.writeRefusal { throw refusal }
    }

    /// Whether the manifest file this store opened is still the one at its path: nil while it
    /// is, else what happened to it ("removed", "replaced"). Another process writing to a
    /// removed or replaced manifest records into a file no one reads again.
    package var manifestChange: String? {
        let name = FileName.metadataDirectory.appendingComponent(Manifest.fileName)
        // Without following a symlink, for the metadata directory too (an error is "not here").
        guard let metadata = try? FileSystem.openDirectory(FileName.metadataDirectory, in: root, path: path),
            let status = try? FileSystem.status(Manifest.fileName, in: metadata, path: path.appendingComponent(name))
        else {
            // The whole metadata directory gone is the store gone, which is told otherwise.
            return FileSystem.kind(of: FileName.metadataDirectory, in: root) != nil ? "removed" : nil
        }
        return status.stamp.inode == manifestInode ? nil : "replaced"
    }
}
