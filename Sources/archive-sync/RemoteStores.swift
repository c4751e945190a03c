import ArchiveStore
import ArchiveSync
import ArgumentParser
import Foundation

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
        var opened: [any SyncReplica] = []
        var localReplica: ReplicaID?
        // The local side first: a wrong local path fails before anything is started.
        for location in locations {
            if case .local(let path) = location {
                let store = try openLocal(path, create: create)
                localReplica = store.replica
                opened.append(LocalReplica(store))
            }
        }
        var result: [any SyncReplica] = []
        for (location, name) in zip(locations, [a, b]) {
            switch location {
            case .local:
                result.append(opened.removeFirst())
            case .remote(let host, let path):
                var command = remote.rsh.split(whereSeparator: \.isWhitespace).map(String.init)
                command.append(host)
                command.append("\(remote.remoteCmd) serve --stdio \(create ? "--create " : "")-- \(shellQuoted(path))")
                result.append(try RemoteReplica(command: command, name: name, peer: localReplica))
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
