import ArchiveLocking
import CSQLite
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A recovery of interrupted writes that could not finish: the disk was too full to record
/// what those writes had left. The store stays open for reading (its manifest as it was
/// before those writes); every write first tries the recovery again, and fails with
/// ``ArchiveError/recoveryPending(_:)`` until it completes. The next open tries again too.
public struct PendingRecovery: Sendable, Equatable, CustomStringConvertible {
    /// The store's directory.
    public let store: String
    /// How many interrupted writes wait (each a save, a delete, or a batch or sync page of them).
    public let writes: Int
    /// How many objects they name (0 when their record cannot be read: a scan then finds them).
    public let objects: Int
    /// What recovery waits for, such as "free space on the file system of /srv/store".
    public let waitingFor: String
    /// The failure that stopped it, as the system or SQLite reported it.
    public let cause: String

    public var description: String {
        "recovery of \(what) is waiting for \(waitingFor) (\(cause)); reads show the store as it was before, and writes wait until the recovery completes, which the next open or write tries again"
    }

    /// "an interrupted write of 63 objects"
    var what: String {
        let plural = writes == 1 ? "an interrupted write" : "\(writes) interrupted writes"
        return objects == 0 ? plural : "\(plural) of \(objects) object\(objects == 1 ? "" : "s")"
    }
}

/// Where a store's recovery stands, shared by its threads.
struct RecoveryState: Sendable {
    /// Set while a recovery cannot complete.
    var pending: PendingRecovery?
    /// This process's own writes whose undo failed on a full disk: their intents (whose owner
    /// is alive) are recovered with those of dead processes.
    var stuck: Set<Int64> = []
}

extension ArchiveStore {
    /// The recovery that could not finish when the store was opened (or since), and what it
    /// waits for; nil when there is none. While it is set, reads show the store as it was
    /// before the interrupted writes, and writes fail with ``ArchiveError/recoveryPending(_:)``.
    public var pendingRecovery: PendingRecovery? {
        recoveryState.withLock { $0.pending }
    }

    /// Before a write: tries a pending recovery again (space may have been freed since), and
    /// throws ``ArchiveError/recoveryPending(_:)`` while it still cannot complete, so that no
    /// write lands on top of writes the manifest has not recorded.
    func requireRecovered() throws {
        // Cleared while it runs: the recovery's own scan writes too.
        guard
            let previous = recoveryState.withLock({ state -> PendingRecovery? in
                defer { state.pending = nil }
                return state.pending
            })
        else { return }
        do {
            try recoverInterruptedWrites()
        } catch {
            recoveryState.withLock { if $0.pending == nil { $0.pending = previous } }
            throw error
        }
        if let pending = pendingRecovery { throw ArchiveError.recoveryPending(pending) }
    }

    /// Records that recovery waits on a full disk: for these writes, found by a recovery, or
    /// for one more of this process's own (`stuck`), whose undo failed.
    func recoveryWaits(writes: Int, objects: Int, cause: any Error, stuck: Int64? = nil) {
        recoveryState.withLock { state in
            let earlier = stuck == nil ? nil : state.pending
            state.pending = PendingRecovery(
                store: path, writes: writes + (earlier?.writes ?? 0), objects: objects + (earlier?.objects ?? 0),
                waitingFor: "free space on the file system of \(path)", cause: ArchiveError.wrap(cause).description)
            if let stuck { state.stuck.insert(stuck) }
        }
    }

    /// True when `error` is the disk or the user's quota being full: SQLite's `SQLITE_FULL`,
    /// or `ENOSPC` or `EDQUOT` from a system call.
    static func isOutOfSpace(_ error: any Error) -> Bool {
        switch error {
        case let error as SQLiteError: return error.primaryCode == SQLITE_FULL
        case let error as SystemCallError: return error.errno == ENOSPC || error.errno == EDQUOT
        case ArchiveError.system(let error): return isOutOfSpace(error)
        case ArchiveError.manifest(let error): return isOutOfSpace(error)
        default: return false
        }
    }
}

extension ArchiveStore {
    /// What a scan records for a live row that is damaged (its file is not one the key gives,
    /// such as `../x`), and the entry that reports it: the key's own file, in a codec or with
    /// no extension, when one is in the directory (the row then names it again); else nil, and
    /// the row is recorded as deleted without its name being looked at.
    func damagedRowsFile(
        _ row: (file: String, key: String, problem: String), collection: String, directoryName: String, in directory: Descriptor
    ) throws -> (file: String?, report: IgnoredEntry) {
        let stem = FileName.encode(row.key)
        let found = try ([""] + ArchiveCodec.allCases.map(\.fileExtension)).map { FileName.join(stem: stem, extension: $0) }.first {
            try FileSystem.status($0, in: directory, path: directory.path.appendingComponent($0))?.kind == .regular
        }
        let outcome = found.map { "recorded \(directoryName)/\($0) as its file" } ?? "recorded as deleted"
        let id = ObjectID(unchecked: collection, key: row.key)
        return (
            found,
            IgnoredEntry(
                path: directoryName.appendingComponent(row.file),
                reason: "the manifest's row for \(id) named this as its file, which \(row.problem): not followed; \(outcome)")
        )
    }
}
