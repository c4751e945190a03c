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

    init(id: ObjectID, file: String, content: Data?, schemaVersion: Int? = nil) {
        self.id = id
        self.file = file
        self.content = content
        self.hash = content.map(ContentHash.init(of:))
        self.schemaVersion = schemaVersion
    }
}

private let tempCounter = Atomic<Int>(0)

extension ArchiveStore {
    /// Encodes `value` for `id` in its collection's codec.
    func prepare<T: Encodable>(_ value: T, as id: ObjectID) throws -> PendingWrite {
        let codec = codec(for: id.collection)
        let data: Data
        do {
            data = try codec.encode(value)
        } catch {
            throw ArchiveError.unencodable(id, type: String(reflecting: T.self), reason: String(describing: error))
        }
        let schema = (T.self as? any VersionedModel.Type)?.schemaVersion
        return PendingWrite(
            id: id, file: FileName.join(stem: FileName.encode(id.key), extension: codec.fileExtension), content: data, schemaVersion: schema)
    }

    /// A temp file name no other process or thread uses, that names its owner for clean-up.
    private func tempName() -> String {
        let me = ProcessIdentity.current
        let n = tempCounter.add(1, ordering: .relaxed).newValue
        return "\(FileName.tempPrefix)\(me.pid).\(me.startTime).\(n)"
    }

    /// Applies saves and deletes with one durability barrier, in the crash-safe order:
    ///
    /// 1. record an intent naming every temp file and target (a dead process's intent tells
    ///    the next open what to clean and reconcile);
    /// 2. write every temp file and flush them (`fdatasync` for one, `syncfs` for many);
    /// 3. under the manifest's write lock: rename each temp over its target (or unlink the
    ///    target of a delete), `fsync` each directory once, record each change, drop the intent.
    ///
    /// - Returns: each object's version afterwards, in the order of `writes`.
    @discardableResult
    func apply(_ requested: [PendingWrite]) throws -> [Int] {
        guard !requested.isEmpty else { return [] }
        let (unchanged, needed) = try currentVersions(of: requested)
        guard !needed.isEmpty else { return requested.indices.map { unchanged[$0] ?? 0 } }
        var writes = needed.map { requested[$0] }
        let versions = try write(&writes)
        var result = requested.indices.map { unchanged[$0] ?? 0 }
        for (position, index) in needed.enumerated() { result[index] = versions[position] }
        return result
    }

    /// Splits `writes` into those already on disk and in the manifest exactly as requested
    /// (same file and bytes; or a delete of what is already deleted),
    /// with their versions, and the indices of those that need writing. An object written
    /// more than once in one batch is always written, in order.
    private func currentVersions(of writes: [PendingWrite]) throws -> (unchanged: [Int: Int], needed: [Int]) {
        do {
            var occurrences: [ObjectID: Int] = [:]
            for write in writes { occurrences[write.id, default: 0] += 1 }
            let records = try manifest.read { tx in try writes.map { occurrences[$0.id] == 1 ? try tx.object($0.id) : nil } }
            var unchanged: [Int: Int] = [:]
            var needed: [Int] = []
            for (index, write) in writes.enumerated() {
                if occurrences[write.id] != 1 {
                    needed.append(index)
                    continue
                }
                guard let record = records[index] else {
                    if write.content == nil { unchanged[index] = 0 } else { needed.append(index) }
                    continue
                }
                if write.content == nil, record.isDeleted {
                    unchanged[index] = record.version
                } else if write.content != nil, !record.isDeleted, record.file == write.file, record.hash == write.hash,
                    record.schemaVersion == write.schemaVersion, try fileHolds(record, hash: write.hash)
                {
                    unchanged[index] = record.version
                } else {
                    needed.append(index)
                }
            }
            return (unchanged, needed)
        } catch {
            throw ArchiveError.wrap(error)
        }
    }

    /// True when the record's file is on disk with exactly these contents. Compares bytes, not
    /// the stamp: restoring over bit rot (same stamp, other bytes) must rewrite the file.
    private func fileHolds(_ record: ObjectRecord, hash: ContentHash?) throws -> Bool {
        let name = FileName.encode(record.id.collection)
        let where_ = path + "/" + name + "/" + record.file
        guard let directory = try? FileSystem.openDirectory(name, in: root, path: path + "/" + name) else { return false }
        defer { directory.close() }
        return try FileSystem.readFile(record.file, in: directory.fd, path: where_).map(ContentHash.init(of:)) == hash
    }

    /// Writes what ``apply(_:)`` found needs writing.
    private func write(_ writes: inout [PendingWrite]) throws -> [Int] {
        var entries: [WriteIntent.Entry] = []
        for index in writes.indices {
            let temp = writes[index].content == nil ? nil : tempName()
            entries.append(
                WriteIntent.Entry(
                    collection: writes[index].id.collection, key: writes[index].id.key, file: writes[index].file, temp: temp,
                    schemaVersion: writes[index].schemaVersion))
        }
        do {
            var directories: [String: FileHandle] = [:]
            defer { for directory in directories.values { directory.close() } }
            var createdDirectory = false
            for write in writes where directories[write.id.collection] == nil {
                let name = FileName.encode(write.id.collection)
                if write.content != nil {
                    createdDirectory = try FileSystem.makeDirectory(name, in: root, path: path + "/" + name) || createdDirectory
                }
                do {
                    directories[write.id.collection] = try FileSystem.openDirectory(name, in: root, path: path + "/" + name)
                } catch let error as SystemCallError where error.errno == ENOENT {
                    continue  // a delete in a collection that has no directory: nothing on disk
                }
            }
            if createdDirectory { try FileSystem.sync(root, path: path) }

            let intent = try manifest.write { try $0.addIntent(entries) }
            do {
                for (index, entry) in entries.enumerated() {
                    guard let temp = entry.temp, let content = writes[index].content, let directory = directories[entry.collection] else { continue }
                    writes[index].stamp = try FileSystem.writeNewFile(
                        temp, in: directory.fd, data: content, sync: writes.count == 1, path: path + "/" + temp)
                }
                if writes.count > 1, entries.contains(where: { $0.temp != nil }) {
                    try FileSystem.syncFileSystem(root, path: path)
                }
                return try manifest.write { tx in
                    var versions: [Int] = []
                    var touched: Set<String> = []
                    for (index, write) in writes.enumerated() {
                        let existing = try tx.object(write.id)
                        guard let directory = directories[write.id.collection] else {
                            versions.append(existing?.version ?? 0)
                            continue
                        }
                        let where_ = path + "/" + FileName.encode(write.id.collection) + "/"
                        var file = write.file
                        if let temp = entries[index].temp {
                            try FileSystem.rename(temp, to: write.file, in: directory.fd, path: where_ + write.file)
                            touched.insert(write.id.collection)
                        }
                        if let existing, !existing.isDeleted, existing.file != write.file || write.content == nil {
                            if try FileSystem.removeFile(existing.file, in: directory.fd, path: where_ + existing.file) {
                                touched.insert(write.id.collection)
                            }
                            if write.content == nil { file = existing.file }
                        }
                        let change = RecordedChange(
                            id: write.id, file: file, content: write.content, hash: write.hash, stamp: write.stamp,
                            schemaVersion: write.schemaVersion, origin: .local)
                        let recorded = try tx.record(change)
                        versions.append(recorded?.version ?? existing?.version ?? 0)
                    }
                    for collection in touched {
                        try FileSystem.sync(directories[collection]!.fd, path: path + "/" + FileName.encode(collection))
                    }
                    try tx.removeIntent(intent)
                    return versions
                }
            } catch {
                // Undo what can be undone now rather than waiting for this process to die.
                try? reconcile(WriteIntent(id: intent, owner: .current, entries: entries))
                throw error
            }
        } catch {
            throw ArchiveError.wrap(error)
        }
    }

    /// Finishes the writes of processes that died mid-write: removes their temp files and
    /// records whatever their renames left on disk.
    func recoverInterruptedWrites() throws {
        do {
            let intents = try manifest.read { try $0.intents() }
            for intent in intents where !intent.owner.isRunning {
                try reconcile(intent)
            }
        } catch {
            throw ArchiveError.wrap(error)
        }
    }

    /// Removes an intent's temp files and reconciles its targets with the manifest, under the write lock.
    private func reconcile(_ intent: WriteIntent) throws {
        try manifest.write { tx in
            for entry in intent.entries {
                let name = FileName.encode(entry.collection)
                guard let directory = try? FileSystem.openDirectory(name, in: root, path: path + "/" + name) else { continue }
                defer { directory.close() }
                if let temp = entry.temp { try FileSystem.removeFile(temp, in: directory.fd, path: path + "/" + name + "/" + temp) }
                let id = ObjectID(unchecked: entry.collection, key: entry.key)
                var files = [entry.file]
                if let current = try tx.object(id), current.file != entry.file { files.append(current.file) }
                for file in files where !file.isEmpty {
                    try reconcileFile(file, of: id, in: directory.fd, tx: tx, schemaVersion: entry.schemaVersion)
                }
            }
            try tx.removeIntent(intent.id)
        }
    }

    /// Records what is on disk for one object's file, as a scan would: a changed file is a new
    /// version, a missing one a delete, an unchanged one nothing.
    @discardableResult
    func reconcileFile(_ file: String, of id: ObjectID, in directory: Int32, tx: ManifestTransaction, schemaVersion: Int? = nil) throws
        -> StoreChange?
    {
        let where_ = path + "/" + FileName.encode(id.collection) + "/" + file
        let existing = try tx.object(id)
        guard let status = try FileSystem.status(file, in: directory, path: where_), status.kind == .regular else {
            guard let existing, !existing.isDeleted, existing.file == file else { return nil }
            return try tx.record(
                RecordedChange(id: id, file: file, content: nil, hash: nil, stamp: nil, schemaVersion: existing.schemaVersion, origin: .external))
        }
        if let existing, !existing.isDeleted, existing.file == file, existing.stamp == status.stamp, !existing.racy { return nil }
        guard let content = try FileSystem.readFile(file, in: directory, path: where_) else { return nil }
        return try tx.record(
            RecordedChange(
                id: id, file: file, content: content, hash: ContentHash(of: content), stamp: status.stamp,
                schemaVersion: schemaVersion ?? existing?.schemaVersion, origin: .external))
    }
}
