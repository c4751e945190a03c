import ArchiveStore
import ArgumentParser

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show a store's replica id, objects, bytes, change sequence, last scan and watcher.",
        discussion: "Example: archive-sync status ./store --json"
    )

    @OptionGroup var store: StoreArgument
    @OptionGroup var output: OutputOptions

    func run() throws {
        let status = try store.open().status()
        if output.json { return try output.printJSON(status) }
        print(
            table([
                ["store", status.path],
                ["replica", status.replica.description],
                ["objects", String(status.objects)],
                ["bytes", String(status.bytes)],
                ["collections", String(status.collections)],
                ["sequence", String(status.sequence)],
                ["last scan", status.lastScan?.shortDescription ?? "never"],
                ["history", "last \(status.historyLimit) versions"],
                ["watched", watched(status.watcher)],
            ]))
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
