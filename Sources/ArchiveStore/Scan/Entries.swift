#if canImport(Glibc)
    import Glibc
#endif

// What a scan makes of each entry of a store's directory: an object, or an entry left alone
// and why. Scan and verify both classify entries here, so that verify calls untracked exactly
// what a scan would record, and ignored exactly what a scan leaves alone.

/// One directory at the root of a store that may be a collection.
struct RootEntry {
    var name: String
    /// `DT_DIR`, `DT_LNK` and so on, as the directory listing says.
    var type: UInt8
}

/// One directory at the root of the store, listed by a scan or verify.
struct Listing: Sendable {
    var directoryName: String
    /// The collection the directory holds, when it is one.
    var collection: String?
    /// Why it is not a collection directory (a symlink, a file, a name the store does not
    /// write), or nil.
    var problem: String?
    var files = NameList()
    /// Entries left alone whatever the manifest says: dot files, temp files, names that are not UTF-8.
    var ignored: [IgnoredEntry] = []
    var removedTempFiles = 0
    /// The directory's stamp, taken before it was listed, and the time just before it.
    var stamp: DirectoryStamp?
    var stampedAt: Int64 = 0
    /// True when the stamp is the one a scan recorded: the directory was not listed.
    var isUnchanged = false
}

/// What a scan does with a file that no manifest row names.
enum EntryVerdict: Equatable {
    /// It records the file as the object `key`.
    case object(key: String)
    /// It leaves the file alone, for this reason.
    case ignored(reason: String)
}

extension ArchiveStore {
    /// The entries at the root of the store that may be collection directories; every other
    /// entry but the store's own metadata is added to `ignored`.
    func rootEntries(ignored: inout [IgnoredEntry]) throws -> [RootEntry] {
        var entries: [RootEntry] = []
        var left: [IgnoredEntry] = []
        try FileSystem.forEachEntry(of: root, path: path) { name, type in
            if name.elementsEqual(FileName.metadataDirectory.utf8) { return }
            if let reason = Self.reasonToIgnore(name) {
                left.append(IgnoredEntry(path: FileName.readable(name), reason: reason))
            } else {
                entries.append(RootEntry(name: String(decoding: name, as: UTF8.self), type: type))
            }
        }
        ignored += left
        return entries
    }

    /// Lists one directory at the root, or returns nil when it does not exist. A directory
    /// whose stamp is still `recorded` is not listed (``Listing/isUnchanged``).
    ///
    /// - Parameters:
    ///   - collections: the collections the manifest knows, by directory name (a long name is
    ///     hashed on disk: only the manifest knows its collection).
    ///   - removingStaleTemps: true to remove temp files of dead processes (a scan), false to
    ///     report them (verify, which changes nothing).
    func listCollection(
        _ name: String, type: UInt8 = UInt8(DT_UNKNOWN), collections: [ExactName: String], unlessUnchangedSince recorded: DirectoryStamp? = nil,
        removingStaleTemps: Bool
    ) throws -> Listing? {
        var listing = Listing(directoryName: name)
        let directory: Descriptor
        do {
            directory = try FileSystem.openDirectory(name, in: root, path: path.appendingComponent(name))
        } catch let error as SystemCallError where error.errno == ENOENT {
            return nil
        } catch let error as SystemCallError where [ELOOP, ENOTDIR].contains(error.errno) {
            listing.problem = error.errno == ELOOP || type == DT_LNK ? "a symlink, not followed" : "a file outside any collection"
            return listing
        }
        listing.collection = collections[ExactName(name)] ?? FileName.decode(name[...])
        guard listing.collection != nil else {
            listing.problem = "not a name the store writes"
            return listing
        }
        listing.stampedAt = Manifest.now()
        listing.stamp = try FileSystem.directoryStamp(directory, path: path.appendingComponent(name))
        if let recorded, listing.stamp == recorded {
            listing.isUnchanged = true
            return listing
        }
        try FileSystem.forEachEntry(of: directory, path: path.appendingComponent(name)) { file, _ in
            guard let reason = Self.reasonToIgnore(file) else {
                listing.files.append(file)
                return
            }
            let relative = name.appendingComponent(FileName.readable(file))
            let temp = Self.tempFileOwner(file)
            if temp?.isRunning == false {
                if removingStaleTemps {
                    if try FileSystem.removeFile(String(decoding: file, as: UTF8.self), in: directory, path: path.appendingComponent(relative)) {
                        listing.removedTempFiles += 1
                    }
                    return
                }
                listing.ignored.append(IgnoredEntry(path: relative, reason: "a temp file left by a process that is gone; a scan removes it"))
            } else if let temp {
                listing.ignored.append(IgnoredEntry(path: relative, reason: "a temp file of a write in progress (process \(temp.pid))"))
            } else {
                listing.ignored.append(IgnoredEntry(path: relative, reason: reason))
            }
        }
        listing.files.buildIndex()
        return listing
    }

    /// Why an entry is left alone on its name alone, or nil: a dot file (temp files among
    /// them) is never an object, and a name that is not UTF-8 cannot be a key's file.
    static func reasonToIgnore(_ name: UnsafeBufferPointer<UInt8>) -> String? {
        if FileName.isReserved(name) { return "a dot file, left alone" }
        if String(validating: name, as: UTF8.self) == nil { return "its name is not valid UTF-8, so it cannot be an object's file" }
        return nil
    }

    /// The process that wrote a temp file (`.archive-sync-tmp.PID.START.N`), or nil when the
    /// name is not a temp file's.
    static func tempFileOwner(_ name: UnsafeBufferPointer<UInt8>) -> ProcessIdentity? {
        guard name.starts(with: FileName.tempPrefix.utf8) else { return nil }
        let parts = String(decoding: name.dropFirst(FileName.tempPrefix.utf8.count), as: UTF8.self).split(separator: ".")
        guard parts.count == 3, let pid = Int32(parts[0]), let start = Int64(parts[1]) else { return nil }
        return ProcessIdentity(pid: pid, startTime: start)
    }

    /// What a scan does with a file of a collection directory that no manifest row names.
    ///
    /// - Parameters:
    ///   - kind: what the file is (only a regular file can be an object).
    ///   - holder: the present file that already holds a key, if any: `a.json` beside the
    ///     `a.plist` that holds `a` is not another version of `a`, or each scan would flip
    ///     between the two.
    static func verdict(
        onUnnamed file: String, kind: FileStatus.Kind, in directoryName: String, holder: (_ key: String) throws -> String?
    ) rethrows -> EntryVerdict {
        guard kind == .regular else { return .ignored(reason: reason(notRegular: kind)) }
        guard let key = FileName.decode(FileName.split(file).stem), ObjectID.problem(with: key, isCollection: false) == nil else {
            return .ignored(reason: "a name the store cannot map to a key")
        }
        if let holder = try holder(key) { return .ignored(reason: "\(directoryName)/\(holder) already holds the key '\(key)'") }
        return .object(key: key)
    }

    /// Classifies the files of a listed collection directory that no row names (`named` is
    /// false), by ``verdict(onUnnamed:kind:in:holder:)``: the objects a scan records, and the
    /// entries it leaves alone. A key goes to the first file that claims it, in listing order,
    /// unless a row's present file holds it.
    ///
    /// - Parameters:
    ///   - statuses: each file's status, nil when it is gone since the listing.
    ///   - rowsHoldFiles: false when no live row's file is in the listing, so that no row can
    ///     hold a key (a first scan of many new files asks the manifest nothing).
    func classifyUnnamed(_ listing: Listing, statuses: [FileStatus?], named: [Bool], rowsHoldFiles: Bool, tx: ManifestTransaction) throws -> (
        objects: [(file: String, key: String)], ignored: [IgnoredEntry]
    ) {
        let files = listing.files
        let directoryName = listing.directoryName
        let collection = listing.collection ?? ""
        var objects: [(file: String, key: String)] = []
        var ignored: [IgnoredEntry] = []
        var holders: [ExactName: String] = [:]
        for index in files.indices where !named[index] {
            guard let status = statuses[index] else { continue }  // gone since the listing
            let file = files.name(index)
            let verdict = try Self.verdict(onUnnamed: file, kind: status.kind, in: directoryName) { key in
                if let holder = holders[ExactName(key)] { return holder }
                guard rowsHoldFiles, let row = try tx.object(ObjectID(unchecked: collection, key: key)), !row.isDeleted,
                    let held = row.file.utf8.withContiguousStorageIfAvailable({ files.index(of: $0) }) ?? nil, statuses[held] != nil
                else { return nil }
                return row.file
            }
            switch verdict {
            case .object(let key):
                holders[ExactName(key)] = file
                objects.append((file, key))
            case .ignored(let reason):
                ignored.append(IgnoredEntry(path: directoryName.appendingComponent(file), reason: reason))
            }
        }
        return (objects, ignored)
    }

    static func reason(notRegular kind: FileStatus.Kind) -> String {
        kind == .symlink ? "a symlink, not followed" : kind == .directory ? "a directory inside a collection" : "not a regular file"
    }

    /// Stats each of `files` in `directory` (nil where there is none), on every core: the
    /// bulk of an unchanged scan.
    static func statuses(of files: NameList, in directory: Descriptor) throws -> [FileStatus?] {
        try parallelMap(files.count) { try status(files, $0, in: directory) }
    }

    /// Stats the file at `index` of `files` in `directory`; nil when there is none.
    static func status(_ files: NameList, _ index: Int, in directory: Descriptor) throws -> FileStatus? {
        try files.withName(index) { name in
            try name.withMemoryRebound(to: CChar.self) {  // NUL-terminated in the list
                try FileSystem.status($0.baseAddress!, in: directory, path: directory.path.appendingComponent(files.name(index)))
            }
        }
    }
}
