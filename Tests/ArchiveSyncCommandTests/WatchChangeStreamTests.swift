import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite("archive-sync watch --json: what other processes put", .serialized)
struct WatchChangeStreamTests {
    /// 8 processes put 3 versions each of an object of their own while the watcher gathers
    /// events for 2 s: the versions are coalesced, but each object's first line is `created`,
    /// and its last names its last version.
    @Test func eachObjectAppearsFirstAsCreatedWhateverWasCoalesced() throws {
        let store = try TestStore()
        defer { store.delete() }
        try store.put("Person/seed", "{}")  // the collection exists before the watcher
        let watcher = try WatchProcess(store, ["--json", "--debounce", "2000"])
        defer { watcher.kill() }
        try watcher.waitUntilCaughtUp()

        let binary = try #require(archiveSyncBinary)
        let writers = try (0..<8).map { n in
            let script = "for v in 1 2 3; do echo \"{\\\"v\\\": $v}\" | \"$0\" put \"$1\" Person/k\(n) > /dev/null || exit 1; done"
            return try RunningCommand(["-c", script, binary, store.path], executable: "/bin/sh")
        }
        for writer in writers { #expect(writer.wait().status == 0) }

        let keys = (0..<8).map { "Person/k\($0)" }
        let done = poll(timeout: .seconds(30)) {
            let last = Dictionary(watcher.changes().map { ($0["id"] as? String ?? "", $0["version"] as? Int ?? 0) }) { $1 }
            return keys.allSatisfy { last[$0] == 3 }
        }
        #expect(done, "not every object reached version 3\n\(watcher.stdout)")
        for key in keys {
            let lines = watcher.changes().filter { $0["id"] as? String == key }
            #expect(lines.first?["kind"] as? String == "created", "\(key): \(lines)")
            #expect(lines.dropFirst().allSatisfy { $0["kind"] as? String == "modified" }, "\(key): \(lines)")
        }
        #expect(try #require(watcher.stop(with: SIGTERM).result).status == 0)
    }
}
