import ArchiveStore
import ArgumentParser

struct History: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the kept versions of an object, oldest first.",
        discussion: "Example: archive-sync history ./store Person/ada --json"
    )

    @OptionGroup var store: StoreArgument

    @Argument(help: ArgumentHelp("The object, as COLLECTION/KEY.", valueName: "id"))
    var id: String

    @OptionGroup var output: OutputOptions

    func run() throws {
        let versions = try store.open().history(ObjectID(parsing: id))
        if output.json { return try output.printJSON(versions) }
        var rows = [["VERSION", "DATE (UTC)", "SIZE", "SHA-256", "REPLICA", ""]]
        rows += versions.map {
            [
                String($0.version), $0.date.shortDescription, String($0.size), $0.hash.map { String($0.description.prefix(12)) } ?? "-",
                $0.replica.description, $0.isDeleted ? "deleted" : "",
            ]
        }
        print(table(rows))
    }
}
