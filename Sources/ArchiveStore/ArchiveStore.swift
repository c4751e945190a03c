import ArchiveLocking
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A directory of Codable models, one archive file per object, with a versioned manifest.
///
/// ```swift
/// let store = try ArchiveStore(directory: "./store")            // creates it if missing
/// try store.save(person, forKey: "person1")                     // ./store/Person/person1.json
/// let p = try store.load(Person.self, forKey: "person1")        // nil when absent
/// let versions = try store.history(of: Person.self, forKey: "person1")
/// try store.restore(Person.self, forKey: "person1", version: 1)
/// ```
///
/// Writes are atomic and durable: a save returns once one flushed manifest commit holds the
/// new version's bytes; its file, written to a temp file first, is renamed into place right
/// after, and made durable by a `syncfs` within a second (or when the store is released).
/// A process killed or a power cut at any moment leaves each object old or new, never
/// half-written; the next open puts back from the manifest any file a cut lost.
///
/// One store may be used from many threads and tasks at once, and by several processes at
/// once: SQLite's write lock orders every write, so no process loses another's write (the
/// earlier one stays in history).
public final class ArchiveStore: Sendable {
    /// Settings for opening a store.
    public struct Options: Sendable {
        /// The codec new objects are written in. Default: JSON.
        public var codec: ArchiveCodec
        /// Per-collection codecs, overriding ``codec``: `["Thumbnail": .propertyList]`.
        public var collectionCodecs: [String: ArchiveCodec]
        /// How many versions of each object history keeps. nil keeps the store's setting
        /// (10 for a new store); a number changes it for every later write.
        public var historyLimit: Int?
        /// Create the directory and the store when missing. Default: true.
        public var create: Bool

        public init(codec: ArchiveCodec = .json, collectionCodecs: [String: ArchiveCodec] = [:], historyLimit: Int? = nil, create: Bool = true) {
            self.codec = codec
            self.collectionCodecs = collectionCodecs
            self.historyLimit = historyLimit
            self.create = create
        }
    }

    /// The store's directory, as given.
    public let path: String
    /// This store's replica id, made when it was created.
    public var replica: ReplicaID { manifest.replica }
    /// How many versions of each object history keeps (the store's setting, which any process
    /// opening it with ``Options/historyLimit`` may change).
    public var historyLimit: Int {
        (try? manifest.read { try $0.historyLimit() }) ?? Manifest.defaultHistoryLimit
    }

    /// Whether this process can only read the store (a read-only file system, or no write
    /// permission): reads work, and every write throws ``ArchiveError/readOnly(path:reason:)``.
    public var isReadOnly: Bool { manifest.writeRefusal != nil }
    /// Writes that a killed process left half-recorded and that this open could not finish,
    /// because the store is read-only: reads see the last recorded state, without them. The
    /// first open that can write finishes them. Always 0 for a store that can be written.
    public let interruptedWrites: Int

    let options: Options
    let manifest: Manifest
    /// The inode of the manifest file as opened, to notice it being removed or replaced.
    let manifestInode: UInt64
    /// The store's root directory, opened once: every other name is resolved from it.
    let root: Descriptor
    /// Whether a recovery of interrupted writes waits (``pendingRecovery``).
    let recoveryState = TracedMutex(RecoveryState())
    /// This process's committed writes that wait for a `syncfs` (Durability.swift).
    let durability = TracedMutex(DurabilityState())
    /// `.archive-sync/staging`, where saves write their files before their commit: opened at
    /// the first write that needs it (``stagingDirectory()``), so that an open makes nothing
    /// and a store on a full disk or a read-only mount can still be read.
    let staging = TracedMutex<Descriptor?>(nil)
    /// Saves of several threads that land together, committed as one (Writes+Commit.swift).
    let commitQueue = CommitQueue()
    /// The collection directories writes have opened, kept open for the next.
    let collectionDirectories = CollectionDirectories()

    deinit {
        // Released: its committed writes get their `syncfs` now rather than at the next open.
        try? settleCommittedWrites()
    }

    /// Opens the store in `directory`, creating it when missing (unless `options.create` is false).
    ///
    /// Opening finishes any write that a killed process left half-recorded: it removes that
    /// process's temp files and records what its renames left on disk (unless the store is
    /// read-only: see ``interruptedWrites``).
    ///
    /// Only a store that has never had a manifest gets a new one. A store whose manifest is
    /// missing, empty or damaged is refused with ``ArchiveError/damagedManifest(store:problem:)``
    /// and left as it is; ``repair(directory:force:)`` rebuilds it.
    public init(directory: String, options: Options = Options()) throws {
        if let limit = options.historyLimit, limit < 1 {
            throw ArchiveError.invalidInput("the history limit must be at least 1, not \(limit)")
        }
        self.path = directory
        self.options = options
        do {
            if options.create {
                // The error names the store, not only the parent whose flush failed.
                do { try FileSystem.makeDirectories(directory) } catch let error as SystemCallError {
                    throw ArchiveError.storeNotCreated(path: directory, cause: error)
                }
            }
            do {
                root = try FileSystem.openDirectory(directory, path: directory, followSymlink: true)
            } catch let error as SystemCallError where error.errno == ENOENT || error.errno == ENOTDIR {
                throw ArchiveError.notAStore(path: directory, reason: error.errno == ENOENT ? "it does not exist" : "it is not a directory")
            }
            let metadata = FileName.metadataDirectory
            var madeMetadata = false
            switch try FileSystem.status(metadata, in: root, path: directory.appendingComponent(metadata))?.kind {
            case .directory?: break
            case nil where options.create:
                madeMetadata = try FileSystem.makeDirectory(metadata, in: root, path: directory.appendingComponent(metadata))
                try FileSystem.sync(root, path: directory)
            case nil:
                throw ArchiveError.notAStore(
                    path: directory, reason: "it has no \(metadata) directory (run `archive-sync init \(directory)` to make it a store)")
            case .symlink?:
                throw ArchiveError.symlinkRefused(path: directory.appendingComponent(metadata))
            default:
                throw ArchiveError.notAStore(path: directory, reason: "\(metadata) is not a directory")
            }
            let metadataHandle = try FileSystem.openDirectory(metadata, in: root, path: directory.appendingComponent(metadata))
            // SQLite opens by path: the resolved one, so that its no-symlink rule applies inside the store only.
            manifest = try Manifest.open(
                store: directory, resolved: try FileSystem.resolvedPath(directory), root: root, metadata: metadataHandle,
                historyLimit: options.historyLimit,
                mayCreate: options.create, madeMetadata: madeMetadata, readOnly: Self.writeRefusal(root: root, path: directory))
            manifestInode = try FileSystem.status(Manifest.fileName, in: metadataHandle, path: directory)?.stamp.inode ?? 0
            if manifest.writeRefusal == nil, let cleaned = try Self.cleanStaging(root: root, path: directory) {
                staging.withLock { $0 = cleaned }
            }
            // Recovery writes: on a store that cannot be written, reads see the last recorded state.
            interruptedWrites = manifest.writeRefusal == nil ? 0 : try manifest.read { try $0.intents().count { !$0.owner.isRunning } }
        } catch {
            throw ArchiveError.wrap(error)
        }
        if manifest.writeRefusal == nil { try recoverInterruptedWrites() }
    }

    // MARK: - Typed API

    /// What a file of this `st_mode` is, for a message: "a directory", "a FIFO", "a socket"...
    package static func fileKindName(_ mode: mode_t) -> String { FileSystem.kindName(mode) }

    /// A name as the store reports one that is not valid UTF-8: each byte that is not part of a
    /// UTF-8 character as `\xff`.
    package static func readableName(_ bytes: some Collection<UInt8>) -> String { FileName.readable(bytes) }

    /// The directory at the root of every store that holds its manifest: `.archive-sync`.
    package static var metadataDirectoryName: String { FileName.metadataDirectory }

    /// The file in the metadata directory that every commit which moves the change sequence
    /// opens read-only and closes once it is visible (inotify's `IN_CLOSE_NOWRITE`), for
    /// processes that follow the manifest. Releases before this one set its times instead
    /// (`IN_ATTRIB`).
    package static var commitAnnouncementName: String { Manifest.writerLockName }

    /// The collection a type is stored in by default: its name, such as `Person`.
    public static func collectionName<T>(of type: T.Type) -> String {
        let id = ObjectIdentifier(type)
        if let name = collectionNames.withLock({ $0[id] }) { return name }
        let name = String(describing: type)
        collectionNames.withLock { $0[id] = name }
        return name
    }

    /// `String(describing:)` of a type costs about as much as reading a small file: cache it.
    private static let collectionNames = TracedMutex<[ObjectIdentifier: String]>([:])

    /// Saves `value` as the next version of `key` in its type's collection.
    ///
    /// Saving a value equal to the current one (the same bytes) records no new version.
    /// - Returns: the object's version after the save.
    @discardableResult
    public func save<T: Encodable>(_ value: T, forKey key: String, in collection: String? = nil) throws -> Int {
        let id = try ObjectID(collection: collection ?? Self.collectionName(of: T.self), key: key)
        return try apply([prepare(value, as: id)])[0]
    }

    /// Loads the object `key` as a `T`, or returns nil when there is no such object.
    ///
    /// Throws ``ArchiveError/undecodable(_:type:reason:)`` when its bytes are not a `T`,
    /// ``ArchiveError/unknownCodec(_:fileExtension:)`` when its file's extension names no
    /// codec, and the migration errors of ``VersionedModel``. A bad object never affects others.
    public func load<T: Decodable>(_ type: T.Type, forKey key: String, in collection: String? = nil) throws -> T? {
        let id = try ObjectID(collection: collection ?? Self.collectionName(of: T.self), key: key)
        guard let (data, file) = try readCurrent(id) else { return nil }
        return try decode(type, id: id, file: file, data: data, schemaVersion: { try self.recordedSchemaVersion(of: id) })
    }

    /// Removes `key` from its type's collection; its history is kept. Removing an absent object does nothing.
    public func remove<T>(_ type: T.Type, forKey key: String, in collection: String? = nil) throws {
        try remove(ObjectID(collection: collection ?? Self.collectionName(of: T.self), key: key))
    }

    /// The keys of every object in the type's collection, sorted.
    public func keys<T>(of type: T.Type, in collection: String? = nil) throws -> [String] {
        let name = collection ?? Self.collectionName(of: T.self)
        if let reason = ObjectID.problem(with: name, isCollection: true) { throw ArchiveError.invalidCollection(name, reason: reason) }
        return try withManifest { try $0.read { try $0.keys(in: name) } }
    }

    /// Removes every object in exactly the type's collection (`Person`, never `PersonModel`),
    /// as one batch with one durability barrier. History is kept.
    public func removeAll<T>(of type: T.Type, in collection: String? = nil) throws {
        let name = collection ?? Self.collectionName(of: T.self)
        if let reason = ObjectID.problem(with: name, isCollection: true) { throw ArchiveError.invalidCollection(name, reason: reason) }
        let live = try withManifest { try $0.read { try $0.keys(in: name) } }
        try apply(live.map { PendingWrite(id: ObjectID(unchecked: name, key: $0), file: "", content: nil) })
    }

    /// Saves and removes many objects with one durability barrier: all are written, flushed
    /// together, renamed, and recorded in one manifest transaction.
    ///
    /// ```swift
    /// try store.batch { tx in
    ///     for p in people { try tx.save(p, forKey: p.id) }
    /// }
    /// ```
    /// If `body` throws, nothing is written.
    public func batch(_ body: (ArchiveBatch) throws -> Void) throws {
        let batch = ArchiveBatch(store: self)
        do {
            try body(batch)
        } catch {
            batch.stager?.cancel()
            throw error
        }
        try apply(batch.writes, stagedBy: batch.stager)
    }

    /// The kept versions of `key`, oldest first (the current version is the last).
    public func history<T>(of type: T.Type, forKey key: String, in collection: String? = nil) throws -> [ObjectVersion] {
        try history(ObjectID(collection: collection ?? Self.collectionName(of: T.self), key: key))
    }

    /// Makes the contents of `version` the object's next version, after checking they decode as `T`.
    /// History is never rewritten: restoring version 2 of an object at version 5 makes version 6.
    /// - Returns: the object's version after the restore.
    @discardableResult
    public func restore<T: Decodable>(_ type: T.Type, forKey key: String, version: Int, in collection: String? = nil) throws -> Int {
        let id = try ObjectID(collection: collection ?? Self.collectionName(of: T.self), key: key)
        let (kept, data) = try keptVersion(id, version)
        _ = try decode(type, id: id, file: kept.file, data: data, schemaVersion: { kept.schemaVersion })
        return try apply([PendingWrite(id: id, file: kept.file, content: data, schemaVersion: kept.schemaVersion)])[0]
    }

    /// Rewrites every object of the type's collection saved with an older (or unrecorded)
    /// schema in the current one. Objects that fail to migrate are left untouched and reported by key.
    public func migrateAll<T: VersionedModel>(of type: T.Type, in collection: String? = nil) throws -> MigrationReport {
        let name = collection ?? Self.collectionName(of: T.self)
        if let reason = ObjectID.problem(with: name, isCollection: true) { throw ArchiveError.invalidCollection(name, reason: reason) }
        let stale = try withManifest {
            try $0.read { try $0.objects(in: name).filter { !$0.isDeleted && ($0.schemaVersion ?? 0) < T.schemaVersion } }
        }
        var report = MigrationReport()
        var writes: [PendingWrite] = []
        for record in stale {
            do {
                guard let value = try load(type, forKey: record.id.key, in: name) else { continue }
                writes.append(try prepare(value, as: record.id))
                report.migrated.append(record.id.key)
            } catch {
                report.failed.append(.init(key: record.id.key, reason: ArchiveError.wrap(error).description))
            }
        }
        try apply(writes)
        return report
    }

    // MARK: - Untyped API, by id (the command line's)

    /// Stores `data` as the next version of `id`, after checking it is well-formed in `codec`.
    @discardableResult
    public func put(_ data: Data, as id: ObjectID, codec: ArchiveCodec = .json) throws -> Int {
        do {
            try codec.validate(data)
        } catch {
            throw ArchiveError.invalidInput("the input for \(id) is not valid \(codec == .json ? "JSON" : "property list"): \(Self.reason(error))")
        }
        let file = FileName.join(stem: FileName.encode(id.key), extension: codec.fileExtension)
        return try apply([PendingWrite(id: id, file: file, content: data, schemaVersion: nil)])[0]
    }

    /// The bytes of `id`'s current file, or of a kept `version`.
    public func data(for id: ObjectID, version: Int? = nil) throws -> Data {
        if let version { return try keptVersion(id, version).1 }
        guard let (data, _) = try readCurrent(id) else { throw ArchiveError.notFound(id, version: nil) }
        return data
    }

    /// Removes `id`; its history is kept. Removing an absent object does nothing.
    public func remove(_ id: ObjectID) throws {
        try apply([PendingWrite(id: id, file: "", content: nil)])
    }

    /// The kept versions of `id`, oldest first; throws ``ArchiveError/notFound(_:version:)`` for an unknown id.
    public func history(_ id: ObjectID) throws -> [ObjectVersion] {
        let versions = try withManifest { try $0.read { try $0.history(id) } }
        if versions.isEmpty { throw ArchiveError.notFound(id, version: nil) }
        return versions
    }

    /// Makes the contents of `version` the next version of `id`, without decoding them.
    @discardableResult
    public func restore(_ id: ObjectID, version: Int) throws -> Int {
        let (kept, data) = try keptVersion(id, version)
        return try apply([PendingWrite(id: id, file: kept.file, content: data, schemaVersion: kept.schemaVersion)])[0]
    }

    /// Runs `body`, turning lower-level errors into ``ArchiveError``.
    func withManifest<T>(_ body: (Manifest) throws -> T) throws -> T {
        do { return try body(manifest) } catch { throw ArchiveError.wrap(error) }
    }
}

/// Saves and removes collected by ``ArchiveStore/batch(_:)``, applied together when its body returns.
public final class ArchiveBatch {
    private let store: ArchiveStore
    /// The writes so far, until a large batch hands them to `stager`.
    fileprivate private(set) var writes: [PendingWrite] = []
    /// Stages a large batch's files while the body encodes the rest (``BatchStager``).
    fileprivate private(set) var stager: BatchStager?

    fileprivate init(store: ArchiveStore) { self.store = store }

    /// Adds a save of `value` as `key` in its type's collection.
    public func save<T: Encodable>(_ value: T, forKey key: String, in collection: String? = nil) throws {
        let id = try ObjectID(collection: collection ?? ArchiveStore.collectionName(of: T.self), key: key)
        // Hashing waits for the stager's thread, once there is one.
        add(try store.prepare(value, as: id, hashing: stager == nil))
    }

    /// Adds a removal of `key` from its type's collection.
    public func remove<T>(_ type: T.Type, forKey key: String, in collection: String? = nil) throws {
        let id = try ObjectID(collection: collection ?? ArchiveStore.collectionName(of: T.self), key: key)
        add(PendingWrite(id: id, file: "", content: nil))
    }

    private func add(_ write: PendingWrite) {
        if let stager { return stager.add(write) }
        writes.append(write)
        if writes.count >= BatchStager.threshold, let started = BatchStager.start(for: store, with: writes) {
            stager = started
            writes = []
        }
    }
}
