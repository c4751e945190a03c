// The model cache as a program that runs: `swift run model-cache ./store`.
//
// It persists and caches models, then starts a second process that edits one archive file
// behind the cache's back (as a person with an editor, or a sync, would), and prints the new
// model as soon as the cache returns it.
import ArchiveCache
import ArchiveStore
import ArchiveWatch
import Foundation

struct Contact: Codable, Equatable, Sendable {
    var name: String
    var email: String
    var city: String
}

/// Stands in for a network call: the read-through fetch of a model nobody stored yet.
func fetchContact(_ key: String) async throws -> Contact {
    try await Task.sleep(for: .milliseconds(20))
    return Contact(name: "Grace Hopper", email: "grace@example.com", city: "Arlington")
}

let path = CommandLine.arguments.dropFirst().first ?? "./model-cache-store"
let store = try ArchiveStore(directory: path)
// The watcher: other programs' edits reach the cache within milliseconds, and hits need no stat.
let watcher = try store.startWatching(WatchOptions(debounce: .milliseconds(10)))
let cache = ModelCache<Contact>(store: store, countLimit: 1_000, costLimit: 50 << 20, diskLimit: .collection(bytes: 1 << 20))

try await cache.set(Contact(name: "Ada Lovelace", email: "ada@example.com", city: "London"), forKey: "ada")
print("saved   Contact/ada:", try await cache.value(forKey: "ada")!)

let grace = try await cache.value(forKey: "grace") { try await fetchContact("grace") }
print("fetched Contact/grace (read-through, now on disk too):", grace)

try await cache.set(Contact(name: "Temporary", email: "tmp@example.com", city: "Nowhere"), forKey: "tmp", expiresAfter: .milliseconds(200))
try await Task.sleep(for: .milliseconds(300))
print("expired Contact/tmp reads as:", try await cache.value(forKey: "tmp").map { "\($0)" } ?? "nil (and its file is gone)")
print("keys on disk:", try cache.keys())

// A second process edits ada's archive file, as a person with an editor would.
let file = store.path + "/Contact/ada.json"
let before = try await cache.value(forKey: "ada")!
let editor = Process()
editor.executableURL = URL(fileURLWithPath: "/bin/sh")
editor.arguments = ["-c", #"sed -i 's/London/Cambridge/' "$1""#, "sh", file]
let start = ContinuousClock.now
try editor.run()
print("second process (pid \(editor.processIdentifier)): sed -i 's/London/Cambridge/' \(file)")
while true {
    let now = try await cache.value(forKey: "ada")!
    if now != before {
        let waited = (ContinuousClock.now - start).components
        let milliseconds = Double(waited.seconds) * 1000 + Double(waited.attoseconds) / 1e15
        print("picked up the edit, \(String(format: "%.1f", milliseconds)) ms after the second process started:", now)
        break
    }
    if ContinuousClock.now - start > .seconds(10) {
        print("the edit was not picked up within 10 s")
        exit(1)
    }
    try await Task.sleep(for: .milliseconds(1))
}
editor.waitUntilExit()
let statistics = cache.statistics
print(
    "cache: \(statistics.hits) hits, \(statistics.loads) loads from disk, \(statistics.fetches) fetch, \(statistics.invalidations) invalidations, \(statistics.expired) expired"
)
watcher.stop()
try await watcher.wait()
