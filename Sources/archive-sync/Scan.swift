import ArchiveStore
import ArgumentParser

struct Scan: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Record what other programs added, changed or removed in a store.",
        discussion: """
            Compares each file's size, mtime and inode with the manifest and reads only the files whose stamp changed, as git's index does. Lists a collection's directory only when its mtime or ctime moved since a scan listed it (new or removed files); --json reports how many were listed. Also removes temp files left by dead processes. Every entry it leaves alone is listed with the reason (`ignored PATH: reason`); `verify` lists the same.

            Example: archive-sync scan ./store --json
            """
    )

    @OptionGroup var store: StoreArgument
    @OptionGroup var output: OutputOptions

    func run() throws {
        let progress = ProgressLine("recorded")
        let report = try store.open().scan(progress: progress.update)
        progress.finish()
        if output.json { return try output.printJSON(report) }
        for change in report.changes {
            printLine("\(change.kind.rawValue) \(change.id) (version \(change.version))")
        }
        for entry in report.ignored {
            printLine("ignored \(entry.path): \(entry.reason)")
        }
        // The numbers --json gives as `counts`.
        let counts = report.counts
        printLine(
            "\(counts.created) created, \(counts.modified) modified, \(counts.deleted) deleted, \(counts.unchanged) unchanged, \(counts.ignored) ignored"
        )
    }
}
