import ArchiveStore
import ArgumentParser

struct Repair: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Rebuild a missing or damaged manifest from the object files, keeping the replica id.",
        discussion: """
            For a store refused with "its manifest is missing" (or empty, or damaged). Moves the damaged manifest aside in .archive-sync/ (never deletes it), makes a new one with the replica id kept in .archive-sync/replica, and records every object file found. History cannot be rebuilt: each object starts again at version 1, with only this replica's counter in its version vector; the report says what was not recovered. A manifest that opens is left alone unless --force is given. Stop processes using the store first.

            Example: archive-sync repair ./store
            """
    )

    @OptionGroup var store: StoreArgument

    @Flag(help: "Rebuild even a manifest that is not damaged, losing its history.")
    var force = false

    @OptionGroup var output: OutputOptions

    func run() throws {
        let report = try ArchiveStore.repair(directory: store.store, force: force)
        if output.json { return try output.printJSON(report) }
        let source: String
        switch report.replicaSource {
        case .replicaFile: source = "kept from .archive-sync/replica"
        case .damagedManifest: source = "kept from the damaged manifest"
        case .new: source = "new"
        }
        let objects = report.objects == 1 ? "1 object" : "\(report.objects) objects"
        print("rebuilt the manifest of \(report.path): \(objects) recorded, replica \(report.replica) (\(source))")
        for name in report.movedAside { print("moved aside: .archive-sync/\(name)") }
        for entry in report.ignored { print("ignored \(entry.path): \(entry.reason)") }
        for loss in report.notRecovered { print("not recovered: \(loss)") }
    }
}
