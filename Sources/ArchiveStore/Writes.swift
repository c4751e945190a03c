import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// One save (content) or delete (no content), ready to apply.
struct PendingWrite: Sendable {
    var id: ObjectID
    /// The file name to write; ignored for a delete.
    var file: String
    /// The new bytes; nil for a delete.
    var content: Data?
    var hash: ContentHash?
    var schemaVersion: Int?
    /// The temp file's stamp once written (a rename keeps it).
    var stamp: FileStamp?
    /// Set for a sync's write: the version as the other replica recorded it.
    var incoming: ReplicatedVersion?
    /// When set, the write goes ahead only while its object still holds these contents.
    var condition: WriteCondition?

    /// Without `hashing`, `hash` stays nil until the write is staged.
    init(id: ObjectID, file: String, content: Data?, schemaVersion: Int? = nil, hashing: Bool = true) {
        self.id = id
        self.file = file
        self.content = content
        self.hash = hashing ? content.map(ContentHash.init(of:)) : nil
        self.schemaVersion = schemaVersion
    }
}

private let tempCounter = Atomic<Int>(0)
/// What every temp name of this process starts with: made once, not at every save.
private let tempNamePrefix = "\(FileName.tempPrefix)\(ProcessIdentity.current.pid).\(ProcessIdentity.current.startTime)."

extension ArchiveStore {
    /// Encodes `value` for `id` in its collection's codec (and hashes it, unless told not to).
    func prepare<T: Encodable>(_ value: T, as id: ObjectID, hashing: Bool = true) throws -> PendingWrite {
        let codec = codec(for: id.collection)
        let data: Data
        do {
            data = try codec.encode(value)
        } catch {
            throw ArchiveError.unencodable(id, type: String(reflecting: T.self), reason: String(describing: error))
        }
        let schema = (T.self as? any VersionedModel.Type)?.schemaVersion
        return PendingWrite(
            id: id, file: FileName.join(stem: FileName.encode(id.key), extension: codec.fileExtension), content: data, schemaVersion: schema,
            hashing: hashing)
    }

    /// A temp file name no other process or thread uses, that names its owner for clean-up.
    func tempName() -> String {
        let n = tempCounter.add(1, ordering: .relaxed).newValue
        return tempNamePrefix + String(n)
    }

    /// Why `write` must not be made: the file it writes, or the file its live row names (which
    /// it replaces or removes), is not one a write of the store makes.
    static func damage(of write: PendingWrite, record: ObjectRecord?) -> ArchiveError? {
        if write.content != nil, let problem = FileName.problem(withFile: write.file, ofKey: write.id.key) {
            return .damagedRecord(write.id, file: write.file, problem: problem)
        }
        guard let record, !record.isDeleted, let problem = FileName.problem(withFile: record.file, ofKey: record.id.key) else { return nil }
        return .damagedRecord(record.id, file: record.file, problem: problem)
    }

    /// The current version when `write` would change nothing, else nil. `record` is its object's row.
    func storedVersion(matching write: PendingWrite, record: ObjectRecord?) throws -> Int? {
        guard let record else { return write.content == nil ? 0 : nil }
        if write.content == nil { return record.isDeleted ? record.version : nil }
        guard !record.isDeleted, record.file == write.file, record.hash == write.hash, record.schemaVersion == write.schemaVersion
        else { return nil }
        // Compare bytes, not the stamp: restoring over bit rot (same stamp, other bytes) must rewrite.
        let relative = FileName.encode(write.id.collection).appendingComponent(record.file)
        let onDisk = try FileSystem.readFile(relative, in: root, path: path.appendingComponent(relative))
        return onDisk.map(ContentHash.init(of:)) == write.hash ? record.version : nil
    }

    /// Opens a collection's directory, creating it when asked; nil when it does not exist.
    /// (Its entry in the store's directory is made durable by the first commit into it.)
    /// The descriptor is kept for the next write while the name leads to it (``CollectionDirectories``).
    func openCollection(_ collection: String, create: Bool) throws -> Descriptor? {
        let name = FileName.encode(collection)
        if let kept = collectionDirectories.current(name, in: root) { return kept }
        let opened: Descriptor
        do {
            opened = try FileSystem.openDirectory(name, in: root, path: path.appendingComponent(name))
        } catch let error as SystemCallError where error.errno == ENOENT {
            guard create else { return nil }
            try FileSystem.makeDirectory(name, in: root, path: path.appendingComponent(name))
            opened = try FileSystem.openDirectory(name, in: root, path: path.appendingComponent(name))
        }
        collectionDirectories.keep(opened, as: name)
        return opened
    }

    /// Finishes the writes of processes that died mid-write (and this process's own whose
    /// undo failed): removes their temp files and records whatever their renames left on disk.
    ///
    /// Reads never need free space: when the disk is too full to record what those writes
    /// left, the store stays readable as the manifest last recorded it, and
    /// ``pendingRecovery`` says what recovery waits for; each write tries it again first.
    func recoverInterruptedWrites() throws {
        var waiting = (writes: 0, objects: 0)
        do {
            let stuck = recoveryState.withLock { $0.stuck }
            let interrupted = try manifest.read { try $0.intents() }.filter { !$0.owner.isRunning || stuck.contains($0.id) }
            waiting = (interrupted.count, interrupted.reduce(0) { $0 + ($1.entries?.count ?? 0) })
            var unreadable: [Int64] = []
            for intent in interrupted {
                if let after = intent.after {
                    try restoreSettlePeriod(intent, after: after)
                    waiting.writes -= 1
                } else if let entries = intent.entries, intent.isCommitted {
                    try restoreCommitted(entries, intent: (intent.id, intent.owner))
                    waiting = (waiting.writes - 1, waiting.objects - entries.count)
                } else if let entries = intent.entries {
                    try reconcile(intent.id, entries)
                    waiting = (waiting.writes - 1, waiting.objects - entries.count)
                } else {
                    unreadable.append(intent.id)
                }
            }
            if !unreadable.isEmpty {
                // Which objects those writes touched cannot be known: a scan records whatever they
                // left on disk and removes their temp files (it knows their owners are dead). Only
                // then do the records go, so that a crash meanwhile leaves them for the next open.
                _ = try scan()
                try manifest.write { tx in
                    for id in unreadable { try tx.removeIntent(id) }
                }
            }
            recoveryState.withLock { $0.stuck.subtract(interrupted.map(\.id)) }
        } catch let error where Self.isOutOfSpace(error) {
            recoveryWaits(writes: waiting.writes, objects: waiting.objects, cause: error)
        } catch {
            throw ArchiveError.wrap(error)
        }
    }

    /// Removes an intent's temp files and reconciles its targets with the manifest, under the write lock.
    ///
    /// Where the target holds the intended bytes, the rename happened: recovery finishes the
    /// write (removes a file the object had under another codec, flushes the directory,
    /// records the version with its schema). Otherwise the write never landed: the object's
    /// recorded file (or, for an object with no row, the target) is checked as a scan would.
    private func reconcile(_ intent: Int64, _ entries: [WriteIntent.Entry]) throws {
        try manifest.write { tx in
            for entry in entries {
                let id = ObjectID(unchecked: entry.collection, key: entry.key)
                let current = try tx.object(id)
                let name = FileName.encode(entry.collection)
                guard let directory = try FileSystem.openDirectoryIfPresent(name, in: root, path: path.appendingComponent(name)) else {
                    try tx.recordDelete(of: current, origin: .external)
                    continue
                }
                let where_ = directory.path
                if let temp = entry.temp { try FileSystem.removeFile(temp, in: directory, path: where_.appendingComponent(temp)) }
                let landed =
                    try entry.hash != nil
                    && FileSystem.readFile(name.appendingComponent(entry.file), in: root, path: where_.appendingComponent(entry.file))
                        .map(ContentHash.init(of:)) == entry.hash
                // A damaged row's file is never followed: the row is left as it is (its object
                // reports it), unless the write landed, whose file it then names instead.
                let damaged = current.map { FileName.problem(withFile: $0.file, ofKey: $0.id.key) != nil } ?? false
                if landed {
                    if let current, !current.isDeleted, !damaged, ExactName(current.file) != ExactName(entry.file) {
                        try FileSystem.removeFile(current.file, in: directory, path: where_.appendingComponent(current.file))
                    }
                    try FileSystem.sync(directory, path: directory.path)
                    try reconcileFile(
                        entry.file, of: id, in: directory, tx: tx, schemaVersion: entry.schemaVersion,
                        incoming: entry.incoming.map { ($0, entry.hash!) })
                } else if let current {
                    if !damaged { try reconcileFile(current.file, of: id, in: directory, tx: tx) }
                } else if !entry.file.isEmpty {
                    try reconcileFile(entry.file, of: id, in: directory, tx: tx)
                }
            }
            try tx.removeIntent(intent)
        }
    }

    /// Records what is on disk for one object's file, as a scan would: a changed file is a new
    /// version, a missing one a delete, an unchanged one nothing. A file holding the bytes a
    /// sync's write carried (`incoming`) is recorded as that sync's version. A name that is
    /// not the key's file in its directory (a damaged row's) is never looked at: no such file
    /// can be there, so it counts as missing.
    @discardableResult
    func reconcileFile(
        _ file: String, of id: ObjectID, in directory: Descriptor, tx: ManifestTransaction, schemaVersion: Int? = nil,
        incoming: (version: ReplicatedVersion, hash: ContentHash)? = nil
    ) throws
        -> StoreChange?
    {
        let where_ = path.appendingComponent(FileName.encode(id.collection)).appendingComponent(file)
        let existing = try tx.object(id)
        let status = FileName.problem(withFile: file, ofKey: id.key) == nil ? try FileSystem.status(file, in: directory, path: where_) : nil
        guard let status, status.kind == .regular else {
            guard let existing, existing.file == file else { return nil }
            return try tx.recordDelete(of: existing, origin: .external)
        }
        if let existing, !existing.isDeleted, existing.file == file, existing.stamp == status.stamp, !existing.racy { return nil }
        guard let content = try FileSystem.readFile(file, in: directory, path: where_) else { return nil }
        let hash = ContentHash(of: content)
        let synced = incoming?.hash == hash ? incoming?.version : nil
        return try tx.record(
            RecordedChange(
                id: id, file: file, content: content, hash: hash, stamp: status.stamp,
                schemaVersion: schemaVersion ?? existing?.schemaVersion, origin: synced == nil ? .external : .sync, incoming: synced),
            existing: existing)
    }
}
