import ArchiveStore
import ArchiveSync
import ArgumentParser
import Foundation
import Synchronization

/// How `diff` and `sync` reach a store on another host.
struct RemoteOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "The command that runs a program on the far host, split on whitespace and followed by the host.",
            valueName: "command"))
    var rsh = "ssh"

    @Option(help: ArgumentHelp("The archive-sync program on the far host, looked up on its PATH unless a path is given.", valueName: "path"))
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
            return (LocalReplica(try Self.openStore(a, create: create)), LocalReplica(try Self.openStore(b, create: create)))
        }
        // The local side first: a wrong local path fails before anything is started.
        var local: LocalReplica?
        for location in locations {
            if case .local(let path) = location { local = LocalReplica(try Self.openStore(path, create: create)) }
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
        let scanned = local.map { local in Result { try local.makeCurrentAhead() } }
        let connected = try connecting.mapValues { try $0.value() }
        try scanned?.get()
        func side(_ index: Int) -> any SyncReplica {
            if let far = connected[index] { return far }
            return local!  // a pair with no far side returned above, so one side is here
        }
        return (side(0), side(1))
    }
}

/// `text` in single quotes for the far host's shell, which ssh hands the command to.
func shellQuoted(_ text: String) -> String {
    "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
}
