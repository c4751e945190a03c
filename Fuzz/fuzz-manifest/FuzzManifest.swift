import ArchiveStore
import Foundation
import FuzzSupport

/// The manifest's columns read back: a write intent's entries (JSON), a version vector's text
/// and content hashes as JSON. The whole input goes to each.
func check(_ bytes: [UInt8]) {
    let data = Data(bytes)
    ReadBack.checkIntentEntries(data)
    ReadBack.checkContentHash(data)
    ReadBack.checkVersionVector(String(decoding: bytes, as: UTF8.self))
}

@main enum FuzzManifest {
    static func main() { runFuzzTarget(check) }
}
