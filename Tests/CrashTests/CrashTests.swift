import ArchiveProcess
import ArchiveStore
import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The same model as Tests/CrashWriter/main.swift: contents follow from (key, counter).
private struct Record: Codable, Equatable {
    var key: String
    var counter: Int
    var payload: String

    init(key: String, counter: Int) {
        self.key = key
        self.counter = counter
        payload = String(repeating: "\(key):\(counter);", count: 1 + counter % 40)
    }
}

/// Waits until the pipe has something to read (without reading it), or `seconds` pass.
private func waitUntilReadable(_ pipe: Int32, seconds: Int32) {
    var descriptor = pollfd(fd: pipe, events: Int16(POLLIN), revents: 0)
    _ = poll(&descriptor, 1, seconds * 1_000)
}

/// Every temp file left anywhere in the store.
private func tempFiles(in store: String) throws -> [String] {
    let names = FileManager.default.enumerator(atPath: store)?.compactMap { $0 as? String } ?? []
    return names.filter { URL(fileURLWithPath: $0).lastPathComponent.hasPrefix(".archive-sync-tmp.") }
}

@Suite("Crash safety")
struct CrashTests {
    /// A child saving in a loop is killed with SIGKILL at random moments, 60 times. After each
    /// kill: opening the store leaves no temp file, verify is clean, every save that had
    /// returned is in history with its exact contents, and each object holds the newest
    /// acknowledged save or a newer one (the save in flight may have landed).
    @Test func everyAcknowledgedSaveSurvivesSIGKILL() throws {
        let store = FileManager.default.temporaryDirectory.appendingPathComponent("crash-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: store) }
        let writer = try #require(builtProduct(named: "crash-writer"), "crash-writer is not built beside the test executable")

        var newest: [String: Int] = [:]
        var roundsKilledWhileSaving = 0
        var generator = SystemRandomNumberGenerator()
        let kills = 60
        for round in 0..<kills {
            let process = try ChildProcess(writer, [store, String(round * 1_000_000)], stdout: .pipe)
            // Three rounds in four wait for the writer's first acknowledged save, so that most
            // kills land while it saves however slowly a loaded machine starts it; every fourth
            // may die before its first save too. Then die at a random moment.
            if round % 4 != 0 { waitUntilReadable(process.standardOutput!, seconds: 30) }
            usleep(UInt32.random(in: 5_000...150_000, using: &generator))
            let termination = process.kill()
            let killedBySignal = if case .signalled = termination { true } else { false }
            #expect(killedBySignal, "the writer exited by itself: \(termination)")

            let lines = String(decoding: process.readStandardOutputToEnd(), as: UTF8.self).split(separator: "\n")
            var acknowledged: [(String, Int)] = []
            for line in lines {
                let parts = line.split(separator: " ")
                try #require(parts.count == 2, "torn acknowledgement line: \(line)")
                let counter = try #require(Int(parts[0]))
                for key in parts[1].split(separator: ",") { acknowledged.append((String(key), counter)) }
            }
            if !acknowledged.isEmpty { roundsKilledWhileSaving += 1 }

            let opened = try ArchiveStore(directory: store)
            #expect(try tempFiles(in: store).isEmpty, "round \(round): temp files left after open")
            let report = try opened.verify()
            #expect(report.isClean, "round \(round): verify found \(report.problems)")

            for (key, counter) in acknowledged {
                let expected = ContentHash(of: try JSONEncoder.sorted.encode(Record(key: key, counter: counter)))
                let history = try opened.history(of: Record.self, forKey: key)
                #expect(history.contains { $0.hash == expected }, "round \(round): acknowledged save \(key)@\(counter) is not in history")
                newest[key] = max(newest[key] ?? -1, counter)
            }
            for (key, counter) in newest {
                let loaded = try #require(try opened.load(Record.self, forKey: key), "round \(round): \(key) is gone")
                #expect(loaded.counter >= counter, "round \(round): \(key) went back from \(counter) to \(loaded.counter)")
                #expect(loaded == Record(key: key, counter: loaded.counter), "round \(round): \(key) holds torn contents")
            }
        }
        // Most kills must land while the writer is saving, not before its first save.
        #expect(roundsKilledWhileSaving >= kills / 2)
    }
}

extension JSONEncoder {
    /// The store's JSON encoding: sorted keys, unescaped slashes.
    fileprivate static var sorted: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }
}
