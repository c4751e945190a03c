import ArchiveLocking
import ArchiveStore
import ArchiveWatch
import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

// The helpers the watcher's tests share (beside TestSupport's): a watched store, a log of a
// store's changes that can be waited on, and plain file-system writes. Every wait has a generous deadline (the tests run on a loaded
// two-core machine, in parallel); missing it fails the test with what was seen.

/// How long any wait in these tests may take before the test fails.
let patience: Duration = .seconds(15)

/// A model for the tests that save through the store.
struct Person: Codable, Equatable, Sendable {
    var name: String
    var age: Int
}

/// Thrown when a wait ran out of time; its description says what was awaited and what was seen.
struct TimedOut: Error, CustomStringConvertible {
    let description: String
}

/// The JSON the store writes for `person` (sorted keys).
func json(_ person: Person) throws -> Data {
    try ArchiveCodec.json.encode(person)
}

// MARK: - Waiting

/// Polls `condition` until it holds, or throws ``TimedOut`` once `timeout` has passed.
func eventually(
    _ what: @autoclosure () -> String, timeout: Duration = patience, _ condition: () throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + timeout
    while try !condition() {
        guard ContinuousClock.now < deadline else { throw TimedOut(description: "timed out after \(timeout) waiting for \(what())") }
        try await Task.sleep(for: .milliseconds(10))
    }
}

/// Waits until `watcher` has stopped (without blocking a thread of the test's executor), or
/// throws ``TimedOut``.
func waitUntilStopped(_ watcher: StoreWatcher, timeout: Duration = patience) async throws {
    try await eventually("the watcher to stop", timeout: timeout) { watcher.waitUntilStopped(timeout: .zero) }
}

// MARK: - The change log

/// Every change a store's ``ArchiveStore/changes`` delivers, from the moment the log is made
/// (it subscribes at once), kept for the test to wait on and look at.
final class ChangeLog: Sendable {
    private final class Storage: Sendable {
        let changes = TracedMutex<[StoreChange]>([])
    }

    private let storage = Storage()
    private let consumer: Task<Void, Never>

    init(_ store: ArchiveStore) {
        let stream = store.changes  // subscribes now, before anything the test does next
        let storage = storage
        consumer = Task {
            for await change in stream { storage.changes.withLock { $0.append(change) } }
        }
    }

    deinit { consumer.cancel() }

    /// Everything delivered so far, in the order delivered.
    var changes: [StoreChange] { storage.changes.withLock { $0 } }

    /// Everything delivered so far for `id`.
    func changes(for id: ObjectID) -> [StoreChange] { changes.filter { $0.id == id } }

    /// Waits until what was delivered satisfies `predicate` and returns it, or throws
    /// ``TimedOut`` naming `what` and listing what was delivered.
    @discardableResult
    func wait(for what: String, timeout: Duration = patience, until predicate: ([StoreChange]) -> Bool) async throws -> [StoreChange] {
        let deadline = ContinuousClock.now + timeout
        var lastLook = false
        while true {
            let seen = changes
            if predicate(seen) { return seen }
            if ContinuousClock.now >= deadline {
                if lastLook { throw TimedOut(description: "timed out after \(timeout) waiting for \(what); delivered: \(seen.map(describe))") }
                // The log's consumer runs on the test runner's threads, which other tests can
                // hold for seconds (their child processes, their sleeps): a waiter let back in
                // after such a spell may find the deadline past and the change delivered but
                // not yet logged. One more short wait lets the consumer catch up first.
                lastLook = true
                try await Task.sleep(for: .milliseconds(200))
                continue
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    /// Waits until a change to `id` of `kind` has been delivered and returns it.
    @discardableResult
    func wait(for kind: StoreChange.Kind, of id: ObjectID, timeout: Duration = patience) async throws -> StoreChange {
        let seen = try await wait(for: "\(kind) \(id)", timeout: timeout) { $0.contains { $0.id == id && $0.kind == kind } }
        return seen.first { $0.id == id && $0.kind == kind }!
    }
}

/// A change, shortly: `created Person/a v1 external #7`.
func describe(_ change: StoreChange) -> String {
    "\(change.kind) \(change.id) v\(change.version) \(change.origin) #\(change.sequence)"
}

// MARK: - A watched store

/// A store in a fresh temp directory, watched, with a log of its changes started just after
/// the watcher (so the first scan's changes are not in it).
final class WatchedStore: Sendable {
    /// The temp directory that holds the store (and may hold files outside it).
    let directory: String
    /// The store's directory: `directory/store`.
    let path: String
    let store: ArchiveStore
    let watcher: StoreWatcher
    let log: ChangeLog
    /// The manifest's sequence when the log started.
    let baseline: Int

    /// The collection ``settle()`` writes its markers into.
    static let markerCollection = "Marker"

    fileprivate init(directory: String, options: WatchOptions, prepare: (ArchiveStore, String) throws -> Void) throws {
        self.directory = directory
        path = directory + "/store"
        store = try ArchiveStore(directory: path)
        try prepare(store, path)
        watcher = try store.startWatching(options)
        log = ChangeLog(store)
        baseline = try store.status().sequence
    }

    /// `Collection/key` as an id.
    func id(_ text: String) throws -> ObjectID { try ObjectID(parsing: text) }

    /// Makes sure the watcher has handled everything done to the disk before this call, and
    /// that the log holds every change recorded so far: writes a new marker object with plain
    /// file calls, waits until the watcher records it, then until the log holds every change
    /// the manifest has recorded since the log started. Checks that no change was delivered
    /// twice. Returns the log's changes other than markers.
    ///
    /// The kernel queues inotify events in the order things happen, and the watcher handles
    /// them in that order (those of one batch in one scan, published together), so once the
    /// marker's change is recorded, so is whatever an earlier event led to.
    @discardableResult
    func settle(sourceLocation: SourceLocation = #_sourceLocation) async throws -> [StoreChange] {
        let markers = path + "/" + Self.markerCollection
        if !FileManager.default.fileExists(atPath: markers) { try makeDirectory(markers) }
        let key = "m-" + UUID().uuidString
        try writeFile(markers + "/" + key + ".json", #"{"marker":true}"#)
        let marker = try ObjectID(collection: Self.markerCollection, key: key)
        try await log.wait(for: .created, of: marker)
        let sequence = try store.status().sequence
        let expected = Set((baseline + 1)..<(sequence + 1))
        let seen = try await log.wait(for: "every change recorded up to sequence \(sequence)") {
            Set($0.map(\.sequence)).isSuperset(of: expected)
        }
        let sequences = seen.map(\.sequence)
        #expect(Set(sequences).count == sequences.count, "a change was delivered twice: \(seen.map(describe))", sourceLocation: sourceLocation)
        #expect(
            sequences.allSatisfy { $0 > baseline }, "a change from before the log started was delivered: \(seen.map(describe))",
            sourceLocation: sourceLocation)
        return seen.filter { $0.id.collection != Self.markerCollection }
    }

    /// Stops the watcher and waits until it has stopped.
    func stop() async throws {
        watcher.stop()
        try await waitUntilStopped(watcher)
    }
}

/// Options for a test's watcher: the defaults unless given, with a logger that prints only
/// errors (the periodic rescans of some tests would fill the output), or nothing at all when
/// `silent` (for a test whose watcher is meant to fail).
func watchOptions(debounce: Duration = .milliseconds(50), rescanInterval: Duration? = .seconds(3600), silent: Bool = false) -> WatchOptions {
    var options = WatchOptions(debounce: debounce, rescanInterval: rescanInterval)
    options.logger.logLevel = silent ? .critical : .error
    return options
}

/// Opens a store in a fresh temp directory, lets `prepare` put things in it, starts watching
/// it, runs `body`, then stops the watcher (waiting until it has stopped) and removes the
/// directory, whether `body` returns or throws.
func withWatchedStore(
    _ options: WatchOptions = watchOptions(), prepare: (ArchiveStore, String) throws -> Void = { _, _ in },
    _ body: (WatchedStore) async throws -> Void
) async throws {
    try await withTemporaryDirectory { directory in
        let watched = try WatchedStore(directory: directory, options: options, prepare: prepare)
        do {
            try await body(watched)
        } catch {
            watched.watcher.stop()
            _ = try? await waitUntilStopped(watched.watcher)
            throw error
        }
        try await watched.stop()
    }
}
