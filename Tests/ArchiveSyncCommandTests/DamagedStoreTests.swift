import Foundation
import Testing

@testable import ArchiveStore

#if canImport(Glibc)
    import Glibc
#endif

// A store with a damaged manifest row, or one whose last sync failed on a full disk: every
// command that can still do its job does it, and the others say exactly what stands in the way.

@Suite("Damaged and full stores")
struct DamagedStoreTests {
    /// The issue's reproduction: a row whose file is `../../secret.txt`. `rm` is refused with a
    /// sentence naming the object and its row, and changes nothing (the object is still
    /// counted and listed, no intent is left); every other command keeps working.
    @Test func rmOfADamagedRowIsRefusedAndChangesNothing() throws {
        let store = try TestStore()
        defer { store.delete() }
        try store.put("Person/p1", #"{"a":1}"#)
        try store.put("Person/p2", #"{"a":2}"#)
        try writeFile(store.directory + "/secret.txt", "secret")  // where the row leads, from Person/
        let manifest = store.path + "/.archive-sync/manifest.sqlite"
        try SQLiteConnection(path: manifest).run("UPDATE objects SET file = '../../secret.txt' WHERE key = 'p1'")

        let removed = try store.run("rm", "Person/p1")
        #expect(removed.status == 1, "\(removed)")
        #expect(removed.errorOutput.contains("the manifest's row for Person/p1 is damaged"), "\(removed)")
        #expect(removed.errorOutput.contains("'../../secret.txt'"), "\(removed)")
        #expect(try store.status()["objects"] as? Int == 2)
        #expect(try store.run("ls", "Person").output.contains("Person/p1"))
        #expect(try SQLiteConnection(path: manifest).first("SELECT count(*) FROM intents") { $0.int(0) } == 0)
        #expect(try String(contentsOfFile: store.directory + "/secret.txt", encoding: .utf8) == "secret")

        for command in [["ls", "Person"], ["get", "Person/p2"], ["status"], ["history", "Person/p1"]] {
            let result = try runArchiveSync([command[0], store.path] + command.dropFirst())
            #expect(result.status == 0, "\(command): \(result)")
        }
        try store.put("Person/p3", #"{"a":3}"#)
        let verified = try store.run("verify")
        #expect(verified.status == 1 && verified.output.contains("Person/p1"), "\(verified)")
        for result in [removed, verified] { #expect(!(result.output + result.errorOutput).contains("cross-device"), "\(result)") }
    }
}
