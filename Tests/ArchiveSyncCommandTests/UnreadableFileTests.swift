import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A file the store cannot read (here: mode 000, read by an unprivileged user) is reported and
/// left as the manifest has it; it never stops a scan, or a watcher, recording the others.
@Suite("Unreadable files") struct UnreadableFileTests {
    @Test func aScanReportsAnUnreadableFileAndRecordsTheOthers() throws {
        let store = try TestStore()
        defer { store.delete() }
        try store.put("Person/a", #"{"v":1}"#)
        try writeFile(store.file("Person", "a.json"), #"{"v":2}"#)  // changed, and then unreadable
        try writeFile(store.file("Person", "b.json"), "{}")  // new, readable
        #expect(chmod(store.file("Person", "a.json"), 0) == 0)

        // Root reads any file: run the command as `nobody`, from a copy of the binary it can reach.
        let binary = try #require(archiveSyncBinary)
        let copy = store.directory + "/archive-sync"
        try FileManager.default.copyItem(atPath: binary, toPath: copy)
        #expect(chmod(store.directory, 0o755) == 0)
        for path in [store.directory, copy] + (FileManager.default.subpaths(atPath: store.directory) ?? []).map({ store.directory + "/" + $0 }) {
            #expect(lchown(path, 65534, 65534) == 0, "chown \(path)")
        }
        let scan = try RunningCommand(
            ["--reuid=65534", "--regid=65534", "--clear-groups", copy, "scan", store.path, "--json"], executable: "/usr/bin/setpriv"
        ).wait()
        #expect(scan.status == 0, "\(scan)")
        let report = try #require(try JSONSerialization.jsonObject(with: scan.stdout) as? [String: Any], "\(scan)")
        let changes = report["changes"] as? [[String: Any]] ?? []
        #expect(changes.map { "\($0["kind"] ?? "") \($0["id"] ?? "")" } == ["created Person/b"], "\(scan)")
        let ignored = report["ignored"] as? [[String: Any]] ?? []
        #expect(ignored.contains { $0["path"] as? String == "Person/a.json" && ($0["reason"] as? String ?? "").hasPrefix("unreadable") }, "\(scan)")
        // Person/a keeps the version the manifest had.
        #expect(try store.history("Person/a").count == 1)
    }
}
