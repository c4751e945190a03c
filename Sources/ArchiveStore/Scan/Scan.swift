import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

extension ArchiveStore {
    /// Records what other programs added, changed or removed since the manifest last looked.
    ///
    /// Like git's index, a scan compares each file's stamp (size, mtime in nanoseconds, inode)
    /// with the manifest and reads only files whose stamp changed; a file whose content hash
    /// still matches is not a new version. It also removes temp files left by dead processes.
    ///
    /// Like git's untracked cache, it lists a collection's directory only when the directory
    /// changed since a scan last listed it: a directory's mtime and ctime change whenever an
    /// entry is added, removed or renamed. A stamp is trusted only once it is older than the
    /// racy window, and only for a directory whose every entry was an object.
    ///
    /// - Parameter progress: called now and then with the changed files read so far and how
    ///   many there are, while they are read and recorded.
    public func scan(progress: ((_ done: Int, _ total: Int) -> Void)? = nil) throws -> ScanReport {
        try scan(progress: progress, until: { false })
    }

    /// ``scan(progress:)``, stopped early when `shouldStop` returns true: it is asked before
    /// each collection directory and each chunk of files recorded (a fraction of a second
    /// apart), and then the scan throws `CancellationError`. What it recorded stays recorded
    /// (each chunk is a transaction); the next scan finds the rest.
    package func scan(progress: ((_ done: Int, _ total: Int) -> Void)? = nil, until shouldStop: () -> Bool) throws -> ScanReport {
        try refuseIfReadOnly()  // it records, and removes dead processes' temp files
        try requireRecovered()
        do {
            var report = ScanReport()
            var candidates: [Candidate] = []
            // One directory at a time, its rows streamed from the manifest: a scan holds no copy
            // of the manifest and no listing but the current directory's.
            let known = try manifest.read { try $0.collections() }
            // Long collection names are hashed on disk: the manifest knows their real names.
            var collectionsByDirectory: [ExactName: String] = [:]
            for collection in known { collectionsByDirectory[ExactName(FileName.encode(collection))] = collection }
            var unseen = Set(known.map(ExactName.init))
            let stamps = try manifest.read { try $0.directoryStamps() }
            var listed: [(name: String, stamp: DirectoryStamp?, stampedAt: Int64)] = []
            var present: Set<ExactName> = []
            for entry in try rootEntries(ignored: &report.ignored) {
                if shouldStop() { throw CancellationError() }
                present.insert(ExactName(entry.name))
                let recorded = stamps[ExactName(entry.name)]
                guard
                    let listing = try listCollection(
                        entry.name, type: entry.type, collections: collectionsByDirectory, unlessUnchangedSince: recorded, removingStaleTemps: true)
                else { continue }  // gone since listed
                report.removedTempFiles += listing.removedTempFiles
                report.ignored += listing.ignored
                guard let collection = listing.collection, listing.problem == nil else {
                    report.ignored.append(IgnoredEntry(path: listing.directoryName, reason: listing.problem ?? ""))
                    continue
                }
                unseen.remove(ExactName(collection))
                if listing.isUnchanged {
                    try examineUnchanged(listing.directoryName, of: collection, into: &candidates, report: &report)
                } else {
                    try examine(listing, of: collection, into: &candidates, report: &report)
                    report.listedDirectories += 1
                    listed.append((listing.directoryName, listing.stamp, listing.stampedAt))
                }
            }
            // Collections whose directory is gone: every live object in them was deleted.
            for collection in unseen {
                try addLiveObjects(of: collection.string, directoryName: FileName.encode(collection.string), to: &candidates)
            }
            try record(candidates, into: &report, progress: progress, until: shouldStop)
            // Directories holding an ignored entry (or ignored themselves) are listed every time.
            let unclean = Set(report.ignored.map { ExactName(String($0.path.prefix { $0 != "/" })) })
            try manifest.write { tx in
                try tx.setMeta("last_scan", String(Manifest.now()))
                for (name, stamp, stampedAt) in listed {
                    // Trusted later only if settled when taken (an entry added within the clock's
                    // granularity of it might not move it) and if every entry became an object.
                    let settled = stamp.map { stampedAt - max($0.mtimeNanoseconds, $0.ctimeNanoseconds) >= Manifest.racyWindow } ?? false
                    try tx.setDirectoryStamp(name, settled && !unclean.contains(ExactName(name)) ? stamp : nil)
                }
                // A directory removed since: its stamp would never match again, so it goes.
                for name in stamps.keys where !present.contains(name) { try tx.setDirectoryStamp(name.string, nil) }
            }
            return report
        } catch let error as CancellationError {
            throw error
        } catch {
            throw ArchiveError.wrap(error)
        }
    }

    /// Records what changed in some entries of the store only, exactly as ``scan(progress:)``
    /// would: each path is a collection directory (`Person`) or a file in one
    /// (`Person/person1.json`), relative to the store and named as on disk. A watcher, which
    /// knows what changed, scans only that. Stops early, as ``scan(progress:until:)`` does,
    /// when `shouldStop` returns true.
    package func scan(paths: some Sequence<String>, until shouldStop: () -> Bool = { false }) throws -> ScanReport {
        try requireRecovered()
        do {
            var report = ScanReport()
            var candidates: [Candidate] = []
            // By directory: nil to scan the whole directory, or the files to look at.
            var wanted: [ExactName: Set<ExactName>?] = [:]
            for path in paths {
                let parts = path.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
                let directoryName = ExactName(String(parts[0]))
                guard !directoryName.string.isEmpty, !FileName.isReserved(directoryName.string) else { continue }
                if parts.count == 1 || parts[1].isEmpty {
                    wanted[directoryName] = .some(nil)
                } else if !parts[1].contains("/"), !FileName.isReserved(String(parts[1])), wanted[directoryName] != .some(nil) {
                    wanted[directoryName, default: []]!.insert(ExactName(String(parts[1])))
                }
            }
            for (directoryName, files) in wanted {
                guard let collection = try collection(inDirectory: directoryName.string) else {
                    report.ignored.append(IgnoredEntry(path: directoryName.string, reason: "not a name the store writes"))
                    continue
                }
                // A file whose object lost it may leave its key to a sibling (`a.plist` beside a
                // removed `a.json`): only the whole directory tells, as a full scan would.
                if let files, try examine(files.map(\.string), in: directoryName.string, of: collection, into: &candidates, report: &report) {
                    continue
                }
                guard
                    let listing = try listCollection(directoryName.string, collections: [directoryName: collection], removingStaleTemps: true)
                else {
                    try addLiveObjects(of: collection, directoryName: directoryName.string, to: &candidates)
                    continue
                }
                report.removedTempFiles += listing.removedTempFiles
                report.ignored += listing.ignored
                if let problem = listing.problem {
                    // A symlink or a file where the collection was: its objects are gone.
                    report.ignored.append(IgnoredEntry(path: listing.directoryName, reason: problem))
                    try addLiveObjects(of: collection, directoryName: directoryName.string, to: &candidates)
                    continue
                }
                try examine(listing, of: collection, into: &candidates, report: &report)
            }
            try record(candidates, into: &report, progress: nil, until: shouldStop)
            return report
        } catch let error as CancellationError {
            throw error
        } catch {
            throw ArchiveError.wrap(error)
        }
    }

    /// One file a scan reads and records (or, with no key, only reports).
    private struct Candidate {
        var collection: String
        var directoryName: String
        var file: String
        var key: String?
    }

    /// The collection a directory at the root holds: its decoded name, or for a long (hashed)
    /// name, the collection the manifest knows by it.
    private func collection(inDirectory name: String) throws -> String? {
        if let decoded = FileName.decode(name[...]) { return decoded }
        guard name.contains(FileName.longMarker) else { return nil }
        return try manifest.read { try $0.collections() }.first { ExactName(FileName.encode($0)) == ExactName(name) }
    }

    /// Compares one listed collection directory with its rows, streamed from the manifest: the
    /// files to read, and the rows whose file is gone, become candidates.
    private func examine(_ listing: Listing, of collection: String, into candidates: inout [Candidate], report: inout ScanReport) throws {
        let directoryName = listing.directoryName
        let files = listing.files
        let directory = try FileSystem.openDirectory(directoryName, in: root, path: path.appendingComponent(directoryName))
        let statuses = try Self.statuses(of: files, in: directory)
        func add(_ file: String, key: String) {
            candidates.append(Candidate(collection: collection, directoryName: directoryName, file: file, key: key))
        }
        func ignore(_ file: String, _ reason: String) {
            report.ignored.append(IgnoredEntry(path: directoryName.appendingComponent(file), reason: reason))
        }

        // Every row against the file it names (nil when gone, or gone since the listing).
        var named = [Bool](repeating: false, count: files.count)
        var liveAndPresent = 0
        var damaged: [(file: String, key: String, problem: String)] = []
        try manifest.read { tx in
            try tx.forEachStamp(in: collection) { row in
                let index = row.withFile { files.index(of: $0) }
                if let index { named[index] = true }
                let isDeleted = row.isDeleted
                guard let status = index.flatMap({ statuses[$0] }) else {
                    guard !isDeleted else { return }
                    // Its file is gone (a delete), or it names none that can be here.
                    if let problem = FileName.problem(withFile: row.file, ofKey: row.key) {
                        damaged.append((row.file, row.key, problem))
                    } else {
                        add(row.file, key: row.key)
                    }
                    return
                }
                if !isDeleted { liveAndPresent += 1 }
                if status.kind != .regular {
                    ignore(row.file, Self.reason(notRegular: status.kind))
                    if !isDeleted { add(row.file, key: row.key) }
                } else if isDeleted || row.racy || row.stamp != status.stamp {
                    add(row.file, key: row.key)
                } else {
                    report.unchanged += 1
                }
            }
        }

        for row in damaged {
            let candidate = try repairCandidate(row, collection: collection, directoryName: directoryName, in: directory, report: &report)
            if let index = candidate.file.utf8.withContiguousStorageIfAvailable({ files.index(of: $0) }) ?? nil { named[index] = true }
            candidates.append(candidate)
        }

        // Files no row names are new objects, unless the store cannot name them or another
        // file holds their key.
        guard named.indices.contains(where: { !named[$0] && statuses[$0] != nil }) else { return }
        let (objects, ignored) = try manifest.read { tx in
            try classifyUnnamed(listing, statuses: statuses, named: named, rowsHoldFiles: liveAndPresent > 0, tx: tx)
        }
        report.ignored += ignored
        for (file, key) in objects { add(file, key: key) }
    }

    /// Adds every live object of a collection whose directory is gone, to be recorded as deleted.
    private func addLiveObjects(of collection: String, directoryName: String, to candidates: inout [Candidate]) throws {
        try manifest.read { tx in
            try tx.forEachStamp(in: collection) { row in
                if !row.isDeleted { candidates.append(Candidate(collection: collection, directoryName: directoryName, file: row.file, key: row.key)) }
            }
        }
    }

    /// Compares some files of one collection directory with their rows, as ``examine(_:of:rows:into:report:)``
    /// does for a whole listing.
    /// - Returns: false, having added nothing, when a live object's file is gone from a directory
    ///   that still exists: then only a look at the whole directory is right.
    private func examine(
        _ files: [String], in directoryName: String, of collection: String, into candidates: inout [Candidate], report: inout ScanReport
    ) throws -> Bool {
        var found: [Candidate] = []
        var ignored: [IgnoredEntry] = []
        defer {
            candidates += found
            report.ignored += ignored
        }
        let directoryPath = path.appendingComponent(directoryName)
        guard let directory = try FileSystem.openDirectoryIfPresent(directoryName, in: root, path: directoryPath) else {
            // The whole directory is gone: each file's row (if any) records the delete.
            for file in files {
                if let row = try manifest.read({ try $0.object(holding: file, in: collection) }), !row.isDeleted {
                    found.append(Candidate(collection: collection, directoryName: directoryName, file: file, key: row.id.key))
                }
            }
            return true
        }
        for file in files {
            let relative = directoryName.appendingComponent(file)
            let (row, keyRow) = try manifest.read { tx -> (ObjectRecord?, ObjectRecord?) in
                let row = try tx.object(holding: file, in: collection)
                let key = row == nil ? FileName.decode(FileName.split(file).stem) : nil
                return (row, try key.flatMap { try tx.object(ObjectID(unchecked: collection, key: $0)) })
            }
            let status = try FileSystem.status(file, in: directory, path: directoryPath.appendingComponent(file))
            if let row {
                if status == nil, !row.isDeleted {
                    found = []
                    ignored = []
                    return false
                }
                found.append(Candidate(collection: collection, directoryName: directoryName, file: file, key: row.id.key))
                continue
            }
            guard let status else { continue }
            // The key's file is another one (`a.plist` for `a.json`): while it exists, it holds the key.
            let verdict = try Self.verdict(onUnnamed: file, kind: status.kind, in: directoryName) { _ in
                guard let keyRow, !keyRow.isDeleted,
                    try FileSystem.status(keyRow.file, in: directory, path: directoryPath.appendingComponent(keyRow.file)) != nil
                else { return nil }
                return keyRow.file
            }
            switch verdict {
            case .ignored(let reason):
                ignored.append(IgnoredEntry(path: relative, reason: reason))
            case .object(let key):
                // A key row whose file is gone: its delete is recorded with this file's creation.
                if let keyRow, !keyRow.isDeleted {
                    found.append(Candidate(collection: collection, directoryName: directoryName, file: keyRow.file, key: key))
                }
                found.append(Candidate(collection: collection, directoryName: directoryName, file: file, key: key))
            }
        }
        return true
    }

    /// Reads and records the candidates, in chunks so that other writers are not locked out
    /// for the whole scan.
    private func record(
        _ candidates: [Candidate], into report: inout ScanReport, progress: ((_ done: Int, _ total: Int) -> Void)?, until shouldStop: () -> Bool
    ) throws {
        var index = 0
        while index < candidates.count {
            if shouldStop() { throw CancellationError() }
            let chunk = candidates[index..<min(index + 512, candidates.count)]
            index += chunk.count
            let (changes, touched, unreadable) = try manifest.write { tx in
                var changes: [StoreChange] = []
                var touched = 0
                var unreadable: [IgnoredEntry] = []
                for candidate in chunk {
                    guard let key = candidate.key else { continue }
                    let id = ObjectID(unchecked: candidate.collection, key: key)
                    let directory = try FileSystem.openDirectoryIfPresent(
                        candidate.directoryName, in: root, path: path.appendingComponent(candidate.directoryName))
                    guard let directory else {
                        if let change = try tx.recordDelete(of: tx.object(id), origin: .external) { changes.append(change) }
                        continue
                    }
                    do {
                        if let change = try reconcileFile(candidate.file, of: id, in: directory, tx: tx) {
                            changes.append(change)
                        } else {
                            touched += 1
                        }
                    } catch let error as SystemCallError {
                        // One file that cannot be read (permissions, an I/O error) is reported and
                        // left as the manifest has it; it never stops the others being recorded.
                        unreadable.append(
                            IgnoredEntry(path: candidate.directoryName.appendingComponent(candidate.file), reason: "unreadable: \(error)"))
                    }
                }
                return (changes, touched, unreadable)
            }
            progress?(index, candidates.count)
            report.changes += changes
            report.touched += touched
            report.ignored += unreadable
        }
    }

    /// Compares the live rows of a collection with their files, in a directory that has had
    /// no entry added, removed or renamed since a scan listed it and found every entry to be
    /// an object: no other file can be there, so each row's file is looked at by name, and
    /// the directory is not listed. (A tombstone's file coming back would have changed the
    /// directory.)
    private func examineUnchanged(_ directoryName: String, of collection: String, into candidates: inout [Candidate], report: inout ScanReport)
        throws
    {
        // A few bytes per object: names in one buffer, and each stamp (one that cannot match
        // when the row has none or is racy, so that its file is read), a chunk at a time.
        let unmatchable = FileStamp(size: -1, mtimeNanoseconds: 0, inode: 0)
        let directory = try FileSystem.openDirectory(directoryName, in: root, path: path.appendingComponent(directoryName))
        let looks = UnchangedLooks(in: directory)
        var files = NameList()
        var stamps: [FileStamp] = []
        var start = 0
        func handOver(last: Bool) {
            looks.look(files, stamps, start: start, last: last)
            start += stamps.count
            files = NameList()
            stamps = []
        }
        // Chunks handed over while rows are still read; a failed read waits for them (no stat
        // outlives the scan) before it throws.
        do {
            try manifest.read { tx in
                try tx.forEachStamp(in: collection) { row in
                    guard !row.isDeleted else { return }
                    row.withFile { files.append($0) }
                    stamps.append(row.racy ? unmatchable : row.stamp ?? unmatchable)
                    if stamps.count == UnchangedLooks.chunk { handOver(last: false) }
                }
            }
        } catch {
            _ = try? looks.results()
            throw error
        }
        handOver(last: true)
        let (unchanged, found) = try looks.results()
        report.unchanged += unchanged
        guard !found.isEmpty else { return }
        // The few that changed: their keys (a long file name is hashed, so ask the manifest).
        try manifest.read { tx in
            for (file, look) in found {
                // No row: it went meanwhile.
                guard let row = try tx.object(holding: file, in: collection) ?? tx.object(named: file, in: collection) else { continue }
                if let problem = FileName.problem(withFile: file, ofKey: row.id.key) {
                    candidates.append(
                        try repairCandidate(
                            (file, row.id.key, problem), collection: collection, directoryName: directoryName, in: directory, report: &report))
                    continue
                }
                if case .notRegular(let kind) = look {
                    report.ignored.append(IgnoredEntry(path: directoryName.appendingComponent(file), reason: Self.reason(notRegular: kind)))
                }
                candidates.append(Candidate(collection: collection, directoryName: directoryName, file: file, key: row.id.key))
            }
        }
    }

    /// The candidate for a damaged live row, which is reported (see ``damagedRowsFile(_:collection:directoryName:in:)``).
    private func repairCandidate(
        _ row: (file: String, key: String, problem: String), collection: String, directoryName: String, in directory: Descriptor,
        report: inout ScanReport
    ) throws -> Candidate {
        let (found, entry) = try damagedRowsFile(row, collection: collection, directoryName: directoryName, in: directory)
        report.ignored.append(entry)
        return Candidate(collection: collection, directoryName: directoryName, file: found ?? row.file, key: row.key)
    }
}
