import BenchSupport
import Foundation

/// What an app does without the store: one JSON file per object, written with Foundation.
///
/// `Data.write(to:options: .atomic)` writes a temp file, `fsync`s it and renames it over the
/// target (one fsync per file, no directory fsync), which is the bar the store is held to.
struct FoundationBaseline {
    let directory: URL

    init(directory: String) {
        self.directory = URL(fileURLWithPath: directory, isDirectory: true)
    }

    func url(_ key: String) -> URL { directory.appendingPathComponent(key + ".json") }

    /// `JSONEncoder().encode` and an atomic write, as the baseline.
    func save(_ person: Person, forKey key: String) throws {
        try JSONEncoder().encode(person).write(to: url(key), options: .atomic)
    }

    /// `Data(contentsOf:)` and `JSONDecoder().decode`, as the baseline.
    func load(forKey key: String) throws -> Person {
        try JSONDecoder().decode(Person.self, from: Data(contentsOf: url(key)))
    }

    /// Setup only (not timed): the same files, written without fsync.
    func fill(_ count: Int) throws {
        let encoder = JSONEncoder()
        for n in 0..<count {
            try encoder.encode(Person.sample(n)).write(to: url(Person.key(n)))
        }
    }
}
