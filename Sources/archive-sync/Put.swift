import ArchiveStore
import ArgumentParser
import Foundation

struct Put: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Store an object's archive from stdin or a file, as its next version.",
        discussion: """
            The input is checked before anything is written: bytes that are not valid JSON (or property list, with --codec plist) are refused and the stored object is untouched.

            Examples:
              echo '{"name":"Ada"}' | archive-sync put ./store Person/ada
              archive-sync put ./store Person/ada --file ada.json
            """
    )

    @OptionGroup var store: StoreArgument

    @Argument(help: ArgumentHelp("The object, as COLLECTION/KEY.", valueName: "id"))
    var id: String

    @Option(help: "Read the archive from this file instead of stdin.")
    var file: String?

    @Option(help: "The codec of the input: json or plist.")
    var codec: ArchiveCodec = .json

    func run() throws {
        let objectID = try ObjectID(parsing: id)
        let data: Data
        if let file {
            data = try readInputFile(file)
        } else {
            if isatty(0) != 0 { throw ArchiveError.invalidInput("put reads the archive from stdin or --file, and stdin is a terminal") }
            data = FileHandle.standardInput.readDataToEndOfFile()
        }
        let version = try store.open().put(data, as: objectID, codec: codec)
        printLine("\(objectID) version \(version)")
    }
}

extension ArchiveCodec: ExpressibleByArgument {}
