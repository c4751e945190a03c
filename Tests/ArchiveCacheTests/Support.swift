import ArchiveCache
import ArchiveStore
import Foundation
import TestSupport
import Testing

// What the cache's tests share: real store directories under the temp directory, a second
// process that writes a store's files (a shell, or the built `archive-sync`), and a wait
// with a generous deadline (the tests run in parallel on a loaded two-core machine).

/// How long any wait in these tests may take before the test fails. Long: in the full suite,
/// the one inotify thread of the test process also serves other suites' watchers, bursts of
/// 20,000 files among them, and a wait of over 15 s was seen once on the loaded machine.
let patience: Duration = .seconds(60)

/// The model the tests cache.
struct Person: Codable, Equatable, Sendable {
    var name: String
    var age: Int
    /// Padding, so that tests can give objects a known size.
    var note: String = ""
}

/// Another model, for the wrong-type tests.
struct Dog: Codable, Equatable, Sendable {
    var breed: String
}

/// Makes a fresh store in a fresh temp directory, passes it to `body`, and removes it afterwards.
func withStore<T>(_ body: (ArchiveStore) async throws -> T) async throws -> T {
    try await withTemporaryDirectory(prefix: "archive-cache-tests") { path in
        try await body(try ArchiveStore(directory: path + "/store"))
    }
}

/// The path of `key`'s JSON file in the `Person` collection.
func personFile(_ store: ArchiveStore, _ key: String) -> String { store.path + "/Person/\(key).json" }

/// Runs `script` with `/bin/sh -c` in a second process and waits for it; fails unless it exits 0.
func shell(_ script: String, _ arguments: String...) throws {
    let result = try run("/bin/sh", ["-c", script, "sh"] + arguments)
    #expect(result.status == 0, "sh -c \(script) exited \(result.status)")
}

/// Another program replacing a file as editors do: write a temp file, then rename it over the target.
func replaceFromAnotherProcess(_ path: String, with text: String) throws {
    try shell(#"printf '%s' "$1" > "$2.tmp-edit" && mv "$2.tmp-edit" "$2""#, text, path)
}

/// Rewrites a file in place from this process with plain writes (no truncation, same inode).
func rewriteInPlace(_ path: String, _ text: String) throws {
    let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
    try handle.write(contentsOf: Data(text.utf8))
    try handle.close()
}

/// `archive-sync put STORE ID` with `json` on stdin, in a second process with its own store.
func putFromAnotherProcess(_ store: ArchiveStore, _ id: String, _ json: String) throws {
    let binary = try #require(archiveSyncBinary, "the archive-sync binary is not beside the test executable; build it or set ARCHIVE_SYNC_BIN")
    try shell(#"printf '%s' "$1" | "$2" put "$3" "$4" > /dev/null"#, json, binary, store.path, id)
}

/// Waits until `condition` holds, polling every 5 ms; throws when `patience` runs out.
/// Time this test did not get to poll (every thread of the process busy with other tests) does
/// not count against `timeout`, and the condition is checked once more after it runs out.
func eventually(_ what: String, timeout: Duration = patience, _ condition: () async throws -> Bool) async throws {
    var deadline = ContinuousClock.now + timeout
    while true {
        if try await condition() { return }
        if ContinuousClock.now >= deadline { break }
        let before = ContinuousClock.now
        try await Task.sleep(for: .milliseconds(5))
        let overslept = ContinuousClock.now - before - .milliseconds(5)
        if overslept > .milliseconds(100) { deadline += overslept }
    }
    Issue.record("timed out waiting for \(what)")
    throw CancellationError()
}

/// The bytes the store's `Person` collection takes on disk, from the manifest.
func collectionBytes(_ store: ArchiveStore, _ name: String = "Person") throws -> Int {
    try store.collections().first { $0.name == name }?.bytes ?? 0
}

/// Sets a file's modification time a minute back, as if written long ago: without a watcher,
/// the cache reads a file modified within the last 2 s again on every hit (a same-size
/// rewrite within one clock tick would keep its stamp).
func age(_ path: String) throws {
    try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: -60)], ofItemAtPath: path)
}
