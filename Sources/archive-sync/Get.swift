import ArchiveStore
import ArgumentParser
import Foundation

struct Get: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print an object's archive bytes (or those of a kept version) to stdout.",
        discussion: """
            Examples:
              archive-sync get ./store Person/ada
              archive-sync get ./store Person/ada --version 1 > ada-v1.json
            """
    )

    @OptionGroup var store: StoreArgument

    @Argument(help: ArgumentHelp("The object, as COLLECTION/KEY.", valueName: "id"))
    var id: String

    @Option(help: "A kept version to print instead of the current file.")
    var version: Int?

    func validate() throws {
        if let version, version < 1 { throw ValidationError("--version must be at least 1, not \(version)") }
    }

    func run() throws {
        let data = try store.open().data(for: ObjectID(parsing: id), version: version)
        FileHandle.standardOutput.write(data)
    }
}
