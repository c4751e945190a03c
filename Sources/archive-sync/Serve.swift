import ArchiveSync
import ArgumentParser
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

struct Serve: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Serve one store to a sync on another host, over stdin and stdout.",
        discussion: """
            The far side of `archive-sync sync ./store host:/srv/store`: ssh (or the --rsh command) starts it there, and it speaks the sync protocol on stdin and stdout until the sync ends. It writes nothing else to stdout; errors go to stderr. It is confined to STORE: requests name objects by id, never by path.

            To let a key do nothing but sync one store, pin it in ~/.ssh/authorized_keys:
              command="archive-sync serve --stdio /srv/store",restrict ssh-ed25519 AAAA...

            A live session (`sync --watch`, `watch --sync-with`) asks it, over the same connection, to watch the store for the session's life: it then tells the other side when its change sequence moves, pings when quiet, and ends itself (exit 1) when the other side has been silent for 2.5 keepalive intervals.

            Exit status: 0 when the sync ended the session (a live one: closed the connection), 1 when the connection closed early, 2 for a frame that breaks the protocol or a path that is not a store (that frame changes nothing; writes that landed earlier in the session stay).
            """
    )

    @Flag(help: "Speak the protocol on stdin and stdout (the only transport).")
    var stdio = false

    @Flag(help: "Make the directory a store when it is not one (sent by `sync --force`).")
    var create = false

    @Argument(help: ArgumentHelp("The store's directory.", valueName: "store"))
    var store: String

    func validate() throws {
        guard stdio else { throw ValidationError("serve needs --stdio: it speaks the protocol on stdin and stdout") }
    }

    func run() throws {
        signal(SIGPIPE, SIG_IGN)
        let server = ReplicaServer(storePath: store, create: create, channel: FrameChannel(input: 0, output: 1)) { printError($0) }
        throw ExitCode(server.run())
    }
}
