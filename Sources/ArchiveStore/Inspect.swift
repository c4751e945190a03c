import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A store's summary, as `archive-sync status` prints it.
public struct StoreStatus: Sendable, Codable {
    public let path: String
    public let replica: ReplicaID
    /// Live objects (tombstones not counted).
    public let objects: Int
    /// Total size of live objects' files, in bytes.
    public let bytes: Int
    public let collections: Int
    /// The store-wide change sequence number: how many changes have been recorded.
    public let sequence: Int
    /// When a scan last finished, if one ever did.
    public let lastScan: Date?
    public let historyLimit: Int
    /// The watcher keeping the manifest current, if one runs (`archive-sync watch`).
    public let watcher: WatcherStatus?
}

/// One object as `archive-sync ls` lists it.
public struct ObjectSummary: Sendable, Codable {
    public let id: ObjectID
    public let version: Int
    public let size: Int
    public let modified: Date
    public let hash: ContentHash?
    public let file: String
}

/// One collection as `archive-sync ls` lists it.
public struct CollectionSummary: Sendable, Codable {
    public let name: String
    public let objects: Int
    public let bytes: Int
}

/// What ``ArchiveStore/verify()`` found.
public struct VerifyReport: Sendable, Codable {
    /// One mismatch between the manifest and the disk.
    public struct Problem: Sendable, Codable, Equatable {
        public enum Kind: String, Sendable, Codable {
            /// Content changed but the stamp did not: bit rot, or a tool that restored the mtime.
            case corrupt
            /// Content and stamp changed: an edit not yet recorded (run `scan`).
            case edited
            /// The manifest has the object; the disk does not.
            case missing
            /// A file on disk the manifest does not know (run `scan`).
            case untracked
            /// A kept history content whose bytes no longer match its hash.
            case corruptHistory
            /// The file could not be read.
            case unreadable
            /// The manifest's row names a file that no write of the store makes (a damaged
            /// manifest); it was not followed (run `scan`).
            case damaged
        }

        public let id: String
        public let kind: Kind
        public let detail: String
    }

    /// Objects whose content matched.
    public var verified = 0
    /// History contents whose hash matched.
    public var verifiedHistory = 0
    public var problems: [Problem] = []
    /// Entries that are not objects, which a scan leaves alone too (the same list, with the same
    /// reasons, as ``ScanReport/ignored``): not problems, since no scan would record them.
    public var ignored: [IgnoredEntry] = []
    public var isClean: Bool { problems.isEmpty }
}

extension ArchiveStore {
    /// The store's summary.
    ///
    /// When a watcher holds the lease, it is first asked, through its event queue, whether it
    /// has caught up (``WatcherStatus/caughtUp``); a stopped one costs half a second.
    public func status() throws -> StoreStatus {
        let caughtUp = try watcherHasCaughtUp()  // before the read: its answer may record changes
        return try withManifest { manifest in
            try manifest.read { tx in
                let totals = try tx.totals()
                return StoreStatus(
                    path: path, replica: replica, objects: totals.objects, bytes: totals.bytes,
                    collections: try tx.collections().count, sequence: try tx.currentSequence(),
                    lastScan: try tx.meta("last_scan").flatMap { Int64($0) }.map { Date(timeIntervalSince1970: Double($0) / 1e9) },
                    historyLimit: try tx.historyLimit(), watcher: try currentWatcher(tx, caughtUp: caughtUp))
            }
        }
    }

    /// Every live object in `collection`, in key order.
    public func objects(in collection: String) throws -> [ObjectSummary] {
        if let reason = ObjectID.problem(with: collection, isCollection: true) { throw ArchiveError.invalidCollection(collection, reason: reason) }
        return try withManifest { manifest in
            try manifest.read { tx in
                try tx.objects(in: collection).filter { !$0.isDeleted }.map {
                    ObjectSummary(
                        id: $0.id, version: $0.version, size: $0.size, modified: Date(timeIntervalSince1970: Double($0.modified) / 1e9),
                        hash: $0.hash, file: $0.file)
                }
            }
        }
    }

    /// Every collection with live objects, with counts and sizes.
    public func collections() throws -> [CollectionSummary] {
        try withManifest { manifest in
            try manifest.read { tx in
                var summaries: [ExactName: (Int, Int)] = [:]
                for record in try tx.objects(in: nil) where !record.isDeleted {
                    summaries[ExactName(record.id.collection), default: (0, 0)].0 += 1
                    summaries[ExactName(record.id.collection), default: (0, 0)].1 += record.size
                }
                return summaries.sorted { $0.key.string.utf8.lexicographicallyPrecedes($1.key.string.utf8) }.map {
                    CollectionSummary(name: $0.key.string, objects: $0.value.0, bytes: $0.value.1)
                }
            }
        }
    }

    /// Re-hashes every object and every kept history content and compares them with the
    /// manifest. Changes nothing; ``VerifyReport/isClean`` is false on any mismatch.
    ///
    /// - Parameter progress: called every thousand objects with how many are checked and how many there are.
    public func verify(progress: ((_ done: Int, _ total: Int) -> Void)? = nil) throws -> VerifyReport {
        do {
            var report = VerifyReport()
            let records = try manifest.read { try $0.objects(in: nil) }
            var byCollection: [ExactName: [ObjectRecord]] = [:]
            for record in records { byCollection[ExactName(record.id.collection), default: []].append(record) }
            // Every directory at the root, as a scan sees it: a collection the manifest does not
            // know yet is untracked as a whole.
            var listings: [ExactName: Listing] = [:]
            var collectionsByDirectory: [ExactName: String] = [:]
            for name in byCollection.keys { collectionsByDirectory[ExactName(FileName.encode(name.string))] = name.string }
            for entry in try rootEntries(ignored: &report.ignored) {
                guard
                    let listing = try listCollection(entry.name, type: entry.type, collections: collectionsByDirectory, removingStaleTemps: false)
                else { continue }
                report.ignored += listing.ignored
                guard let collection = listing.collection, listing.problem == nil else {
                    report.ignored.append(IgnoredEntry(path: listing.directoryName, reason: listing.problem ?? ""))
                    continue
                }
                listings[ExactName(collection)] = listing
                if byCollection[ExactName(collection)] == nil { byCollection[ExactName(collection)] = [] }
            }
            let total = records.count
            var checked = 0
            for (name, records) in byCollection.sorted(by: { $0.key.string.utf8.lexicographicallyPrecedes($1.key.string.utf8) }) {
                let collection = name.string
                let directoryName = FileName.encode(collection)
                let directory = try FileSystem.openDirectoryIfPresent(directoryName, in: root, path: path.appendingComponent(directoryName))
                for record in records {
                    checked += 1
                    if checked % 1000 == 0 { progress?(checked, total) }
                    guard !record.isDeleted else { continue }
                    let id = record.id.description
                    let relative = directoryName.appendingComponent(record.file)
                    if let problem = FileName.problem(withFile: record.file, ofKey: record.id.key) {
                        let error = ArchiveError.damagedRecord(record.id, file: record.file, problem: problem)
                        report.problems.append(.init(id: id, kind: .damaged, detail: error.description))
                        continue
                    }
                    guard let directory, let status = try FileSystem.status(record.file, in: directory, path: relative), status.kind == .regular
                    else {
                        report.problems.append(.init(id: id, kind: .missing, detail: "\(relative) is missing"))
                        continue
                    }
                    let data: Data?
                    do {
                        data = try FileSystem.readFile(record.file, in: directory, path: relative)
                    } catch {
                        report.problems.append(.init(id: id, kind: .unreadable, detail: String(describing: error)))
                        continue
                    }
                    guard let data else {
                        report.problems.append(.init(id: id, kind: .missing, detail: "\(relative) is missing"))
                        continue
                    }
                    if ContentHash(of: data) == record.hash {
                        report.verified += 1
                    } else if status.stamp == record.stamp {
                        report.problems.append(
                            .init(
                                id: id, kind: .corrupt,
                                detail: "\(relative) changed but its size, mtime and inode did not: bit rot, or a tool that restored the mtime"))
                    } else {
                        report.problems.append(
                            .init(id: id, kind: .edited, detail: "\(relative) was edited since the last scan; run `archive-sync scan` to record it"))
                    }
                }
                if let directory, let listing = listings[name] {
                    try reportUnrecorded(listing, records: records, in: directory, into: &report)
                }
            }
            try manifest.read { tx in
                try tx.forEachContent { id, version, hash, data in
                    if ContentHash(of: data) == hash {
                        report.verifiedHistory += 1
                    } else {
                        report.problems.append(
                            .init(
                                id: id.description, kind: .corruptHistory,
                                detail: "the kept contents of version \(version) no longer match their hash \(hash)"))
                    }
                }
            }
            return report
        } catch {
            throw ArchiveError.wrap(error)
        }
    }

    /// Reports what a scan would do with the files of a listed collection directory that the
    /// manifest does not hold as live objects: record them (`untracked`, a problem) or leave
    /// them alone (``VerifyReport/ignored``), by the rules a scan follows.
    private func reportUnrecorded(_ listing: Listing, records: [ObjectRecord], in directory: Descriptor, into report: inout VerifyReport) throws {
        let directoryName = listing.directoryName
        let statuses = try Self.statuses(of: listing.files, in: directory)
        var named = [Bool](repeating: false, count: listing.files.count)
        var rowsHoldFiles = false
        func untracked(_ file: String, key: String) {
            report.problems.append(
                .init(
                    id: "\(listing.collection ?? "")/\(key)", kind: .untracked,
                    detail: "\(directoryName)/\(file) is not in the manifest; run `archive-sync scan` to record it"))
        }
        for record in records {
            guard let index = record.file.utf8.withContiguousStorageIfAvailable({ listing.files.index(of: $0) }) ?? nil else { continue }
            named[index] = true
            guard let status = statuses[index] else { continue }
            if !record.isDeleted { rowsHoldFiles = true }
            if status.kind != .regular {
                report.ignored.append(IgnoredEntry(path: directoryName.appendingComponent(record.file), reason: Self.reason(notRegular: status.kind)))
            } else if record.isDeleted {
                untracked(record.file, key: record.id.key)  // a deleted object's file is back
            }
        }
        guard named.indices.contains(where: { !named[$0] && statuses[$0] != nil }) else { return }
        let (objects, ignored) = try manifest.read { tx in
            try classifyUnnamed(listing, statuses: statuses, named: named, rowsHoldFiles: rowsHoldFiles, tx: tx)
        }
        for (file, key) in objects { untracked(file, key: key) }
        report.ignored += ignored
    }
}
