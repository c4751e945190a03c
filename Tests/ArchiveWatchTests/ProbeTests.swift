import ArchiveStore
import ArchiveWatch
import Foundation
import TestSupport
import Testing

/// A reader trusts a watcher only once the watcher has answered a probe sent through its own
/// event queue: the answer comes after everything the queue held before the probe is recorded.
@Suite("Watcher: probes tell readers it has caught up") struct ProbeTests {
    /// The watcher gathers events for 2 s; a probe does not wait for that, and its answer
    /// says the edit made just before it is recorded: another reader sees it at once.
    @Test func aProbeIsAnsweredAtOnceAndOnlyAfterTheEditBeforeIt() async throws {
        let options = watchOptions(debounce: .seconds(2))
        try await withWatchedStore(options, prepare: { store, _ in try store.save(Person(name: "A", age: 1), forKey: "a") }) { watched in
            let reader = try ArchiveStore(directory: watched.path)  // as another process would
            let answered = watched.watcher.statistics.probes
            try writeFile(watched.path + "/Person/a.json", try json(Person(name: "A", age: 2)))
            let clock = ContinuousClock()
            let start = clock.now
            #expect(try reader.isKeptCurrentByWatcher())
            print("the watcher answered a probe in \(clock.now - start)")
            #expect(try reader.load(Person.self, forKey: "a") == Person(name: "A", age: 2))
            #expect(try reader.history(try watched.id("Person/a")).map(\.version) == [1, 2])
            #expect(watched.watcher.statistics.probes == answered + 1)
            #expect(try reader.status().watcher?.caughtUp == true)
            let left = try FileManager.default.contentsOfDirectory(atPath: watched.path).filter { $0.hasPrefix(".archive-sync-probe.") }
            #expect(left.isEmpty, "\(left)")
        }
    }

    @Test func withoutAWatcherThereIsNothingToAskAndTheStoreIsNotKeptCurrent() async throws {
        try withTemporaryDirectory { directory in
            let store = try ArchiveStore(directory: directory + "/store")
            #expect(try !store.isKeptCurrentByWatcher())
            #expect(try store.status().watcher == nil)
            #expect(try FileManager.default.contentsOfDirectory(atPath: store.path).filter { $0.hasPrefix(".archive-sync-probe.") }.isEmpty)
        }
    }

    /// A reader killed while no watcher answered leaves its probe; the next watcher, which
    /// gets no event for it, removes it once it has caught up. Other dot files stay.
    @Test func aStartingWatcherRemovesTheProbesOfDeadReaders() async throws {
        let stale = ".archive-sync-probe.\(getpid()).1.7"  // this pid, but another start time: a dead reader
        let other = ".archive-sync-probe.not-a-reader"
        try await withWatchedStore(prepare: { _, path in
            for name in [stale, other] { try writeFile(path + "/" + name, "") }
        }) { watched in
            let names = try FileManager.default.contentsOfDirectory(atPath: watched.path)
            #expect(!names.contains(stale) && names.contains(other), "\(names)")
        }
    }
}
