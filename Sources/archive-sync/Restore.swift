import ArchiveStore
import ArgumentParser

struct Restore: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Make a kept version's contents the object's next version.",
        discussion: """
            History is never rewritten: restoring version 2 of an object at version 5 makes version 6.

            Example: archive-sync restore ./store Person/ada --version 2
            """
    )

    @OptionGroup var store: StoreArgument

    @Argument(help: ArgumentHelp("The object, as COLLECTION/KEY.", valueName: "id"))
    var id: String

    @Option(help: "The version to restore (see `history`).")
    var version: Int

    func validate() throws {
        if version < 1 { throw ValidationError("--version must be at least 1, not \(version)") }
    }

    func run() throws {
        let objectID = try ObjectID(parsing: id)
        let newVersion = try store.open().restore(objectID, version: version)
        printLine("\(objectID) is now version \(newVersion), with the contents of version \(version)")
    }
}
