// Saves into a store in a loop until killed, for CrashTests.
//
//     crash-writer STORE FIRST-COUNTER [THREADS [PAUSE-EVERY [BULK]]]
//
// With THREADS > 1, that many threads save at once, each its own keys (no batches): their
// saves share commits (group commit). With PAUSE-EVERY, a thread sleeps 1.5 s after every
// that many saves, past the second after which the store's background `syncfs` settles them.
// With BULK, it first saves BULK objects (`b0`, `b1`...) in one batch: into a new collection,
// which the batch stages whole and renames into place after its commit.
// After each save (or batch) returns, writes one line to stdout with one write(2):
// `<counter> <key>[,<key>...]`. Every line printed names a save that had returned, so
// everything it names must survive a SIGKILL.
import ArchiveStore
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The model saved; its contents follow from (key, counter), so the test can recompute them.
struct Record: Codable, Equatable {
    var key: String
    var counter: Int
    var payload: String

    init(key: String, counter: Int) {
        self.key = key
        self.counter = counter
        payload = String(repeating: "\(key):\(counter);", count: 1 + counter % 40)
    }
}

let arguments = CommandLine.arguments
guard (3...6).contains(arguments.count), var counter = Int(arguments[2]), arguments.dropFirst(3).allSatisfy({ Int($0) != nil }) else {
    FileHandle.standardError.write(Data("usage: crash-writer STORE FIRST-COUNTER [THREADS [PAUSE-EVERY [BULK]]]\n".utf8))
    exit(2)
}
let threads = arguments.count > 3 ? max(1, Int(arguments[3])!) : 1
let pauseEvery = arguments.count > 4 ? Int(arguments[4])! : 0
let bulk = arguments.count > 5 ? Int(arguments[5])! : 0
let store = try ArchiveStore(directory: arguments[1], options: .init(historyLimit: 100_000))
let keyCount = 16

@Sendable func acknowledge(_ counter: Int, _ keys: [String]) {
    let line = Array("\(counter) \(keys.joined(separator: ","))\n".utf8)
    _ = line.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
}

/// One thread of several: saves its own keys (`k<thread>`, `k<thread + threads>`...) with the
/// counters `first + thread + 1`, then `threads` more each time.
@Sendable func saveForever(_ store: ArchiveStore, thread: Int, of threads: Int, first: Int, pauseEvery: Int) -> Never {
    var counter = first + thread + 1
    var saves = 0
    let mine = stride(from: thread, to: 16, by: threads).map { "k\($0)" }
    while true {
        let key = mine[saves % mine.count]
        do {
            try store.save(Record(key: key, counter: counter), forKey: key)
        } catch {
            FileHandle.standardError.write(Data("crash-writer: \(error)\n".utf8))
            exit(1)
        }
        acknowledge(counter, [key])
        saves += 1
        counter += threads
        if pauseEvery > 0, saves % pauseEvery == 0 { usleep(1_500_000) }
    }
}

if bulk > 0 {
    counter += 1
    let keys = (0..<bulk).map { "b\($0)" }
    try store.batch { tx in
        for key in keys { try tx.save(Record(key: key, counter: counter), forKey: key) }
    }
    acknowledge(counter, keys)
}

if threads > 1 || pauseEvery > 0 {
    for thread in 1..<threads {
        Thread.detachNewThread { [store, counter, pauseEvery, threads] in
            saveForever(store, thread: thread, of: threads, first: counter, pauseEvery: pauseEvery)
        }
    }
    saveForever(store, thread: 0, of: threads, first: counter, pauseEvery: pauseEvery)
}

while true {
    counter += 1
    if counter % 5 == 0 {
        let keys = (0..<4).map { "k\((counter + $0 * 3) % keyCount)" }
        try store.batch { tx in
            for key in keys { try tx.save(Record(key: key, counter: counter), forKey: key) }
        }
        acknowledge(counter, keys)
    } else {
        let key = "k\(counter % keyCount)"
        try store.save(Record(key: key, counter: counter), forKey: key)
        acknowledge(counter, [key])
    }
}
