import ArchiveJSON
import ArchiveStore
import Foundation
import FuzzSupport

/// The store's JSON decoder against Foundation's: wherever the fast decoder answers, its value
/// must be JSONDecoder's (its documented promise); and the store's codec never traps.
func check(_ bytes: [UInt8]) {
    let data = Data(bytes)
    if let fast = decodeArchiveJSON(Specimen.self, from: data) {
        let slow = try? JSONDecoder().decode(Specimen.self, from: data)
        precondition(slow == fast, "the store's JSON decoder gave a value JSONDecoder does not")
    }
    if let fast = decodeArchiveJSON([String: Double].self, from: data) {
        precondition((try? JSONDecoder().decode([String: Double].self, from: data)) == fast, "a dictionary differs from JSONDecoder's")
    }
    _ = try? ArchiveCodec.json.decode(Specimen.self, from: data)
    ReadBack.checkValidation(data, as: .json)
}

/// The sample model as the store's codec writes it, unsorted as JSONEncoder writes it, and a
/// dictionary of numbers.
func seeds() throws -> [[UInt8]] {
    [
        [UInt8](try ArchiveCodec.json.encode(Specimen.sample)), [UInt8](try JSONEncoder().encode(Specimen.sample)),
        Array(#"{"a":1e308,"b":-0.0,"c":5e-324,"d":123456789012345678901234567890,"e\u00e9":0.1}"#.utf8),
    ]
}

@main enum FuzzJSON {
    static func main() { runFuzzTarget(check, seeds: seeds) }
}
