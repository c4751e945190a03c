import ArchiveStore
import ArgumentParser

struct Remove: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rm",
        abstract: "Remove an object. Its history is kept; `restore` brings it back.",
        discussion: "Example: archive-sync rm ./store Person/ada"
    )

    @OptionGroup var store: StoreArgument

    @Argument(help: ArgumentHelp("The object, as COLLECTION/KEY.", valueName: "id"))
    var id: String

    func run() throws {
        let objectID = try ObjectID(parsing: id)
        let opened = try store.open()
        guard try opened.objects(in: objectID.collection).contains(where: { $0.id == objectID }) else {
            throw ArchiveError.notFound(objectID, version: nil)
        }
        try opened.remove(objectID)
        printLine("removed \(objectID)")
    }
}
