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
    func tempName() -> String {
        let me = ProcessIdentity.current
        let n = tempCounter.add(1, ordering: .relaxed).newValue
        return "\(FileName.tempPrefix)\(me.pid).\(me.startTime).\(n)"
    }

    /// Applies writes with a ``PendingWrite/condition`` (a sync's, a cache's evictions) in the
    /// crash-safe order that pays three flushes:
    ///
    /// 1. under the manifest's write lock: leave out what is already stored exactly as asked,
    ///    and record an intent naming every temp file and target (a dead process's intent
    ///    tells the next open what to clean and reconcile);
    /// 2. write every temp file and flush them (`fdatasync` for one, `syncfs` for many);
    /// 3. under the write lock again: rename each temp over its target (or unlink the target
    ///    of a delete), record each change, `fsync` each directory once, drop the intent, commit.
    ///
    /// A write is skipped when its object no longer holds what the condition names: another
    /// process changed it, in the manifest or only on disk so far. Checked in both transactions, the second time just before the
    /// renames, so a change made meanwhile is never overwritten (a sync's writes, a cache's
    /// evictions).
    ///
    /// `then`, when given, runs in the transaction that records the writes, before any file is
    /// replaced, with whether each write goes ahead (or is already stored as asked); if it
    /// throws, nothing is written.
    ///
    /// - Returns: each object's version afterwards, or nil for a skipped write.
    func applyChecked(_ requested: [PendingWrite], then: ((ManifestTransaction, [Bool]) throws -> Void)? = nil) throws -> [Int?] {
        guard !requested.isEmpty else { return [] }
        try refuseIfReadOnly()
        try requireRecovered()
        var directories: [ExactName: Descriptor] = [:]
        do {
            for write in requested where directories[ExactName(write.id.collection)] == nil {
                directories[ExactName(write.id.collection)] = try openCollection(write.id.collection, create: write.content != nil)
            }

            let plan = try manifest.write { tx in
                let plan = try self.plan(requested, tx: tx)
                if plan.intent == nil { try then?(tx, plan.versions.map { $0 != nil }) }
                return plan
            }
            guard let intent = plan.intent else { return plan.versions }
            var writes = plan.needed.map { requested[$0] }
            do {
                try writeTempFiles(&writes, entries: plan.entries, directories: directories)
                let versions = try manifest.write { tx in
                    try self.commit(writes, entries: plan.entries, intent: intent, directories: directories, tx: tx) { skipped in
                        guard let then else { return }
                        var going = plan.versions.map { $0 != nil }
                        for (position, index) in plan.needed.enumerated() { going[index] = !skipped.contains(position) }
                        try then(tx, going)
                    }
                }
                var result = plan.versions
                for (position, index) in plan.needed.enumerated() { result[index] = versions[position] }
                return result
            } catch {
                // Undo what can be undone now rather than waiting for this process to die. A
                // disk too full to record even that leaves it to recovery, which every later
                // write tries first.
                do {
                    try reconcile(intent, plan.entries)
                } catch let undo where Self.isOutOfSpace(undo) {
                    recoveryWaits(writes: 1, objects: plan.entries.count, cause: undo, stuck: intent)
                } catch {}
                throw error
            }
        } catch {
            throw ArchiveError.wrap(error)
        }
    }

    /// What ``applyChecked(_:then:)`` will write.
    private struct WritePlan: Sendable {
        /// The version of each requested write already stored as asked; nil for those to write
        /// and for conditional writes skipped because their object changed.
        var versions: [Int?]
        /// Indices of the writes to make, in order.
        var needed: [Int] = []
        var entries: [WriteIntent.Entry] = []
        var intent: Int64?
    }

    /// Phase 1 of ``applyChecked(_:then:)``: drops writes already stored exactly as asked (same file and
    /// bytes, or a delete of what is deleted) and records the intent for the rest. An object
    /// written more than once in one batch is always written, in order.
    ///
    /// A write whose object's row is damaged (names a file no write makes) is refused here,
    /// before anything is recorded, with the whole batch; a conditional one (a sync's) is
    /// skipped instead, as if its object had changed, so that the rest goes ahead.
    private func plan(_ writes: [PendingWrite], tx: ManifestTransaction) throws -> WritePlan {
        var occurrences: [ObjectID: Int] = [:]
        for write in writes { occurrences[write.id, default: 0] += 1 }
        var plan = WritePlan(versions: Array(repeating: nil, count: writes.count))
        for (index, write) in writes.enumerated() {
            if let condition = write.condition, try tx.liveHash(write.id) != condition.liveHash { continue }
            let record = try tx.object(write.id)
            if let damage = Self.damage(of: write, record: record) {
                if write.condition != nil { continue }
                throw damage
            }
            if occurrences[write.id] == 1, let version = try storedVersion(matching: write, record: record) {
                plan.versions[index] = version
                continue
            }
            plan.needed.append(index)
            plan.entries.append(
                WriteIntent.Entry(
                    collection: write.id.collection, key: write.id.key, file: write.file, temp: write.content == nil ? nil : tempName(),
                    hash: write.hash, schemaVersion: write.schemaVersion, vector: write.incoming?.vector, modified: write.incoming?.modified,
                    author: write.incoming?.author))
        }
        if !plan.needed.isEmpty { plan.intent = try tx.addIntent(plan.entries) }
        return plan
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
    func openCollection(_ collection: String, create: Bool) throws -> Descriptor? {
        let name = FileName.encode(collection)
        do {
            return try FileSystem.openDirectory(name, in: root, path: path.appendingComponent(name))
        } catch let error as SystemCallError where error.errno == ENOENT {
            guard create else { return nil }
            try FileSystem.makeDirectory(name, in: root, path: path.appendingComponent(name))
            return try FileSystem.openDirectory(name, in: root, path: path.appendingComponent(name))
        }
    }

    /// Phase 2 of ``applyChecked(_:then:)``: writes the temp files, on every core for a large batch, and
    /// flushes them: `fdatasync` for one, one `syncfs` for many.
    private func writeTempFiles(_ writes: inout [PendingWrite], entries: [WriteIntent.Entry], directories: [ExactName: Descriptor]) throws {
        let snapshot = writes
        // A sync's file keeps the time its object was modified, as `rsync -a` keeps times. A
        // time older than the racy window also makes its stamp trustworthy at once: any later
        // write gives the file a new mtime. (A file written now may be written again within
        // the clock's granularity without its stamp changing, so the next scan reads it.)
        let racyBefore = Manifest.now() - Manifest.racyWindow
        let stamps = try parallelMap(writes.count, threshold: 256) { index -> FileStamp? in
            guard let temp = entries[index].temp, let content = snapshot[index].content,
                let directory = directories[ExactName(snapshot[index].id.collection)]
            else { return nil }
            let modified = snapshot[index].incoming.map(\.modified).flatMap { $0 > 0 && $0 < racyBefore ? $0 : nil }
            return try FileSystem.writeNewFile(
                temp, in: directory, data: content, sync: snapshot.count == 1, modified: modified, path: directory.path.appendingComponent(temp))
        }
        for (index, stamp) in stamps.enumerated() { writes[index].stamp = stamp }
        if writes.count > 1, entries.contains(where: { $0.temp != nil }) {
            try FileSystem.syncFileSystem(root, path: path)
        }
    }

    /// Phase 3 of ``applyChecked(_:then:)``, inside the write transaction: renames, records, flushes the
    /// directories and drops the intent. Returns each write's version. `beforeRenames` is
    /// given the writes skipped because the manifest no longer holds what they expect.
    private func commit(
        _ writes: [PendingWrite], entries: [WriteIntent.Entry], intent: Int64, directories: [ExactName: Descriptor], tx: ManifestTransaction,
        beforeRenames: (Set<Int>) throws -> Void
    ) throws -> [Int?] {
        var versions: [Int?] = []
        var touched: Set<ExactName> = []
        // Conditional writes whose object changed since they were planned (in the manifest
        // now, or on disk just before each rename, below) are skipped; their temp files go.
        var skipped: Set<Int> = []
        var expectations: [Int: DiskExpectation] = [:]
        func skip(_ index: Int) throws {
            skipped.insert(index)
            if let temp = entries[index].temp, let directory = directories[ExactName(writes[index].id.collection)] {
                try FileSystem.removeFile(temp, in: directory, path: directory.path.appendingComponent(temp))
            }
        }
        for (index, write) in writes.enumerated() where write.condition != nil {
            let directoryExists = directories[ExactName(write.id.collection)] != nil
            guard let expectation = try diskExpectation(of: write, directoryExists: directoryExists, tx: tx) else {
                try skip(index)
                continue
            }
            expectations[index] = expectation
        }
        try beforeRenames(skipped)
        // A collection's first object: its directory may have been made by a process that
        // died before flushing the store's directory, so flush it here, before the commit.
        var firstInCollection = false
        for collection in Set(writes.lazy.filter { $0.content != nil }.map { ExactName($0.id.collection) }) {
            if try !tx.hasObjects(in: collection.string) { firstInCollection = true }
        }
        // When no object is written twice, the renames are independent: do them first, on every core.
        let distinct = Set(writes.lazy.map(\.id)).count == writes.count
        if distinct {
            let renamed = try parallelMap(writes.count, threshold: 256) { [skipped, expectations] index -> Bool in
                guard !skipped.contains(index), let temp = entries[index].temp, let directory = directories[ExactName(writes[index].id.collection)]
                else { return true }
                let file = writes[index].file
                switch expectations[index] {
                case .absent?:
                    // Nothing may have appeared at the name since: checked by the rename itself.
                    if try FileSystem.renameIfAbsent(temp, to: file, in: directory, path: directory.path.appendingComponent(file)) { return true }
                case let expectation? where try !diskMatches(expectation, in: directory):
                    break
                default:
                    try FileSystem.rename(temp, to: file, in: directory, path: directory.path.appendingComponent(file))
                    return true
                }
                try FileSystem.removeFile(temp, in: directory, path: directory.path.appendingComponent(temp))
                return false
            }
            for (index, done) in renamed.enumerated() where !done { skipped.insert(index) }
        }
        for (index, write) in writes.enumerated() {
            if skipped.contains(index) {
                versions.append(nil)
                continue
            }
            let existing = try tx.object(write.id)
            guard let directory = directories[ExactName(write.id.collection)] else {
                // A delete where the directory is gone: the object is gone too.
                let recorded = try tx.recordDelete(of: existing, origin: write.incoming == nil ? .local : .sync, incoming: write.incoming)
                versions.append(recorded?.version ?? existing?.version ?? 0)
                continue
            }
            let where_ = directory.path
            // Checked here when not already just before a rename above: a delete, or a batch
            // that writes one object twice.
            if !distinct || write.content == nil, let expectation = expectations[index], try !diskMatches(expectation, in: directory) {
                try skip(index)
                versions.append(nil)
                continue
            }
            var file = write.file
            if let temp = entries[index].temp {
                if !distinct { try FileSystem.rename(temp, to: write.file, in: directory, path: where_.appendingComponent(write.file)) }
                touched.insert(ExactName(write.id.collection))
            }
            if let existing, !existing.isDeleted, existing.file != write.file || write.content == nil {
                if try FileSystem.removeFile(existing.file, in: directory, path: where_.appendingComponent(existing.file)) {
                    touched.insert(ExactName(write.id.collection))
                }
                if write.content == nil { file = existing.file }
            }
            let change = RecordedChange(
                id: write.id, file: file, content: write.content, hash: write.hash, stamp: write.stamp,
                schemaVersion: write.schemaVersion, origin: write.incoming == nil ? .local : .sync, incoming: write.incoming)
            let recorded = try tx.record(change, existing: existing)
            versions.append(recorded?.version ?? existing?.version ?? 0)
        }
        // Before the commit: the manifest never records a rename that is not yet durable.
        for collection in touched {
            let directory = directories[collection]!
            try FileSystem.sync(directory, path: directory.path)
        }
        if firstInCollection { try FileSystem.sync(root, path: path) }
        try tx.removeIntent(intent)
        return versions
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
                if let entries = intent.entries, intent.isCommitted {
                    try restoreCommitted(intent.id, entries)
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
