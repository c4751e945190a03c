import ArchiveStore
import ArchiveWatch
import Foundation
import Testing

@Suite("Watcher") struct WatcherTests {
    @Test func recordsAFileWrittenByAnotherProgram() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("watch-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let store = try ArchiveStore(directory: path)
        let watcher = try store.startWatching(WatchOptions(debounce: .zero))
        defer { watcher.stop() }
        let changes = store.changes
        try FileManager.default.createDirectory(atPath: path + "/Person", withIntermediateDirectories: true)
        try Data(#"{"name":"Ada"}"#.utf8).write(to: URL(fileURLWithPath: path + "/Person/ada.json"))
        var iterator = changes.makeAsyncIterator()
        let change = await iterator.next()
        #expect(change?.id.description == "Person/ada")
        #expect(change?.kind == .created)
        #expect(change?.origin == .external)
        #expect(try store.history(ObjectID(parsing: "Person/ada")).count == 1)
    }
}
