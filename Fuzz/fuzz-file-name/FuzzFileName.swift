import ArchiveStore
import FuzzSupport

/// A name found in a store's directory (any bytes; as UTF-8, or with invalid bytes replaced as
/// a listing would), and the same text as a `COLLECTION/KEY` argument.
func check(_ bytes: [UInt8]) {
    ReadBack.checkFileName(String(decoding: bytes, as: UTF8.self))
}

@main enum FuzzFileName {
    static func main() { runFuzzTarget(check) }
}
