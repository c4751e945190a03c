import ArchiveLocking
import ArchiveStore
import CArchiveShims
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A store at the far end of a pipe: `archive-sync serve --stdio STORE`, started through ssh
/// (or any command that runs a program on another host and joins its stdin and stdout).
///
/// ```swift
/// let far = try RemoteReplica(
///     command: ["ssh", "backup.example.com", "archive-sync serve --stdio /srv/store"],
///     name: "backup.example.com:/srv/store")
/// let report = try Sync(a: LocalReplica(store), b: far, options: SyncOptions()).runNow()
/// ```
///
/// The initializer starts the command and does the handshake, so ``replica`` is known before
/// ``begin()``. Each method is one request and one reply. A far side that breaks the protocol,
/// fails, or goes away throws ``SyncError/remote(_:)`` with what it (or ssh) said.
package final class RemoteReplica: SyncReplica {
    package let name: String
    package let replica: ReplicaID
    /// The protocol version both sides speak.
    package let version: UInt32
    private let connection: TracedMutex<Connection>

    /// Starts `command` and does the handshake.
    ///
    /// - Parameters:
    ///   - command: the program and its arguments; the first word is looked up on `PATH`.
    ///   - name: how the store is named to the user, `host:path`.
    ///   - peer: the replica id of the store on this side, named in the handshake.
    ///   - versions: the protocol versions to offer (tests offer others).
    package init(command: [String], name: String, peer: ReplicaID? = nil, versions: ClosedRange<UInt32> = Wire.versions) throws {
        self.name = name
        let connection = try Connection(command: command)
        do {
            let hello = Wire.Request.hello(Wire.Hello(versions: versions, peer: peer))
            let reply = try Wire.HelloReply.decode(try connection.call(hello, name: name, beforeHandshake: true))
            version = try reply.agreedVersion(offered: versions, name: name)
            guard let store = reply.store else { throw WireError("the handshake reply names no store") }
            replica = store.replica
        } catch let error as WireError {
            connection.close()
            throw SyncError.remote("\(name): the far side sent a malformed handshake reply: \(error.description)")
        } catch {
            connection.close()
            throw error
        }
        self.connection = TracedMutex(connection)
    }

    deinit {
        connection.withLock { $0.close() }
    }

    /// Sends one request and decodes its reply with `decode`, turning a malformed reply into
    /// ``SyncError/remote(_:)`` and ending the session.
    private func call<T>(_ request: Wire.Request, _ decode: ([UInt8]) throws -> T) throws -> T {
        try connection.withLock { connection in
            let reply = try connection.call(request, name: name, beforeHandshake: false)
            do {
                return try decode(reply)
            } catch let error as WireError {
                connection.close()
                throw SyncError.remote("\(name): the far side replied with a malformed message: \(error.description)")
            }
        }
    }

    /// A reply that decodes but cannot be the answer to what was asked.
    private func malformed(_ what: String) -> SyncError {
        connection.withLock { $0.close() }
        return SyncError.remote("\(name): the far side replied with a malformed message: \(what)")
    }

    package func begin() throws { try call(.begin, Wire.Reply.empty) }

    /// Ends the session: the far side releases its store's lock and exits.
    package func end() {
        connection.withLock { connection in
            if !connection.isClosed { _ = try? connection.call(.end, name: name, beforeHandshake: false) }
            connection.close()
        }
    }

    package func makeCurrent() throws -> Bool { try call(.makeCurrent, Wire.Reply.flag) }
    package func changeSequence() throws -> Int { try call(.changeSequence) { try Wire.Reply.count($0, "a change sequence") } }
    package func liveObjectCount() throws -> Int { try call(.liveObjectCount) { try Wire.Reply.count($0, "an object count") } }
    package func checkpoint(for peer: ReplicaID) throws -> Int? { try call(.checkpoint(peer: peer), Wire.Reply.checkpoint) }

    package func setCheckpoint(for peer: ReplicaID, to sequence: Int) throws {
        try call(.setCheckpoint(peer: peer, sequence: sequence), Wire.Reply.empty)
    }

    package func sequenceAfterOwnWrites(since sequence: Int) throws -> Int {
        try call(.sequenceAfterOwnWrites(since: sequence)) { try Wire.Reply.count($0, "a change sequence") }
    }

    /// Pages of entries in id order, each id after the one before: a page out of order, or one
    /// cut short with nothing in it, would stall the walk of both manifests.
    package func entries(after id: ObjectID?, limit: Int) throws -> [ReplicaEntry] {
        var entries: [ReplicaEntry] = []
        var cursor = id
        while entries.count < limit {
            let want = min(limit - entries.count, Wire.maximumCount)
            let (page, cut) = try call(.entriesAfter(cursor, limit: want), Wire.Reply.page)
            try check(page, want: want, cut: cut)
            for entry in page {
                if let cursor, !(cursor < entry.id) { throw malformed("a page of the manifest is not in id order") }
                cursor = entry.id
            }
            entries += page
            if page.count < want && !cut { break }
        }
        return entries
    }

    /// Pages of entries in change order, each after the one before and none past `through`.
    package func entries(changedAfter after: Int, through: Int, limit: Int) throws -> [ReplicaEntry] {
        var entries: [ReplicaEntry] = []
        var after = after
        while entries.count < limit {
            let want = min(limit - entries.count, Wire.maximumCount)
            let (page, cut) = try call(.entriesChanged(after: after, through: through, limit: want), Wire.Reply.page)
            try check(page, want: want, cut: cut)
            for entry in page {
                guard entry.sequence > after, entry.sequence <= through else {
                    throw malformed("a page of changes is not in order after sequence \(after) and up to \(through)")
                }
                after = entry.sequence
            }
            entries += page
            if page.count < want && !cut { break }
        }
        return entries
    }

    private func check(_ page: [ReplicaEntry], want: Int, cut: Bool) throws {
        if page.count > want { throw malformed("\(page.count) entries came back where at most \(want) were asked for") }
        if cut && page.isEmpty { throw malformed("a page cut short holds no entries") }
    }

    package func entries(for ids: [ObjectID]) throws -> [ReplicaEntry?] {
        var entries: [ReplicaEntry?] = []
        entries.reserveCapacity(ids.count)
        for start in stride(from: 0, to: ids.count, by: 1_000) {
            let chunk = Array(ids[start..<min(start + 1_000, ids.count)])
            let page = try call(.entriesFor(chunk), Wire.Reply.entries)
            guard page.count == chunk.count else {
                throw SyncError.remote("\(name): the far side answered for \(page.count) of \(chunk.count) objects")
            }
            for (id, entry) in zip(chunk, page) where entry.map({ $0.id != id }) ?? false {
                throw malformed("the entry sent for \(id) names another object")
            }
            entries += page
        }
        return entries
    }

    /// Fetches contents in batches of at most ``Wire/batchBytes``, checking each object's
    /// bytes against the hash its entry names.
    package func contents(of entries: [ReplicaEntry]) throws -> [Data?] {
        if let large = entries.first(where: { !$0.isDeleted && $0.size > Wire.maximumObject }) {
            throw SyncError.remote("\(large.id) in \(name) is \(large.size) bytes, over \(Wire.describeObjectLimit)")
        }
        var result: [Data?] = []
        result.reserveCapacity(entries.count)
        for batch in batches(entries, size: { Wire.size(of: $0.id) + ($0.isDeleted ? 0 : $0.size) }) {
            let wanted = batch.map { Wire.Request.ContentRequest(id: $0.id, hash: $0.liveHash) }
            let page = try call(.contents(wanted), Wire.Reply.contents)
            guard page.count == batch.count else { throw SyncError.remote("\(name): the far side sent \(page.count) of \(batch.count) objects") }
            for (entry, data) in zip(batch, page) {
                if let data, ContentHash(of: data) != entry.hash {
                    connection.withLock { $0.close() }
                    throw SyncError.remote("\(name): the bytes received for \(entry.id) do not match their hash; nothing was written")
                }
                result.append(data)
            }
        }
        return result
    }

    /// Sends writes in batches; an object over ``Wire/maximumObject`` is not sent and comes
    /// back false, as one that changed since the plan does.
    package func apply(_ objects: [IncomingObject]) throws -> [Bool] {
        // The sync refuses objects over the limit before it writes; one here got past that on a
        // manifest that understates its size. It is not sent, and is left for the next sync.
        let fits = objects.map { ($0.content?.count ?? 0) <= Wire.maximumObject }
        let sent = zip(objects, fits).filter(\.1).map(\.0)
        var landed: [Bool] = []
        landed.reserveCapacity(sent.count)
        // A write's size counts its id and vector too: a page of objects with long keys or
        // vectors must not outgrow a frame.
        for batch in batches(sent, size: { ($0.content?.count ?? 0) + Wire.size(of: $0.id) + Wire.size(of: $0.version.vector) + 200 }) {
            let applied = try call(.apply(Array(batch)), Wire.Reply.applied)
            guard applied.count == batch.count else {
                throw SyncError.remote("\(name): the far side answered for \(applied.count) of \(batch.count) writes")
            }
            landed += applied
        }
        var next = landed.makeIterator()
        return fits.map { fit in fit ? next.next() ?? false : false }
    }

    package func mergeVectors(_ merges: [VectorMerge]) throws {
        for batch in batches(merges, size: { Wire.size(of: $0.id) + Wire.size(of: $0.vector) + 40 }) {
            try call(.mergeVectors(Array(batch)), Wire.Reply.empty)
        }
    }

    package func mergeBases(_ queries: [MergeBaseQuery]) throws -> [MergeBaseAnswer] {
        // A far side of protocol version 1 has no such request (it would end the session over
        // a frame of unknown kind): its history is not asked; the other side's may hold the base.
        guard version >= 2 else { return queries.map { _ in .none } }
        var answers: [MergeBaseAnswer] = []
        // A batch of 100 keeps most replies (vectors and a base's bytes each) well within a frame.
        for start in stride(from: 0, to: queries.count, by: 100) {
            let batch = Array(queries[start..<min(start + 100, queries.count)])
            let page = try call(.mergeBases(batch), Wire.Reply.mergeBases)
            guard page.count == batch.count else {
                throw SyncError.remote("\(name): the far side answered for \(page.count) of \(batch.count) objects")
            }
            answers += page
        }
        return answers
    }

    /// Splits `items` into runs of at most ``Wire/maximumCount`` items and, past the first
    /// item of a run, at most ``Wire/batchBytes`` bytes.
    private func batches<T>(_ items: [T], size: (T) -> Int) -> [ArraySlice<T>] {
        var result: [ArraySlice<T>] = []
        var start = 0
        var bytes = 0
        for (i, item) in items.enumerated() {
            let itemSize = size(item)
            if i > start && (bytes + itemSize > Wire.batchBytes || i - start >= Wire.maximumCount) {
                result.append(items[start..<i])
                start = i
                bytes = 0
            }
            bytes += itemSize
        }
        if start < items.count { result.append(items[start...]) }
        return result
    }
}

/// The transport: the child process and the frames on its stdin and stdout.
private final class Connection {
    private let process: ChildProcess
    private let channel: FrameChannel
    private let toChild: FileHandle
    private let fromChild: FileHandle
    private let stderr: StderrTail
    private(set) var isClosed = false

    init(command: [String]) throws {
        guard !command.isEmpty else { throw SyncError.remote("no command to reach the far side") }
        // Close-on-exec, so that no other child (of this process, or of the transport) holds an
        // end open; the child gets its ends as 0, 1 and 2 through dup2.
        let input = try Self.pipe()
        let output = try Self.pipe()
        let errors = try Self.pipe()
        defer {
            // The child's ends, now the child's alone: its exit closes them.
            Glibc.close(input.read)
            Glibc.close(output.write)
            Glibc.close(errors.write)
        }
        do {
            process = try ChildProcess(command, stdin: input.read, stdout: output.write, stderr: errors.write)
        } catch {
            for fd in [input.write, output.read, errors.read] { Glibc.close(fd) }
            throw error
        }
        toChild = FileHandle(fileDescriptor: input.write, closeOnDealloc: true)
        fromChild = FileHandle(fileDescriptor: output.read, closeOnDealloc: true)
        stderr = StderrTail(FileHandle(fileDescriptor: errors.read, closeOnDealloc: true))
        channel = FrameChannel(input: fromChild.fileDescriptor, output: toChild.fileDescriptor)
    }

    private static func pipe() throws -> (read: Int32, write: Int32) {
        var fds: [Int32] = [-1, -1]
        // Close-on-exec in the same call: a child that another thread starts between a pipe and
        // an fcntl would hold an end, and its reader would never see end-of-file when ssh dies.
        guard archive_pipe_cloexec(&fds) == 0 else { throw SyncError.remote("cannot make a pipe: \(String(cString: strerror(errno)))") }
        return (fds[0], fds[1])
    }

    /// One request and the payload of its `ok` reply.
    func call(_ request: Wire.Request, name: String, beforeHandshake: Bool) throws -> [UInt8] {
        guard !isClosed else { throw SyncError.remote("\(name): the connection to the far side is closed") }
        do {
            try channel.send(request.kind, request.encode())
            let (replyKind, reply) = try channel.receive()
            switch replyKind {
            case .ok:
                return reply
            case .failure:
                throw SyncError.remote("\(name): " + ((try? Wire.Reply.failure(reply)) ?? "a failure it could not describe"))
            default:
                throw WireError("the far side sent a request where a reply belongs")
            }
        } catch is ChannelClosed {
            close()
            throw SyncError.remote("\(name): \(closedMessage(beforeHandshake: beforeHandshake))")
        } catch let error as WireError {
            close()
            let said = stderr.text(waiting: 0.2)
            throw SyncError.remote("\(name): \(error.description)" + (said.isEmpty ? "" : "; it said: \(said)"))
        }
    }

    /// Why the far side went away, in its (or ssh's) words.
    private func closedMessage(beforeHandshake: Bool) -> String {
        let deadline = Date().addingTimeInterval(5)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        let said = stderr.text(waiting: 1)
        var message = beforeHandshake ? "the far side closed the connection before the handshake" : "the connection to the far side closed"
        switch process.exit {
        case .signal(let number)?: message += " (the transport was killed by signal \(number))"
        case .status(127)?: message += " (exit 127: is archive-sync installed there? --remote-cmd names it)"
        case .status(let status)? where status != 0: message += " (exit \(status))"
        default: break
        }
        return said.isEmpty ? message : message + ": " + said
    }

    /// Closes the pipes (the far side sees the end of its input) and waits briefly for the
    /// child; one that does not exit is terminated.
    func close() {
        guard !isClosed else { return }
        isClosed = true
        try? toChild.close()
        // The child's stderr ends when it (and anything it started) exits: a prompt signal,
        // where Foundation's own notice of the exit can lag by tens of milliseconds.
        var waited = 0
        while !stderr.waitForEnd(seconds: 0.005) && process.isRunning && waited < 1_000 { waited += 1 }
        if waited == 1_000 { process.terminate() }
        // Its stderr has ended: it is exiting, if it has not exited yet.
        for _ in 0..<1_000 where process.isRunning { usleep(1_000) }
        try? fromChild.close()
    }

    deinit {
        if !isClosed {
            try? toChild.close()
            process.terminate()
        }
    }
}

/// A child process started with `posix_spawnp` and reaped with `waitpid`. Not Foundation's
/// `Process`: ssh closes the descriptors it inherits, which Foundation takes for an exit, and
/// its one watching thread then blocks in `waitpid` until ssh ends, stalling the notice of
/// every other child's exit in the process (an app's, a test runner's).
private final class ChildProcess {
    enum Exit: Equatable {
        case status(Int32)
        case signal(Int32)
    }

    private let pid: pid_t
    /// How it ended; nil while it runs.
    private(set) var exit: Exit?

    init(_ command: [String], stdin: Int32, stdout: Int32, stderr: Int32) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, stdin, 0)
        posix_spawn_file_actions_adddup2(&actions, stdout, 1)
        posix_spawn_file_actions_adddup2(&actions, stderr, 2)
        let argv: [UnsafeMutablePointer<CChar>?] = command.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let result = posix_spawnp(&pid, command[0], &actions, nil, argv, Glibc.environ)
        guard result == 0 else {
            throw SyncError.remote("cannot start \(command.joined(separator: " ")): \(String(cString: strerror(result)))")
        }
        self.pid = pid
    }

    var isRunning: Bool {
        guard exit == nil else { return false }
        var status: Int32 = 0
        guard waitpid(pid, &status, WNOHANG) == pid else { return true }
        record(status)
        return false
    }

    private func record(_ status: Int32) {
        exit = status & 0x7F == 0 ? .status((status >> 8) & 0xFF) : .signal(status & 0x7F)
    }

    /// Stops it (SIGTERM, then SIGKILL after a second) and reaps it.
    func terminate() {
        guard isRunning else { return }
        kill(pid, SIGTERM)
        for _ in 0..<100 where isRunning { usleep(10_000) }
        guard isRunning else { return }
        kill(pid, SIGKILL)
        var status: Int32 = 0
        if waitpid(pid, &status, 0) == pid { record(status) }
    }

    deinit {
        // Reaped by now or soon: never left a zombie for the life of the process.
        if exit == nil {
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == 0 {
                kill(pid, SIGKILL)
                waitpid(pid, &status, 0)
            }
        }
    }
}

/// The last few kilobytes the child wrote to stderr, read on a thread of its own so the
/// child never blocks on a full pipe.
private final class StderrTail: Sendable {
    private let buffer = TracedMutex<[UInt8]>([])
    private let done = DispatchSemaphore(value: 0)
    private let finished = Atomic<Bool>(false)

    init(_ handle: FileHandle) {
        let thread = Thread { [self] in
            let fd = handle.fileDescriptor
            var chunk = [UInt8](repeating: 0, count: 4096)
            while true {
                let got = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress!, 4096) }
                if got < 0 && errno == EINTR { continue }
                if got <= 0 { break }
                buffer.withLock { buffer in
                    buffer += chunk[0..<got]
                    if buffer.count > 8_192 { buffer.removeFirst(buffer.count - 8_192) }
                }
            }
            try? handle.close()
            finished.store(true, ordering: .releasing)
            done.signal()
        }
        thread.start()
    }

    /// Waits up to `seconds` for the child's stderr to end; true when it has.
    func waitForEnd(seconds: Double) -> Bool {
        if finished.load(ordering: .acquiring) { return true }
        guard done.wait(timeout: .now() + seconds) == .success else { return false }
        done.signal()
        return true
    }

    /// What the child said, trimmed, on one line; waits up to `seconds` for it to finish.
    func text(waiting seconds: Double) -> String {
        if !finished.load(ordering: .acquiring), done.wait(timeout: .now() + seconds) == .success { done.signal() }
        let bytes = buffer.withLock { $0 }
        return String(decoding: bytes, as: UTF8.self).split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }.joined(separator: "; ")
    }
}
