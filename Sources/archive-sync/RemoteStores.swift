import ArchiveStore
import ArchiveSync
import ArgumentParser
import Foundation
import Synchronization

/// How `diff` and `sync` reach a store on another host.
struct RemoteOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "The command that runs a program on the far host, split on whitespace and followed by the host (default: ssh).",
            valueName: "command"))
    var rsh = "ssh"

    @Option(help: ArgumentHelp("The archive-sync program on the far host (default: archive-sync on its PATH).", valueName: "path"))
    var remoteCmd = "archive-sync"
}

/// One side of a sync as the user named it: a directory here, or `[user@]host:path` there.
enum StoreLocation: Equatable {
    case local(String)
    case remote(host: String, path: String)

    /// rsync's rule: remote when a ':' comes before any '/'. `[::1]:path` names an IPv6 host.
    init(_ text: String) {
        if text.hasPrefix("["), let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") {
            let host = String(text[text.index(after: text.startIndex)..<close])
            let path = String(text[text.index(close, offsetBy: 2)...])
            self = .remote(host: host, path: path.isEmpty ? "." : path)
            return
        }
        guard let colon = text.firstIndex(of: ":"), text.firstIndex(of: "/").map({ colon < $0 }) ?? true, colon != text.startIndex else {
            self = .local(text)
            return
        }
        let path = String(text[text.index(after: colon)...])
        self = .remote(host: String(text[..<colon]), path: path.isEmpty ? "." : path)
    }
}

extension StorePairArguments {
    /// Opens both sides: a store in a directory, or `serve --stdio` started on the far host.
    /// A local directory that is not a store is refused unless `create` (so is a remote one).
    func replicas(create: Bool, remote: RemoteOptions) throws -> (any SyncReplica, any SyncReplica) {
        let locations = [StoreLocation(a), StoreLocation(b)]
        guard locations.contains(where: { if case .remote = $0 { true } else { false } }) else {
            let (storeA, storeB) = try open(create: create)
            return (LocalReplica(storeA), LocalReplica(storeB))
        }
        // The local side first: a wrong local path fails before anything is started.
        var local: LocalReplica?
        for location in locations {
            if case .local(let path) = location { local = LocalReplica(try openLocal(path, create: create)) }
        }
        // Connect to the far side (both at once, if both are far) while this side is made
        // current: ssh's set-up and the local scan overlap.
        let peer = local?.replica
        var connecting: [Int: InBackground<RemoteReplica>] = [:]
        for (index, (location, name)) in zip(locations, [a, b]).enumerated() {
            guard case .remote(let host, let path) = location else { continue }
            var command = remote.rsh.split(whereSeparator: \.isWhitespace).map(String.init)
            command.append(host)
            command.append("\(remote.remoteCmd) serve --stdio \(create ? "--create " : "")-- \(shellQuoted(path))")
            connecting[index] = InBackground { [command] in try RemoteReplica(command: command, name: name, peer: peer) }
        }
        let scanned = local.map { local in Result { try local.makeCurrent() } }
        let connected = try connecting.mapValues { try $0.value() }
        var result: [any SyncReplica] = []
        for index in 0..<2 {
            if let far = connected[index] {
                result.append(far)
            } else if let local, let scanned {
                result.append(MadeCurrentReplica(local, scanned: try scanned.get()))
            }
        }
        return (result[0], result[1])
    }

    private func openLocal(_ path: String, create: Bool) throws -> ArchiveStore {
        do {
            return try ArchiveStore(directory: path, options: .init(create: false))
        } catch ArchiveError.notAStore(_, _) where create {
            return try ArchiveStore(directory: path, options: .init(create: true))
        } catch ArchiveError.notAStore(let path, let reason) {
            throw ArchiveError.notAStore(
                path: path,
                reason:
                    "\(reason); a store's marker missing can mean an unmounted disk, so nothing was synced (use --force to make it a store and sync into it)"
            )
        }
    }
}

/// `text` in single quotes for the far host's shell, which ssh hands the command to.
func shellQuoted(_ text: String) -> String {
    "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
}

/// A value computed on a thread of its own.
private final class InBackground<T: Sendable>: Sendable {
    private let result = Mutex<Result<T, any Error>?>(nil)
    private let done = DispatchSemaphore(value: 0)

    init(_ body: @escaping @Sendable () throws -> T) {
        let thread = Thread { [self] in
            let value = Result { try body() }
            result.withLock { $0 = value }
            done.signal()
        }
        thread.start()
    }

    /// Waits for the value, or rethrows what the computation threw.
    func value() throws -> T {
        done.wait()
        done.signal()
        return try result.withLock { $0! }.get()
    }
}

/// A local side made current before the sync began (while the far side connected): the
/// sync's own ``makeCurrent()`` returns that first result instead of scanning again.
/// Correct because a scan is safe at any time; what changes after it is the next sync's,
/// as with a scan made inside the sync.
private final class MadeCurrentReplica: SyncReplica {
    private let local: LocalReplica
    private let scanned: Mutex<Bool?>

    init(_ local: LocalReplica, scanned: Bool) {
        self.local = local
        self.scanned = Mutex(scanned)
    }

    var replica: ReplicaID { local.replica }
    var name: String { local.name }
    func begin() throws { try local.begin() }
    func end() { local.end() }

    func makeCurrent() throws -> Bool {
        if let first = scanned.withLock({ value in
            defer { value = nil }; return value
        }) {
            return first
        }
        return try local.makeCurrent()
    }

    func changeSequence() throws -> Int { try local.changeSequence() }
    func liveObjectCount() throws -> Int { try local.liveObjectCount() }
    func checkpoint(for peer: ReplicaID) throws -> Int? { try local.checkpoint(for: peer) }
    func setCheckpoint(for peer: ReplicaID, to sequence: Int) throws { try local.setCheckpoint(for: peer, to: sequence) }
    func sequenceAfterOwnWrites(since sequence: Int) throws -> Int { try local.sequenceAfterOwnWrites(since: sequence) }
    func entries(after id: ObjectID?, limit: Int) throws -> [ReplicaEntry] { try local.entries(after: id, limit: limit) }

    func entries(changedAfter after: Int, through: Int, limit: Int) throws -> [ReplicaEntry] {
        try local.entries(changedAfter: after, through: through, limit: limit)
    }

    func entries(for ids: [ObjectID]) throws -> [ReplicaEntry?] { try local.entries(for: ids) }
    func contents(of entries: [ReplicaEntry]) throws -> [Data?] { try local.contents(of: entries) }
    func apply(_ objects: [IncomingObject]) throws -> [Bool] { try local.apply(objects) }
    func mergeVectors(_ merges: [VectorMerge]) throws { try local.mergeVectors(merges) }
}
