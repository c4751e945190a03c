import ArchiveStore
import Foundation
import FuzzSupport

/// A `.plist` object file, as the store's codec decodes it into a model (Foundation's
/// PropertyListDecoder, binary or XML), and as `put` checks it: an error or a value, never a trap.
func check(_ bytes: [UInt8]) {
    _ = try? ArchiveCodec.propertyList.decode(Specimen.self, from: Data(bytes))
    ReadBack.checkValidation(Data(bytes), as: .propertyList)
}

/// The sample model as the store's codec writes it (binary), and as an XML property list.
func seeds() throws -> [[UInt8]] {
    let xml = PropertyListEncoder()
    xml.outputFormat = .xml
    return [[UInt8](try ArchiveCodec.propertyList.encode(Specimen.sample)), [UInt8](try xml.encode(Specimen.sample))]
}

@main enum FuzzPlistCodec {
    static func main() { runFuzzTarget(check, seeds: seeds) }
}
