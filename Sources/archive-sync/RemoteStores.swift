import ArchiveStore
import ArchiveSync
import ArgumentParser

/// How `diff` and `sync` reach a store on another host.
struct RemoteOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "The command that runs a program on the far host, split on whitespace and followed by the host.",
            valueName: "command"))
    var rsh = "ssh"

    @Option(help: ArgumentHelp("The archive-sync program on the far host, looked up on its PATH unless a path is given.", valueName: "path"))
    var remoteCmd = RemoteStore.defaultProgram

    /// Where `text` names a store, with these options for a far one.
    func location(_ text: String) -> StoreLocation {
        StoreLocation(text, shell: rsh.split(whereSeparator: \.isWhitespace).map(String.init), program: remoteCmd)
    }
}

extension StorePairArguments {
    /// The sync of the two stores named, connected: see ``Sync/init(_:_:options:create:)``.
    func sync(options: SyncOptions, create: Bool, remote: RemoteOptions) throws -> Sync {
        if let bucket = try bucketSync(options: options, create: create, remote: remote) { return bucket }
        let sync = try Sync(remote.location(a), remote.location(b), options: options, create: create)
        for store in sync.storesHere { _ = store.notingPendingRecovery() }
        return sync
    }
}
