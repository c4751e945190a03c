import Foundation
import Synchronization
import TestSupport
import Testing

@testable import ArchiveStore

private struct Item: Codable, Equatable, Sendable {
    var task: Int
    var index: Int
    var payload: String
}

struct ConcurrencyTests {
    @Test func concurrentTasksSavingDistinctObjectsAllLand() async throws {
        try await withTemporaryDirectory { dir async throws in
            let path = dir + "/store"
            let store = try ArchiveStore(directory: path)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for task in 0..<8 {
                    group.addTask {
                        for index in 0..<50 {
                            let version = try store.save(Item(task: task, index: index, payload: "t\(task)-i\(index)"), forKey: "t\(task)-i\(index)")
                            #expect(version == 1)
                        }
                    }
                }
                try await group.waitForAll()
            }

            #expect(try store.keys(of: Item.self).count == 400)
            for task in 0..<8 {
                for index in 0..<50 {
                    #expect(try store.load(Item.self, forKey: "t\(task)-i\(index)") == Item(task: task, index: index, payload: "t\(task)-i\(index)"))
                }
            }
            let status = try store.status()
            #expect(status.objects == 400)
            #expect(status.sequence == 400)
            #expect(try FileManager.default.contentsOfDirectory(atPath: path + "/Item").count == 400)
            #expect(try store.verify().isClean)
        }
    }

    @Test func concurrentTasksSavingOneKeyLoseNoVersion() async throws {
        try await withTemporaryDirectory { dir async throws in
            let store = try ArchiveStore(directory: dir + "/store", options: .init(historyLimit: 1000))
            try await withThrowingTaskGroup(of: Void.self) { group in
                for task in 0..<4 {
                    group.addTask {
                        for index in 0..<25 {
                            try store.save(Item(task: task, index: index, payload: ""), forKey: "shared")
                        }
                    }
                }
                try await group.waitForAll()
            }
            let history = try store.history(of: Item.self, forKey: "shared")
            #expect(history.map(\.version) == Array(1...100))
            #expect(Set(history.compactMap(\.hash)).count == 100)
            let last = try #require(history.last)
            let current = try store.data(for: ObjectID(collection: "Item", key: "shared"))
            #expect(ContentHash(of: current) == last.hash)
            #expect(try store.verify().isClean)
        }
    }

    @Test func twoStoresOnOneDirectorySavingAlternatelyKeepEveryVersion() throws {
        try withTemporaryDirectory { dir throws in
            let path = dir + "/store"
            let first = try ArchiveStore(directory: path, options: .init(historyLimit: 100))
            let second = try ArchiveStore(directory: path)
            #expect(first.replica == second.replica)
            #expect(second.historyLimit == 100)

            var expected: [Data] = []
            for index in 0..<20 {
                let writer = index.isMultiple(of: 2) ? first : second
                let item = Item(task: index % 2, index: index, payload: "by \(index % 2)")
                #expect(try writer.save(item, forKey: "shared") == index + 1)
                expected.append(try ArchiveCodec.json.encode(item))
                // Each instance sees the other's write at once.
                let reader = index.isMultiple(of: 2) ? second : first
                #expect(try reader.load(Item.self, forKey: "shared") == item)
            }
            let id = try ObjectID(collection: "Item", key: "shared")
            for store in [first, second] {
                let history = try store.history(id)
                #expect(history.map(\.version) == Array(1...20))
                #expect(history.map(\.hash) == expected.map { ContentHash(of: $0) })
                for version in [1, 7, 20] {
                    #expect(try store.data(for: id, version: version) == expected[version - 1])
                }
            }
            #expect(try first.scan().changes.isEmpty)
            #expect(try second.verify().isClean)
        }
    }

    @Test func twoStoresOnOneDirectorySavingConcurrentlyLoseNoWrite() async throws {
        try await withTemporaryDirectory { dir async throws in
            let path = dir + "/store"
            let stores = [try ArchiveStore(directory: path, options: .init(historyLimit: 1000)), try ArchiveStore(directory: path)]
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (which, store) in stores.enumerated() {
                    group.addTask {
                        for index in 0..<40 {
                            try store.save(Item(task: which, index: index, payload: "shared"), forKey: "shared")
                            try store.save(Item(task: which, index: index, payload: "own"), forKey: "own-\(which)-\(index)")
                        }
                    }
                }
                try await group.waitForAll()
            }
            let history = try stores[0].history(of: Item.self, forKey: "shared")
            #expect(history.map(\.version) == Array(1...80))
            let hashes = Set(history.compactMap(\.hash))
            for which in 0..<2 {
                for index in 0..<40 {
                    let bytes = try ArchiveCodec.json.encode(Item(task: which, index: index, payload: "shared"))
                    #expect(hashes.contains(ContentHash(of: bytes)))
                }
            }
            #expect(try stores[1].keys(of: Item.self).count == 81)
            #expect(try stores[0].status().sequence == 160)
            #expect(try stores[1].verify().isClean)
        }
    }
}

struct CoreShareTests {
    /// Two stores' scans or writes run at once in a local sync: each must get half the cores,
    /// on its own thread as on the caller's, or four lanes crowd two cores.
    @Test func workRunAtOnceSplittingCoresGetsHalfTheCoresEach() throws {
        let cores = ProcessInfo.processInfo.activeProcessorCount
        #expect(parallelLanes(10_000, threshold: 1024) == cores)
        #expect(parallelLanes(10, threshold: 1024) == 1)
        let (first, second) = try inParallel(
            splittingCores: true, { parallelLanes(10_000, threshold: 1024) }, { parallelLanes(10_000, threshold: 1024) })
        #expect(first == max(1, cores / 2))
        #expect(second == max(1, cores / 2))
        // Without splitting, each keeps every core (a far side runs in another process).
        let (whole, _) = try inParallel({ parallelLanes(10_000, threshold: 1024) }, { 0 })
        #expect(whole == cores)
        // Outside, the cores are whole again.
        #expect(parallelLanes(10_000, threshold: 1024) == cores)
    }

    @Test func inParallelRethrowsEitherSidesError() {
        struct Failure: Error {}
        #expect(throws: Failure.self) { try inParallel({ 1 }, { () throws -> Int in throw Failure() }) }
        #expect(throws: Failure.self) { try inParallel({ () throws -> Int in throw Failure() }, { 1 }) }
    }

    /// Saves that queue behind a commit are committed together (group commit). When one of
    /// them is refused (here: its object's row is damaged), the group fails and its writes are
    /// committed caller by caller: the refused one fails alone, and the other caller's save
    /// lands and says so, its staged file not removed by the group's failure.
    @Test func aSaveRefusedInAGroupCommitFailsOnlyItsCaller() throws {
        try withTemporaryDirectory { dir throws in
            let path = dir + "/store"
            let store = try ArchiveStore(directory: path)
            try store.save(Item(task: 0, index: 0, payload: "x"), forKey: "damaged")
            try SQLiteConnection(path: path + "/.archive-sync/manifest.sqlite").run(
                "UPDATE objects SET file = '../../outside.json' WHERE key = 'damaged'")
            // Held here, writer.lock keeps the first save in its commit while the next two
            // stage their files and queue behind it, to be committed as one group.
            let lock = open(path + "/.archive-sync/writer.lock", O_RDWR)
            #expect(lock >= 0 && flock(lock, LOCK_EX) == 0)
            let outcomes = Mutex<[String: String]>([:])
            let done = DispatchGroup()
            func save(_ key: String, after delay: UInt32) {
                done.enter()
                Thread.detachNewThread {
                    usleep(delay)
                    let outcome: String
                    do { outcome = "saved \(try store.save(Item(task: 1, index: 1, payload: key), forKey: key))" } catch { outcome = "\(error)" }
                    outcomes.withLock { $0[key] = outcome }
                    done.leave()
                }
            }
            save("first", after: 0)
            save("good", after: 200_000)
            save("damaged", after: 200_000)
            usleep(1_000_000)
            flock(lock, LOCK_UN)
            close(lock)
            done.wait()
            let results = outcomes.withLock { $0 }
            #expect(results["first"] == "saved 1")
            #expect(results["good"] == "saved 1", "\(results)")
            #expect(results["damaged"]?.contains("outside.json") == true, "\(results)")
            #expect(try store.load(Item.self, forKey: "good")?.payload == "good")
            #expect(try FileManager.default.contentsOfDirectory(atPath: path + "/.archive-sync/staging").isEmpty)
        }
    }
}
