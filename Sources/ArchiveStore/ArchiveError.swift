/// Everything the store reports as a failure. Each case names what was wrong and, where it
/// helps, what to do next; ``description`` is one sentence fit for a user.
public enum ArchiveError: ExitStatusError, Sendable, Equatable {
    /// A key was refused; nothing was read or written.
    case invalidKey(String, reason: String)
    /// A collection name was refused; nothing was read or written.
    case invalidCollection(String, reason: String)
    /// A `Collection/key` id could not be parsed.
    case invalidID(String, reason: String)
    /// The directory is not a store, or cannot be used as one.
    case notAStore(path: String, reason: String)
    /// The object's bytes do not decode as the requested type.
    case undecodable(ObjectID, type: String, reason: String)
    /// The object's file extension names no codec this store knows.
    case unknownCodec(ObjectID, fileExtension: String)
    /// Encoding the model failed.
    case unencodable(ObjectID, type: String, reason: String)
    /// The object was written by a newer schema than the type declares.
    case newerSchema(ObjectID, stored: Int, supported: Int)
    /// The type's migration from an older schema failed; the file was left as it is.
    case migrationFailed(ObjectID, from: Int, reason: String)
    /// No such object, or no such version of it.
    case notFound(ObjectID, version: Int?)
    /// The version existed but retention has since dropped its contents.
    case versionNotKept(ObjectID, version: Int, limit: Int)
    /// Input from outside (a command-line value, a file to put) was refused.
    case invalidInput(String)
    /// A symlink was found where the store expects a file or directory; it was not followed.
    case symlinkRefused(path: String)
    /// A system call failed.
    case system(SystemCallError)
    /// The manifest database reported an error; SQLite's code is kept.
    case manifest(SQLiteError)
    /// Another process held the manifest's lock for longer than the busy timeout; try again later.
    case manifestBusy(SQLiteError)
    /// A failure from a layer below that none of the other cases describes. Not bad input.
    case unexpected(String)
    /// Another watcher holds the store's watch lease (one watcher per store).
    case alreadyWatched(path: String, pid: Int32?)
    /// Another process holds what this call needs, such as the store's sync lock; try again later.
    case busy(String)
    /// A FIFO, device or socket was found where the store expects a regular file; it was not read.
    case notRegularFile(path: String, kind: String)
    /// The manifest's row for an object names a file that no write of the store makes (a
    /// damaged or hand-edited manifest): it was not followed, and nothing was changed. The
    /// store's other objects are unaffected; a scan records the object's file again.
    case damagedRecord(ObjectID, file: String, problem: String)
    /// A write was refused because an interrupted write could not yet be recovered (see
    /// ``ArchiveStore/pendingRecovery``); nothing was changed.
    case recoveryPending(PendingRecovery)
    /// The store's manifest is missing, empty or damaged, so the store was not opened (and
    /// nothing was changed): `archive-sync repair` rebuilds it from the object files.
    case damagedManifest(store: String, problem: String)
    /// A new store's directory could not be made, or made durable in its parent (a full
    /// disk, a failing one); the system's error is kept.
    case storeNotCreated(path: String, cause: SystemCallError)
    /// The store can be read but not written (a read-only file system, no write permission);
    /// the write was refused before anything changed.
    case readOnly(path: String, reason: String)

    public var description: String {
        switch self {
        case .invalidKey(let key, let reason):
            return "invalid key \(quoted(key)): \(reason)"
        case .invalidCollection(let name, let reason):
            return "invalid collection \(quoted(name)): \(reason)"
        case .invalidID(let text, let reason):
            return "invalid id \(quoted(text)): \(reason)"
        case .notAStore(let path, let reason):
            return "\(path) is not a usable store: \(reason)"
        case .undecodable(let id, let type, let reason):
            return "\(id) cannot be loaded as \(type): \(reason)"
        case .unknownCodec(let id, let ext):
            let shown = ext.isEmpty ? "no extension" : "extension '.\(ext)'"
            return "\(id) has \(shown), which names no known codec (json, plist)"
        case .unencodable(let id, let type, let reason):
            return "\(id) cannot be saved as \(type): \(reason)"
        case .newerSchema(let id, let stored, let supported):
            return "\(id) was written with schema version \(stored), newer than the \(supported) this program knows; update the program"
        case .migrationFailed(let id, let from, let reason):
            return "\(id) could not be migrated from schema version \(from) and was left untouched: \(reason)"
        case .notFound(let id, let version):
            if let version { return "\(id) has no version \(version)" }
            return "\(id) does not exist"
        case .versionNotKept(let id, let version, let limit):
            return "version \(version) of \(id) is no longer kept (history keeps the last \(limit) versions)"
        case .invalidInput(let message):
            return message
        case .symlinkRefused(let path):
            return "\(path) is a symlink; the store does not follow symlinks"
        case .system(let error):
            return error.description
        case .manifest(let error):
            return "manifest error\(error.store.map { " in \($0)" } ?? ""): \(error)"
        case .manifestBusy(let error):
            return "another process has held the store's manifest locked for too long, so nothing was done; try again (\(error))"
        case .unexpected(let message):
            return message
        case .alreadyWatched(let path, let pid):
            let holder = pid.map { "process \($0)" } ?? "another process"
            return "\(path) is already watched by \(holder); a store has one watcher at a time (stop that one first, or use its change stream)"
        case .busy(let message):
            return message
        case .notRegularFile(let path, let kind):
            return "\(path) is \(kind), not a regular file; the store reads only regular files"
        case .damagedRecord(let id, let file, let problem):
            return
                "the manifest's row for \(id) is damaged: it names \(quoted(file)) as its file, which \(problem); it was not followed and nothing was changed (`archive-sync scan` records the object's file again)"
        case .recoveryPending(let pending):
            return
                "nothing was written: the recovery of \(pending.what) must complete first, and it is waiting for \(pending.waitingFor) (\(pending.cause))"
        case .damagedManifest(let store, let problem):
            return
                "\(store) is not a usable store: its manifest (\(FileName.metadataDirectory)/manifest.sqlite) \(problem); run `archive-sync repair \(store)` to rebuild it from the object files (its history cannot be recovered)"
        case .storeNotCreated(let path, let cause):
            return "the store \(path) could not be created: \(cause)"
        case .readOnly(let path, let reason):
            return "\(path) is read-only (\(reason)): it can be read (ls, get, history, status, verify) but not changed"
        }
    }

    /// True when the failure lies in what the caller passed in, not in the store or the system.
    public var isBadInput: Bool {
        switch self {
        case .invalidKey, .invalidCollection, .invalidID, .invalidInput, .notAStore, .damagedManifest, .notFound, .versionNotKept,
            .unknownCodec, .undecodable, .unencodable:
            return true
        default:
            return false
        }
    }

    /// The exit status a command ends with: 2 for bad input, 3 when the store is busy, 1 otherwise.
    public var exitStatus: Int32 {
        switch self {
        case .busy, .alreadyWatched, .manifestBusy: return ExitStatus.busy
        default: return isBadInput ? ExitStatus.badInput : ExitStatus.failure
        }
    }

    private func quoted(_ text: String) -> String {
        let shown = text.count > 80 ? String(text.prefix(80)) + "…" : text
        return "'" + shown.unicodeScalars.map { $0.properties.generalCategory == .control ? $0.escaped(asASCII: true) : String($0) }.joined() + "'"
    }
}

extension ArchiveError {
    /// Wraps errors from the layers below into ``ArchiveError``.
    static func wrap(_ error: any Error) -> ArchiveError {
        switch error {
        case let error as ArchiveError: return error
        case let error as SystemCallError:
            if error.errno == ELOOP { return .symlinkRefused(path: error.path) }
            return .system(error)
        case let error as SQLiteError: return error.isBusy ? .manifestBusy(error) : .manifest(error)
        default: return .unexpected(String(describing: error))
        }
    }
}

#if canImport(Glibc)
    import Glibc
#endif
