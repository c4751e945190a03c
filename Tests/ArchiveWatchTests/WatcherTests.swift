import ArchiveStore
import ArchiveWatch
import Foundation
import TestSupport
import Testing

@Suite("Watcher") struct WatcherTests {
    /// Another program writes a new file in place (open, write, close) into a collection
    /// directory: one external change, and one version holding what it wrote. The directory
    /// is there before the watcher starts: the scan of a directory made while watched can read
    /// a file created but not yet written, a version of its own
    /// (`aNewCollectionDirectoryFilledAtOnceIsRecordedWhole`).
    @Test func recordsAFileWrittenByAnotherProgram() async throws {
        try await withWatchedStore(watchOptions(debounce: .zero), prepare: { _, path in try makeDirectory(path + "/Person") }) { watched in
            let id = try watched.id("Person/ada")
            let content = Data(#"{"name":"Ada"}"#.utf8)
            try writeFile(watched.path + "/Person/ada.json", content)

            let created = try await watched.log.wait(for: .created, of: id)
            #expect(created.origin == .external)
            let changes = try await watched.settle()
            #expect(changes.map(describe) == [describe(created)])
            let history = try watched.store.history(id)
            #expect(history.map(\.hash) == [ContentHash(of: content)], "\(history.map { "v\($0.version), \($0.size) bytes" })")
        }
    }
}
