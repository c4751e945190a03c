import Foundation
import TestSupport
import Testing

/// Text output names every entry it leaves alone, agrees with `--json`, and shows keys and file
/// names so that they can neither rewrite the terminal nor lose a character.
@Suite("archive-sync text output of names")
struct TextOutputTests {
    /// A property list with an empty dictionary.
    static let plist = Data(#"<?xml version="1.0" encoding="UTF-8"?><plist version="1.0"><dict/></plist>"#.utf8)

    /// Runs `script` with `sh -c`, the binary as `$0` and `arguments` as `$1`...: a shell can pass
    /// arguments that are not UTF-8, which `Process` (taking Strings) cannot.
    private func runShell(_ script: String, _ arguments: String...) throws -> CommandResult {
        let binary = try #require(archiveSyncBinary)
        return try RunningCommand(["-c", script, binary] + arguments, executable: "/bin/sh").wait()
    }

    @Test func scanAndVerifyNameEveryEntryTheyLeaveAloneAndTextAgreesWithJSON() throws {
        let store = try TestStore()
        defer { store.delete() }
        try store.put("P/a", "{}")
        let put = try store.run("put", "P/pl", "--codec", "plist", stdin: Self.plist)
        try #require(put.status == 0, "\(put)")
        let made = try runShell(#"printf '{}' > "$1/P/bad$(printf '\377')name.json""#, store.path)
        try #require(made.status == 0, "\(made)")
        try writeFile(store.file("P", "pl.json"), "{}")

        let text = try store.run("scan")
        #expect(text.status == 0, "\(text)")
        #expect(!text.stdout.contains(0xFF), "a name that is not UTF-8 is printed escaped, never raw")
        let ignored = lines(text.output).filter { $0.hasPrefix("ignored ") }
        #expect(ignored.count == 2, "\(text)")
        #expect(ignored.contains { $0.hasPrefix("ignored P/bad\\xffname.json: ") && $0.contains("UTF-8") }, "\(text)")
        #expect(ignored.contains { $0.hasPrefix("ignored P/pl.json: ") && $0.contains("P/pl.plist") }, "\(text)")

        let json = try store.run("scan", "--json")
        let report = try #require(try parseJSON(json) as? [String: Any], "\(json)")
        let counts = try #require(report["counts"] as? [String: Int], "\(json)")
        #expect((report["ignored"] as? [Any])?.count == 2, "\(json)")
        #expect(counts["ignored"] == 2, "\(json)")
        let summary = ["created", "modified", "deleted", "unchanged", "ignored"].map { "\(counts[$0] ?? -1) \($0)" }.joined(separator: ", ")
        #expect(lines(text.output).last == summary, "\(text)\n\(json)")

        let verify = try store.run("verify")
        #expect(verify.status == 0, "nothing a scan would record: \(verify)")
        #expect(lines(verify.output).filter { $0.hasPrefix("ignored ") } == ignored, "\(verify)")
        #expect(lines(verify.output).last?.hasSuffix(", 2 ignored, 0 problems") == true, "\(verify)")
        let verifyJSON = try #require(try parseJSON(try store.run("verify", "--json")) as? [String: Any])
        #expect((verifyJSON["ignored"] as? [Any])?.count == 2, "\(verifyJSON)")
    }

    @Test func verifyReportsAnUntrackedCollection() throws {
        let store = try TestStore()
        defer { store.delete() }
        try store.put("P/a", "{}")
        try FileManager.default.createDirectory(atPath: store.path + "/New", withIntermediateDirectories: false)
        try writeFile(store.file("New", "x.json"), "{}")

        let verify = try store.run("verify")
        #expect(verify.status == 1, "\(verify)")
        #expect(lines(verify.output).contains { $0.hasPrefix("untracked New/x: ") }, "\(verify)")
    }

    @Test func getPrintsOnlyTheFileTheManifestNames() throws {
        let store = try TestStore()
        defer { store.delete() }
        let put = try store.run("put", "P/pl", "--codec", "plist", stdin: Self.plist)
        try #require(put.status == 0, "\(put)")
        try writeFile(store.file("P", "pl.json"), #"{"untracked":true}"#)
        #expect(try store.get("P/pl") == Self.plist)
    }

    @Test func aKeyWithControlCharactersPrintsEscaped() throws {
        let store = try TestStore()
        defer { store.delete() }
        let id = "P/a\n\u{1B}[2J"
        let put = try store.run("put", id, stdin: Data("{}".utf8))
        #expect(put.status == 0, "\(put)")
        #expect(put.output == "P/a\\n\\u{1B}[2J version 1\n", "\(put)")
        let listed = try store.run("ls", "P")
        #expect(!listed.stdout.contains(0x1B), "\(listed)")
        #expect(lines(listed.output).contains { $0.hasPrefix("P/a\\n\\u{1B}[2J  1  ") }, "\(listed)")
        let missing = try store.run("get", "P/b\u{1B}[2J")
        #expect(missing.status == 2, "\(missing)")
        #expect(!missing.stderr.contains(0x1B), "\(missing)")
    }

    @Test func nfcAndNfdKeysPrintDistinctlyInLs() throws {
        let store = try TestStore()
        defer { store.delete() }
        try store.put("P/caf\u{E9}", "{}")
        try store.put("P/cafe\u{301}", "{}")
        let listed = try store.run("ls", "P")
        #expect(listed.status == 0, "\(listed)")
        // Compared as bytes: Swift's String equality would call the two keys equal.
        let bytes = Array(listed.stdout)
        for id in ["P/caf\u{E9}", "P/cafe\u{301}"] {
            let row = Array((id + "  1  ").utf8)
            #expect(bytes.indices.contains { bytes[$0...].starts(with: row) }, "no row for \(Array(id.utf8)) in \(bytes)")
        }
    }

    @Test func aKeyArgumentThatIsNotUTF8IsRefused() throws {
        let store = try TestStore()
        defer { store.delete() }
        let result = try runShell(#"printf '{}' | "$0" put "$1" "$(printf 'P/a\377')""#, store.path)
        #expect(result.status == 2, "\(result)")
        #expect(lines(result.errorOutput).count == 1, "\(result)")
        #expect(result.errorOutput.contains("'P/a\\xff'") && result.errorOutput.contains("not valid UTF-8"), "\(result)")
        #expect(try store.status()["objects"] as? Int == 0, "nothing stored under another key")
    }
}
