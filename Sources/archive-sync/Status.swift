import ArchiveStore
import ArchiveSync
import ArgumentParser

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show a store's replica id, objects, bytes, change sequence, last scan, watcher and live sessions.",
        discussion: "Example: archive-sync status ./store --json"
    )

    @OptionGroup var store: StoreArgument
    @OptionGroup var output: OutputOptions

    func run() throws {
        let opened = try store.open()
        let status = try opened.status()
        let sessions = opened.liveSessions()
        if output.json { return try output.printJSON(WithLiveSessions(status: status, liveSessions: sessions)) }
        print(
            table(
                [
                    ["store", status.path],
                    ["replica", status.replica.description],
                    ["objects", String(status.objects)],
                    ["bytes", String(status.bytes)],
                    ["collections", String(status.collections)],
                    ["sequence", String(status.sequence)],
                    ["last scan", status.lastScan?.shortDescription ?? "never"],
                    ["history", "last \(status.historyLimit) versions"],
                    ["watched", watched(status.watcher)],
                ] + sessions.flatMap { session in session.peers.map { ["live", describe($0, pid: session.pid)] } }))
    }

    /// `./b: connected, last cycle 2026-11-26 07:01:02, 0 behind (pid 123)`
    private func describe(_ peer: LivePeerStatus, pid: Int32) -> String {
        var text = "\(peer.peer): \(peer.connected ? "connected" : "not connected")"
        text += ", last cycle " + (peer.lastCycle?.shortDescription ?? "none yet")
        text += ", \(peer.behind) behind"
        if let error = peer.lastError { text += ", last error: \(error)" }
        return text + " (pid \(pid))"
    }

    private func watched(_ watcher: WatcherStatus?) -> String {
        guard let watcher else { return "no (run `archive-sync watch` to keep the manifest current)" }
        guard let since = watcher.currentSince else { return "by pid \(watcher.pid), catching up" }
        guard watcher.caughtUp else {
            return
                "by pid \(watcher.pid), not answering (stopped or far behind): the manifest may lag the disk; `archive-sync scan` records what changed"
        }
        return "by pid \(watcher.pid), current since \(since.shortDescription)"
    }
}

/// The store's status with its live sessions (`liveSessions`, one entry per session).
private struct WithLiveSessions: Encodable {
    var status: StoreStatus
    var liveSessions: [LiveSessionStatus]

    private enum Keys: String, CodingKey { case liveSessions }

    func encode(to encoder: any Encoder) throws {
        try status.encode(to: encoder)
        var container = encoder.container(keyedBy: Keys.self)
        try container.encode(liveSessions, forKey: .liveSessions)
    }
}
