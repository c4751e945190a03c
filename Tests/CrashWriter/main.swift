// Saves into a store in a loop until killed, for CrashTests.
//
//     crash-writer STORE FIRST-COUNTER
//
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
guard arguments.count == 3, var counter = Int(arguments[2]) else {
    FileHandle.standardError.write(Data("usage: crash-writer STORE FIRST-COUNTER\n".utf8))
    exit(2)
}
let store = try ArchiveStore(directory: arguments[1], options: .init(historyLimit: 100_000))
let keyCount = 16

func acknowledge(_ counter: Int, _ keys: [String]) {
    let line = Array("\(counter) \(keys.joined(separator: ","))\n".utf8)
    _ = line.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
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
