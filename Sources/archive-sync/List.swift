import ArchiveStore
import ArgumentParser

struct List: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ls",
        abstract: "List the collections of a store, or the objects of one collection.",
        discussion: """
            Examples:
              archive-sync ls ./store
              archive-sync ls ./store Person --json
            """
    )

    @OptionGroup var store: StoreArgument

    @Argument(help: "A collection to list the objects of.")
    var collection: String?

    @OptionGroup var output: OutputOptions

    func run() throws {
        let opened = try store.open()
        if let collection {
            let objects = try opened.objects(in: collection)
            // An empty answer for a name that is no collection would hide a typo.
            if objects.isEmpty, try !opened.collections().contains(where: { $0.name == collection }) {
                throw ArchiveError.invalidCollection(
                    collection, reason: "\(store.store) has no object in it (`archive-sync ls \(store.store)` lists its collections)")
            }
            if output.json { return try output.printJSON(objects) }
            var rows = [["ID", "VERSION", "SIZE", "MODIFIED (UTC)"]]
            rows += objects.map { [$0.id.description, String($0.version), String($0.size), $0.modified.shortDescription] }
            print(table(rows))
        } else {
            let collections = try opened.collections()
            if output.json { return try output.printJSON(collections) }
            var rows = [["COLLECTION", "OBJECTS", "BYTES"]]
            rows += collections.map { [$0.name, String($0.objects), String($0.bytes)] }
            print(table(rows))
        }
    }
}
