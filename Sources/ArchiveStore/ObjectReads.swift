import Foundation

#if canImport(Glibc)
    import Glibc
#endif

// Reading an object: its current file (or, between a save's commit and its rename, the
// committed bytes), a kept version from history, and decoding either as a model.

extension ArchiveStore {
    /// The configured codec for a collection.
    func codec(for collection: String) -> ArchiveCodec {
        options.collectionCodecs[collection] ?? options.codec
    }

    /// The current file's bytes and name, or nil when the object does not exist.
    ///
    /// Only the file the manifest names is read: another file with the key's stem (`a.json`
    /// beside the `a.plist` that holds `a`, which a scan leaves alone) is not the object, nor is
    /// a file no scan has recorded yet.
    func readCurrent(_ id: ObjectID) throws -> (Data, String)? {
        do {
            guard let file = try manifest.readOne({ try $0.liveFile(of: id) }) else {
                try refuseWhatIsThere(instead: id)
                return nil
            }
            if let problem = FileName.problem(withFile: file, ofKey: id.key) {
                throw ArchiveError.damagedRecord(id, file: file, problem: problem)
            }
            let relative = FileName.encode(id.collection).appendingComponent(file)
            let read = { try FileSystem.readFile(relative, in: self.root, path: self.path.appendingComponent(relative)) }
            if let data = try read() { return (data, file) }
            if let data = try committedContents(of: id, file: file) { return (data, file) }
            // The rename may have landed and its intent settled since the first read.
            return try read().map { ($0, file) }
        } catch let error as SystemCallError where error.errno == ENOTDIR {
            return nil
        } catch {
            throw ArchiveError.wrap(error)
        }
    }

    /// The bytes of a write whose manifest commit has landed but whose file is not in place yet.
    /// A save commits before it renames its file (one flush per save, Writes+Commit.swift), so a
    /// reader in another process or thread can find the manifest naming a file not there yet; its
    /// writer's settle period (or the commit's own intent) says so, and the manifest holds the
    /// bytes. Nil for any other missing file (another program deleted it: the next scan records that).
    private func committedContents(of id: ObjectID, file: String) throws -> Data? {
        try manifest.read { tx -> Data? in
            guard let record = try tx.object(id) else { return nil }
            let pending = try tx.intents().contains { intent in
                if let after = intent.after { return record.sequence > after && record.file == file }
                return intent.isCommitted
                    && intent.entries?.contains { $0.collection == id.collection && $0.key == id.key && $0.file == file } == true
            }
            guard pending, !record.isDeleted, let hash = record.hash,
                let data = try tx.content(of: id, version: record.version), ContentHash(of: data) == hash
            else { return nil }
            return data
        }
    }

    /// For an object the manifest does not hold: names what sits where its file would be when
    /// that can never be an object's file (a FIFO, a symlinked collection), so that a read says
    /// why rather than only that the object does not exist. Opens without reading or blocking.
    func refuseWhatIsThere(instead id: ObjectID) throws {
        let relative = FileName.encode(id.collection).appendingComponent(objectFileName(of: id))
        _ = try FileSystem.openRegularFile(relative, in: root, path: path.appendingComponent(relative))
    }

    func keptVersion(_ id: ObjectID, _ version: Int) throws -> (ObjectVersion, Data) {
        try withManifest {
            try $0.read { tx in
                let versions = try tx.history(id)
                guard let kept = versions.first(where: { $0.version == version }) else {
                    if let oldest = versions.first?.version, version >= 1, version < oldest {
                        throw ArchiveError.versionNotKept(id, version: version, limit: try tx.historyLimit())
                    }
                    throw ArchiveError.notFound(id, version: version)
                }
                guard kept.hash != nil else {
                    throw ArchiveError.invalidInput("version \(version) of \(id) is a delete; it has no contents")
                }
                guard let data = try tx.content(of: id, version: version) else {
                    throw ArchiveError.versionNotKept(id, version: version, limit: try tx.historyLimit())
                }
                return (kept, data)
            }
        }
    }

    /// Decodes `data` (the contents of `file`) as a `T`.
    /// - Parameter schemaVersion: the schema the bytes were saved with; asked only for a ``VersionedModel``.
    func decode<T: Decodable>(_ type: T.Type, id: ObjectID, file: String, data: Data, schemaVersion: () throws -> Int?) throws -> T {
        let ext = FileName.split(file).extension
        guard let codec = ArchiveCodec(fileExtension: ext) else { throw ArchiveError.unknownCodec(id, fileExtension: String(ext)) }
        if let versioned = T.self as? any VersionedModel.Type {
            return try decodeVersioned(versioned, id: id, codec: codec, data: data, recorded: schemaVersion()) as! T
        }
        do {
            return try codec.decode(type, from: data)
        } catch {
            throw ArchiveError.undecodable(id, type: String(reflecting: type), reason: Self.reason(error))
        }
    }

    /// Decodes through ``VersionedModel``'s migration when the recorded schema is older.
    ///
    /// An object with no recorded schema (saved before the type adopted ``VersionedModel``, or
    /// written by another program) is tried in the current shape first, then as version 1.
    private func decodeVersioned<V: VersionedModel>(_ type: V.Type, id: ObjectID, codec: ArchiveCodec, data: Data, recorded: Int?) throws -> V {
        if let recorded, recorded > V.schemaVersion { throw ArchiveError.newerSchema(id, stored: recorded, supported: V.schemaVersion) }
        if recorded == nil || recorded == V.schemaVersion {
            do {
                return try codec.decode(type, from: data)
            } catch  where recorded != nil || V.schemaVersion == 1 {
                throw ArchiveError.undecodable(id, type: String(reflecting: type), reason: Self.reason(error))
            } catch {
                // Unrecorded, and not the current shape: try it as version 1 below.
            }
        }
        let from = recorded ?? 1
        do {
            return try codec.decode(Migrating<V>.self, from: data, userInfo: [.archiveSchemaVersion: from]).value
        } catch {
            throw ArchiveError.migrationFailed(id, from: from, reason: Self.reason(error))
        }
    }

    /// The schema version the manifest recorded for `id`'s current version.
    func recordedSchemaVersion(of id: ObjectID) throws -> Int? {
        try withManifest { try $0.read { try $0.object(id)?.schemaVersion } }
    }

    /// One sentence for a decoding failure, naming the coding path.
    static func reason(_ error: any Error) -> String {
        func at(_ context: DecodingError.Context) -> String {
            let path = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".")
            return path.isEmpty ? "" : " at \(path)"
        }
        switch error {
        case DecodingError.keyNotFound(let key, let context):
            return "the key '\(key.stringValue)' is missing\(at(context))"
        case DecodingError.typeMismatch(let type, let context):
            return "expected \(type)\(at(context)): \(context.debugDescription)"
        case DecodingError.valueNotFound(let type, let context):
            return "expected \(type) but found null\(at(context))"
        case DecodingError.dataCorrupted(let context):
            let underlying = context.underlyingError.map { " (\(reason($0)))" } ?? ""
            return "the data is corrupt\(at(context)): \(context.debugDescription)\(underlying)"
        default:
            if let text = (error as? any LocalizedError)?.errorDescription { return text }
            if let debug = (error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String { return debug }
            return String(describing: error)
        }
    }
}
