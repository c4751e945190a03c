import Foundation
import FuzzSupport
import KeyedArchive

/// An NSKeyedArchiver archive (binary or XML property list), as `archive-sync import` and
/// `dump` read it: the tree, a model decoded from it, and the JSON import writes of it.
func check(_ bytes: [UInt8]) {
    guard let value = try? KeyedArchive.decode(Data(bytes), options: .init(maximumDepth: 500, maximumValues: 100_000)) else { return }
    _ = try? KeyedArchiveDecoder().decode(Specimen.self, from: value)
    _ = try? JSONEncoder().encode(value)
}

@main enum FuzzKeyedArchive {
    static func main() { runFuzzTarget(check) }
}
