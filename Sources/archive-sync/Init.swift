import ArchiveStore
import ArgumentParser

struct Init: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create a store (or adopt an existing directory of archives as one).",
        discussion: """
            Creates STORE and its manifest. On a directory that already holds archives, run `archive-sync scan STORE` next to record them. On an existing store, changes nothing but the history limit, if given.

            Example: archive-sync init ./store --history 20
            """
    )

    @Argument(help: "The directory to make a store; created when missing.")
    var store: String

    @Option(help: "How many versions of each object to keep (default 10).")
    var history: Int?

    func validate() throws {
        if let history, history < 1 { throw ValidationError("--history must be at least 1, not \(history)") }
    }

    func run() throws {
        let opened = try ArchiveStore(directory: store, options: .init(historyLimit: history))
        printLine("store \(store) ready: replica \(opened.replica), history keeps \(opened.historyLimit) versions")
    }
}
