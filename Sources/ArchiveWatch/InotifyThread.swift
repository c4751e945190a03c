import ArchiveLocking
import ArchiveStore
import CInotifyTools
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// What the inotify thread tells a store's watcher.
enum WatchHint: Sendable {
    /// Something changed at this path, relative to the store: a collection directory
    /// (`Person`) or a file in one (`Person/person1.json`).
    case path(String)
    /// A reader created this probe in the store's root (see `WatchProbe`): every hint about
    /// what happened before it has been given already.
    case probe(String)
    /// The kernel's event queue overflowed: events were lost, so everything must be scanned.
    case overflow
    /// Watching cannot go on.
    case failed(WatchError)
}

/// Receives a store's hints, on the inotify thread: it must return at once.
protocol WatchHintSink: AnyObject, Sendable {
    func post(_ hint: WatchHint)
}

/// The process's one libinotifytools instance, and the one thread that makes every call into
/// it: the library keeps all its state in globals and is not thread-safe.
///
/// Its `next_event` can wait only in whole seconds and cannot be woken, so the thread waits
/// one second at a time and runs queued commands (watch a store, stop watching one) between
/// waits: a command may wait up to a second. Events themselves are handed on the moment the
/// kernel delivers them.
final class InotifyThread: Sendable {
    static let shared = InotifyThread()

    private enum Command {
        case add(store: ObjectIdentifier, root: String, sink: any WatchHintSink, reply: Reply)
        case remove(store: ObjectIdentifier)
    }

    /// A command's answer, for the thread that waits for it.
    private final class Reply: Sendable {
        private let result = TracedMutex<Result<Void, WatchError>?>(nil)
        private let done = DispatchSemaphore(value: 0)

        func send(_ value: Result<Void, WatchError>) {
            result.withLock { $0 = value }
            done.signal()
        }

        func wait() -> Result<Void, WatchError> {
            done.wait()
            return result.withLock { $0! }
        }
    }

    private let commands = TracedMutex<(started: Bool, queue: [Command])>((false, []))

    /// Watches a store's root and every collection directory in it; from now on, hints for the
    /// store go to `sink`. Returns once the watches exist.
    func add(store: ObjectIdentifier, root: String, sink: any WatchHintSink) throws(WatchError) {
        let reply = Reply()
        send(.add(store: store, root: root, sink: sink, reply: reply))
        try reply.wait().get()
    }

    /// Stops watching a store (within a second).
    func remove(store: ObjectIdentifier) {
        send(.remove(store: store))
    }

    private func send(_ command: Command) {
        let start = commands.withLock { state in
            state.queue.append(command)
            defer { state.started = true }
            return !state.started
        }
        if start {
            let thread = Thread { [self] in run() }
            thread.name = "archive-sync inotify"
            thread.start()
        }
    }

    // MARK: The thread

    /// Everything below runs on the inotify thread only.
    private func run() {
        let watches = Watches()
        var initialized = false
        while true {
            for command in commands.withLock({ state in
                defer { state.queue = [] }; return state.queue
            }) {
                switch command {
                case .add(let store, let root, let sink, let reply):
                    // Tried again on each request: a failure (the instance limit) may pass.
                    initialized = initialized || inotifytools_initialize() != 0
                    guard initialized else {
                        reply.send(.failure(.inotifyUnavailable(reason: String(cString: strerror(inotifytools_error())))))
                        continue
                    }
                    reply.send(watches.add(store: store, root: root, sink: sink))
                case .remove(let store):
                    watches.remove(store: store)
                }
            }
            guard initialized, let event = inotifytools_next_event(1) else {
                if !initialized { Thread.sleep(forTimeInterval: 1) }
                continue
            }
            // Copied before the next call, which reuses the library's buffer.
            watches.handle(wd: event.pointee.wd, mask: event.pointee.mask, name: String(cString: cinotify_event_name(event)))
        }
    }
}

/// The inotify thread's tables: which watch belongs to which store and directory.
private final class Watches {
    private struct Store {
        var root: String
        var sink: any WatchHintSink
        var rootWatch: Int32
        /// Collection directory name → its watch.
        var directories: [String: Int32] = [:]
    }

    private static let rootEvents = UInt32(IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)
    private static let collectionEvents = UInt32(IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_ONLYDIR | IN_DONT_FOLLOW)

    private var stores: [ObjectIdentifier: Store] = [:]
    /// Watch descriptor → its store and directory (nil for the root).
    private var owners: [Int32: (store: ObjectIdentifier, directory: String?)] = [:]

    func add(store id: ObjectIdentifier, root: String, sink: any WatchHintSink) -> Result<Void, WatchError> {
        remove(store: id)
        let rootWatch: Int32
        switch watch(root, events: Self.rootEvents) {
        case .success(let wd): rootWatch = wd
        case .failure(let error): return .failure(error)
        }
        stores[id] = Store(root: root, sink: sink, rootWatch: rootWatch)
        owners[rootWatch] = (id, nil)
        do {
            for name in try FileManager.default.contentsOfDirectory(atPath: root) where !name.hasPrefix(".") {
                if case .failure(let error) = watchDirectory(name, of: id), case .watchLimitReached = error {
                    remove(store: id)
                    return .failure(error)
                }
            }
        } catch {
            remove(store: id)
            return .failure(.storeRemoved(path: root))
        }
        return .success(())
    }

    /// Where a store's root is when it stops being watched.
    enum RootState { case present, deleted, moved }

    /// Stops watching a store. The kernel has dropped the watches of what was deleted, and
    /// removing them again would only fail (and the library would print that).
    func remove(store id: ObjectIdentifier, root state: RootState = .present) {
        guard let store = stores.removeValue(forKey: id) else { return }
        owners[store.rootWatch] = nil
        if state != .deleted { inotifytools_remove_watch_by_wd(store.rootWatch) }
        for (name, wd) in store.directories {
            owners[wd] = nil
            // A directory deleted since (its events not read yet) has no watch left to remove;
            // one moved away with the root still has.
            if state == .moved || (state == .present && FileSystem.entryKind(atPath: store.root.appendingComponent(name)) != nil) {
                inotifytools_remove_watch_by_wd(wd)
            }
        }
    }

    /// Watches one collection directory (a symlink or a file is not one, and is skipped).
    @discardableResult
    private func watchDirectory(_ name: String, of id: ObjectIdentifier) -> Result<Void, WatchError> {
        guard let store = stores[id] else { return .success(()) }
        switch watch(store.root.appendingComponent(name), events: Self.collectionEvents) {
        case .success(let wd):
            stores[id]!.directories[name] = wd
            owners[wd] = (id, name)
            return .success(())
        case .failure(let error):
            return .failure(error)
        }
    }

    private func watch(_ path: String, events: UInt32) -> Result<Int32, WatchError> {
        // The library files a directory under its path with a trailing slash, and keeps the
        // entry of a watch the kernel dropped (a deleted directory). A stale entry under this
        // name would keep the new watch out of its name table: rename it out of the way first.
        let name = path.hasSuffix("/") ? path : path + "/"
        let existing = inotifytools_wd_from_filename(name)
        if existing >= 0, owners[existing] == nil {
            inotifytools_replace_filename(name, "/\u{1}archive-sync-stale-watch/\(existing)/")
        }
        guard inotifytools_watch_file(path, Int32(bitPattern: events)) != 0 else {
            let code = inotifytools_error()
            switch code {
            case ENOSPC: return .failure(.watchLimitReached(path: path, limit: Self.watchLimit))
            case ENOENT, ENOTDIR, ELOOP: return .failure(.storeRemoved(path: path))
            default: return .failure(.inotifyUnavailable(reason: "watching \(path): \(String(cString: strerror(code)))"))
            }
        }
        return .success(inotifytools_wd_from_filename(name))
    }

    /// This user's inotify watch limit: `/proc/sys/user/max_inotify_watches` is the one that
    /// applies (in a user namespace too); the library reads the machine-wide setting.
    private static var watchLimit: Int {
        let text = try? String(contentsOfFile: "/proc/sys/user/max_inotify_watches", encoding: .utf8)
        return text.flatMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) } ?? Int(inotifytools_get_max_user_watches())
    }

    func handle(wd: Int32, mask: UInt32, name: String) {
        if mask & UInt32(IN_Q_OVERFLOW) != 0 {
            // Lost events may have created collection directories: watch any not watched yet,
            // then the full scan each store runs finds what landed in them.
            for (id, store) in stores {
                let names = (try? FileManager.default.contentsOfDirectory(atPath: store.root)) ?? []
                for name in names where !name.hasPrefix(".") && store.directories[name] == nil {
                    watchDirectory(name, of: id)
                }
                store.sink.post(.overflow)
            }
            return
        }
        guard let (id, directory) = owners[wd], let store = stores[id] else { return }
        guard let directory else {
            handleRoot(store, id, mask: mask, name: name)
            return
        }
        if mask & UInt32(IN_IGNORED) != 0 {
            // The directory is gone (the root reports it too) and the kernel dropped its watch.
            owners[wd] = nil
            if stores[id]?.directories[directory] == wd { stores[id]?.directories[directory] = nil }
            return
        }
        guard !name.isEmpty, !name.hasPrefix("."), mask & UInt32(IN_ISDIR) == 0 else { return }
        store.sink.post(.path(directory.appendingComponent(name)))
    }

    private func handleRoot(_ store: Store, _ id: ObjectIdentifier, mask: UInt32, name: String) {
        if mask & UInt32(IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED) != 0 {
            store.sink.post(.failed(.storeRemoved(path: store.root)))
            remove(store: id, root: mask & UInt32(IN_MOVE_SELF) != 0 ? .moved : .deleted)
            return
        }
        if name == ArchiveStore.metadataDirectoryName, mask & UInt32(IN_DELETE | IN_MOVED_FROM) != 0 {
            // The kernel holds back the root's own IN_DELETE_SELF while the store keeps the root
            // open; the manifest's directory going away is the sign that the store is gone, or,
            // with the root still there, that its manifest and history are.
            let rootPresent = FileSystem.entryKind(atPath: store.root, followingSymlink: true) != nil
            store.sink.post(.failed(rootPresent ? .metadataRemoved(path: store.root) : .storeRemoved(path: store.root)))
            remove(store: id, root: rootPresent ? .present : .deleted)
            return
        }
        if mask & UInt32(IN_CREATE) != 0, mask & UInt32(IN_ISDIR) == 0, WatchProbe.isProbe(name) {
            store.sink.post(.probe(name))
            return
        }
        guard !name.isEmpty, !name.hasPrefix("."), mask & UInt32(IN_ISDIR) != 0 else { return }
        if mask & UInt32(IN_DELETE | IN_MOVED_FROM) != 0, let wd = store.directories[name] {
            // A directory moved elsewhere keeps its watch: drop it, or its events would come
            // back under the old name.
            stores[id]!.directories[name] = nil
            owners[wd] = nil
            if mask & UInt32(IN_MOVED_FROM) != 0 { inotifytools_remove_watch_by_wd(wd) }
        }
        if mask & UInt32(IN_CREATE | IN_MOVED_TO) != 0,
            case .failure(let error) = watchDirectory(name, of: id), case .watchLimitReached = error
        {
            store.sink.post(.failed(error))
            return
        }
        // Files may have landed before the watch existed: the watcher scans the whole directory.
        store.sink.post(.path(name))
    }
}
