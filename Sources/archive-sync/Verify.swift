import ArchiveStore
import ArgumentParser

struct Verify: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Re-hash every object and kept version; exit 1 on any mismatch, naming each.",
        discussion: """
            Tells bit rot (content changed, stamp unchanged: `corrupt`) from an edit not yet recorded (`edited`: run `scan`). A file the next scan would record is `untracked`, also in a collection the manifest does not know yet; entries a scan leaves alone are listed as ignored, which are not problems. Changes nothing.

            Example: archive-sync verify ./store
            """
    )

    @OptionGroup var store: StoreArgument
    @OptionGroup var output: OutputOptions

    func run() throws {
        let progress = ProgressLine("verified")
        let report = try store.open().verify(progress: progress.update)
        progress.finish()
        if output.json {
            try output.printJSON(report)
        } else {
            for problem in report.problems {
                printLine("\(problem.kind.rawValue) \(problem.id): \(problem.detail)")
            }
            for entry in report.ignored {
                printLine("ignored \(entry.path): \(entry.reason)")
            }
            let problems = report.problems.count == 1 ? "1 problem" : "\(report.problems.count) problems"
            printLine("\(report.verified) objects and \(report.verifiedHistory) kept versions verified, \(report.ignored.count) ignored, \(problems)")
        }
        if !report.isClean { throw ExitCode(1) }
    }
}
