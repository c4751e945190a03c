import Dispatch
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

// A save is durable when its one manifest commit is: that commit holds the version's bytes.
// The files are staged before it and put in place after it (Writes+Commit.swift) with no flush
// of their own: one `syncfs` makes them durable later (a second after the first unflushed
// write, or when the store is released). Until then an intent says which files a power cut
// may have left behind: one *settle period* per process (``WriteIntent/after``), written by
// its first commit after a settle and naming every object changed since, so that no other
// commit writes a row for it; a commit that changes an object's codec adds one of its own.
// An open after a power cut puts back each such file that the cut left missing, empty, torn
// or older, from the manifest's bytes.

/// This process's intents that no `syncfs` has made durable yet.
struct DurabilityState: Sendable {
    /// Intents whose files the next `syncfs` makes durable: commits' own, and ended periods.
    var committed: [Int64] = []
    /// The settle period this process's commits are in, if one began since the last settle.
    var period: Int64?
    /// Periods that must outlive this process, each with how many of its commits need it: a
    /// commit in it could not put its files in place, nor put them back (the next open does).
    var kept: [Int64: Int] = [:]
    /// Staged names that hold the files saves replaced (``ArchiveStore/retire(_:in:for:staging:)``),
    /// removed by the next settle, after its `syncfs`.
    var retired: [String] = []
    /// Whether a settle is scheduled.
    var scheduled = false
}

extension ArchiveStore {
    /// How long committed intents wait for the `syncfs` that lets them go. It bounds the work
    /// an open after a power cut does, not what a power cut can lose.
    static let settleDelay = DispatchTimeInterval.seconds(1)

    /// The directory in `.archive-sync` where a save's files are written before its commit:
    /// a power cut before the commit can leave one there only, where every open finds it.
    static let stagingDirectory = "staging"

    /// Opens `.archive-sync/staging` when it exists, and removes the files (and the new
    /// collections' directories, ``StagedCollection``) that writes of processes no longer
    /// running left in it (a cut or a kill before their commit, or before the rename after it).
    static func cleanStaging(root: Descriptor, path: String) throws -> Descriptor? {
        let relative = FileName.metadataDirectory.appendingComponent(stagingDirectory)
        let where_ = path.appendingComponent(relative)
        guard let staging = try FileSystem.openDirectoryIfPresent(relative, in: root, path: where_) else { return nil }
        for entry in try FileSystem.listDirectory(staging, path: where_) {
            let owner = Array(entry.name.utf8).withUnsafeBufferPointer { Self.tempFileOwner($0) }
            guard owner.map({ !$0.isRunning }) ?? true else { continue }
            let kind = entry.type == UInt8(DT_UNKNOWN) ? try FileSystem.status(entry.name, in: staging, path: where_)?.kind : nil
            if entry.type == UInt8(DT_DIR) || kind == .directory {
                // Its files were never the store's: they are put back from the manifest if committed.
                try FileSystem.removeDirectory(entry.name, in: staging, path: where_.appendingComponent(entry.name))
            } else {
                try FileSystem.removeFile(entry.name, in: staging, path: where_.appendingComponent(entry.name))
            }
        }
        return staging
    }

    /// `.archive-sync/staging`, made at the first write that needs it.
    func stagingDirectory() throws -> Descriptor {
        try staging.withLock { staging in
            if let staging { return staging }
            let relative = FileName.metadataDirectory.appendingComponent(Self.stagingDirectory)
            let where_ = path.appendingComponent(relative)
            try FileSystem.makeDirectory(relative, in: root, path: where_)
            let made = try FileSystem.openDirectory(relative, in: root, path: where_)
            staging = made
            return made
        }
    }

    /// After a write's commit: remembers its own intent, if it has one, and schedules one
    /// settle for every commit within the next second.
    func noteCommitted(_ intent: Int64?) {
        let schedule = durability.withLock { state -> Bool in
            if let intent { state.committed.append(intent) }
            defer { state.scheduled = true }
            return !state.scheduled
        }
        guard schedule else { return }
        DispatchQueue.global(qos: .utility).asyncAfter(deadline: .now() + Self.settleDelay) { [weak self] in
            // A settle that fails fails no save (each is durable in the manifest already): its
            // intents stay for the next settle or the next open.
            try? self?.settleCommittedWrites()
        }
    }

    /// Puts the staged `temp` in place over `file` in `directory` by swapping the two
    /// (``FileSystem/exchange(_:in:with:in:path:)``): the replaced file, left at `temp`, is
    /// removed by the next settle. Freeing its inode is most of what a rename over a file
    /// costs on ext4, and this takes it off the writer's time (and the writer lock's).
    /// - Returns: false, having changed nothing, when there is no file at `file` to swap
    ///   with (the caller renames instead).
    func retire(_ file: String, in directory: Descriptor, for temp: String, staging: Descriptor) throws -> Bool {
        let where_ = directory.path.appendingComponent(file)
        guard try FileSystem.exchange(temp, in: staging, with: file, in: directory, path: where_) else { return false }
        // Never a directory another program made at the name: a rename would refuse it, and
        // the settle would have to remove it. Swapped back, the caller's rename fails as ever.
        guard let swapped = FileSystem.identity(of: temp, in: staging) else {
            let code = errno
            throw SystemCallError(call: "statx", path: where_, errno: code)
        }
        if swapped.kind == .directory {
            _ = try FileSystem.exchange(temp, in: staging, with: file, in: directory, path: where_)
            return false
        }
        durability.withLock { $0.retired.append(temp) }
        return true
    }

    /// Keeps `period` for a commit that could not put its files in place.
    func keepPeriod(_ period: Int64) {
        durability.withLock { $0.kept[period, default: 0] += 1 }
    }

    /// A period kept for a commit whose files are now put back: once no other commit needs
    /// it, the next settle drops it.
    func releasePeriod(_ period: Int64) {
        durability.withLock { state in
            guard let count = state.kept[period] else { return }
            state.kept[period] = count > 1 ? count - 1 : nil
            if count == 1, state.period != period { state.committed.append(period) }
        }
        noteCommitted(nil)
    }

    /// Makes this process's committed renames and unlinks durable with one `syncfs`, then
    /// drops their intents, in a commit that needs no flush: an intent a power cut brings back
    /// is checked by the next open, which finds its files as the manifest says.
    func settleCommittedWrites() throws {
        let pending = durability.withLock { !$0.committed.isEmpty || $0.period != nil || !$0.retired.isEmpty }
        guard pending else {
            durability.withLock { $0.scheduled = false }
            return
        }
        // The period ends excluding every writer, so every commit in it has put its files in
        // place, and every commit after it begins another.
        let (ids, retired) = try manifest.excludingWriters {
            durability.withLock { state -> ([Int64], [String]) in
                if let period = state.period, state.kept[period] == nil { state.committed.append(period) }
                state.period = nil
                defer {
                    state.committed = []
                    state.retired = []
                    state.scheduled = false
                }
                return (state.committed, state.retired)
            }
        }
        guard !ids.isEmpty || !retired.isEmpty else { return }
        do {
            try FileSystem.syncFileSystem(root, path: path)
            if !ids.isEmpty { try manifest.write(flushed: false) { tx in try tx.removeSettled(ids, owner: .current) } }
        } catch {
            durability.withLock {
                $0.committed += ids
                $0.retired += retired
            }
            throw ArchiveError.wrap(error)
        }
        // Only once the exchanges are on disk in both directories: before, a cut could keep
        // a removal and lose the object's side of its exchange, leaving its name on an inode
        // the removal freed.
        if !retired.isEmpty, let staging = staging.withLock({ $0 }) {
            // One that cannot be removed now is tried again by the next settle.
            let left = retired.filter { (try? removeStaged($0, in: staging)) == nil }
            if !left.isEmpty { durability.withLock { $0.retired += left } }
        }
        // The checkpoint that writes' commits no longer make (SQLiteConnection.openWAL). One
        // that fails loses nothing: the pages stay in the WAL for the next.
        try? manifest.checkpoint()
        // A killed process's period keeps every writer's history from being pruned
        // (``ManifestTransaction/unsettledAfter()``) until an open, or this, finishes it. A
        // failure here is the next open's to retry, not this settle's.
        if (try? manifest.read({ try $0.intents() }))?.contains(where: { $0.after != nil && !$0.owner.isRunning }) == true {
            try? recoverInterruptedWrites()
        }
    }

    /// Finishes a settle period whose owner did not settle it (``WriteIntent/after``): every
    /// object changed after it is checked as ``restoreCommitted(_:intent:)`` checks a
    /// committed intent's, then the period goes.
    func restoreSettlePeriod(_ intent: WriteIntent, after: Int) throws {
        let changed = try manifest.read { try $0.writtenObjects(after: after) }
        let entries = changed.map { WriteIntent.Entry(collection: $0.collection, key: $0.key, file: "", committed: true) }
        try restoreCommitted(entries, intent: (intent.id, intent.owner))
    }

    /// Finishes a committed intent whose owner did not settle it (it died, or a power cut came
    /// first): each object's file is made to hold what the manifest recorded. A file the cut
    /// left missing, empty, torn (each 512-byte sector the recorded bytes or zeros) or holding
    /// an earlier version is put back from the manifest's bytes, and one an unlink kept is
    /// removed; a file holding anything else is another program's edit, recorded as a scan
    /// would. Then one `syncfs`, and the intent goes (nil: a commit's own entries, whose
    /// settle period stays).
    func restoreCommitted(_ entries: [WriteIntent.Entry], intent: (id: Int64, owner: ProcessIdentity)?) throws {
        try manifest.write(flushed: false) { tx in
            for entry in entries {
                let id = ObjectID(unchecked: entry.collection, key: entry.key)
                // A damaged row's file is never followed (as in reconcile).
                guard let row = try tx.object(id), FileName.problem(withFile: row.file, ofKey: id.key) == nil else { continue }
                let name = FileName.encode(entry.collection)
                var directory = try FileSystem.openDirectoryIfPresent(name, in: root, path: path.appendingComponent(name))
                if directory == nil, !row.isDeleted {
                    try FileSystem.makeDirectory(name, in: root, path: path.appendingComponent(name))
                    directory = try FileSystem.openDirectory(name, in: root, path: path.appendingComponent(name))
                }
                guard let directory else { continue }
                var earlier = Set(try tx.history(id, unsettled: true).filter { $0.version < row.version }.compactMap(\.hash))
                if let previous = entry.previous { earlier.insert(previous) }
                if let replaced = entry.replaced, ExactName(replaced) != ExactName(row.file) {
                    let where_ = directory.path.appendingComponent(replaced)
                    if let kept = try FileSystem.readFile(name.appendingComponent(replaced), in: root, path: where_),
                        kept.isEmpty || earlier.contains(ContentHash(of: kept))
                    {
                        try FileSystem.removeFile(replaced, in: directory, path: where_)
                    }
                }
                let where_ = directory.path.appendingComponent(row.file)
                let onDisk = try FileSystem.readFile(name.appendingComponent(row.file), in: root, path: where_)
                if row.isDeleted {
                    if let onDisk, onDisk.isEmpty || earlier.contains(ContentHash(of: onDisk)) {
                        try FileSystem.removeFile(row.file, in: directory, path: where_)
                    } else {
                        try reconcileFile(row.file, of: id, in: directory, tx: tx)
                    }
                    continue
                }
                if onDisk.map(ContentHash.init(of:)) != row.hash, let content = try tx.content(of: id, version: row.version),
                    Self.lostToACut(onDisk, recorded: content, earlier: earlier)
                {
                    let temp = tempName()
                    let staging = try stagingDirectory()
                    let stamp = try FileSystem.writeNewFile(temp, in: staging, data: content, sync: false, path: where_)
                    try FileSystem.rename(temp, in: staging, to: row.file, in: directory, path: where_)
                    try tx.updateStamp(id, stamp)
                } else {
                    try reconcileFile(row.file, of: id, in: directory, tx: tx)
                }
            }
            // Even where nothing was put back: a dead owner's renames may still be only in
            // the page cache (it was killed, and no power cut came).
            try FileSystem.syncFileSystem(root, path: path)
            // Only if still its owner's: another process may have finished it, and its id since
            // gone to a new intent.
            if let intent { try tx.removeSettled([intent.id], owner: intent.owner) }
        }
    }

    /// Whether `onDisk` (nil: no file) is what a power cut leaves of a file written with
    /// `recorded` and never flushed, or of a rename or unlink it lost: nothing, an empty file,
    /// the bytes of an earlier version, or `recorded` with some 512-byte sectors lost (read as
    /// zeros) or cut short.
    static func lostToACut(_ onDisk: Data?, recorded: Data, earlier: Set<ContentHash>) -> Bool {
        guard let onDisk else { return true }
        if onDisk.isEmpty || earlier.contains(ContentHash(of: onDisk)) { return true }
        guard onDisk.count <= recorded.count else { return false }
        let kept = [UInt8](onDisk)
        let whole = [UInt8](recorded)
        var start = 0
        while start < kept.count {
            let end = min(start + 512, kept.count)
            let sector = kept[start..<end]
            guard sector.elementsEqual(whole[start..<end]) || sector.allSatisfy({ $0 == 0 }) else { return false }
            start = end
        }
        return true
    }
}
