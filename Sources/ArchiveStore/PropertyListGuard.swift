import Foundation

/// Property lists that Foundation's `PropertyListDecoder` (Swift 6.3 on Linux) traps on, rather
/// than throwing, refused before it sees them: a `.plist` object in a store is outside input
/// (another program, another replica), and loading one must not end the app. Found by the fuzz
/// target `fuzz-plist-codec` (docs/fuzzing.md). The first two cases below are ones Foundation
/// refuses anyway when it does not trap; the third is a shape the store's codec never writes.
enum PropertyListGuard {
    /// Throws `DecodingError.dataCorrupted` for:
    /// - an XML property list with bytes that are not UTF-8 (in an `<integer>` they trap;
    ///   anywhere else Foundation refuses them). XML in UTF-16 starts with a byte-order mark
    ///   and passes.
    /// - a binary property list with an array, set, dictionary or UTF-16 string whose count
    ///   needs more bytes than the file has (a count whose size in bytes passes `Int.max` traps
    ///   when Foundation converts it).
    /// - a binary property list with a set (`PropertyListSerialization`, `put`'s check, crashes
    ///   bridging any set to Swift, even one of strings) or with an array, set or dictionary as
    ///   a dictionary's key (not hashable). The store's codec never writes a set, nor a key that
    ///   is not a string.
    static func refuseWhatFoundationTrapsOn(_ data: Data) throws {
        if data.starts(with: "bplist0".utf8) {
            if let problem = data.withUnsafeBytes({ binaryProblem(in: $0) }) { throw corrupt(problem) }
            return
        }
        if data.starts(with: [0xFE, 0xFF]) || data.starts(with: [0xFF, 0xFE]) { return }
        guard String(validating: data, as: UTF8.self) == nil else { return }
        throw corrupt("an XML property list that is not valid UTF-8")
    }

    private static func corrupt(_ what: String) -> DecodingError {
        DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "The given data was not a valid property list: \(what)"))
    }

    /// Walks the offset table of a binary property list (the trailer's layout is Apple's
    /// `bplist00`); gives up, leaving the verdict to Foundation, at anything it cannot read.
    private static func binaryProblem(in bytes: UnsafeRawBufferPointer) -> String? {
        let trailer = bytes.count - 32
        guard trailer > 8 else { return nil }
        func integer(at offset: Int, size: Int) -> UInt64? {
            guard size >= 1, size <= 8, offset >= 0, offset <= bytes.count - size else { return nil }
            return bytes[offset..<offset + size].reduce(0) { $0 << 8 | UInt64($1) }
        }
        let offsetSize = Int(bytes[trailer + 6])
        let referenceSize = UInt64(bytes[trailer + 7])
        guard let objects = integer(at: trailer + 8, size: 8), let table = integer(at: trailer + 24, size: 8),
            objects <= UInt64(bytes.count), table <= UInt64(trailer)
        else { return nil }
        func objectMarker(_ reference: UInt64) -> UInt8? {
            guard reference < objects, let offset = integer(at: Int(table) + Int(reference) * offsetSize, size: offsetSize),
                offset < UInt64(trailer)
            else { return nil }
            return bytes[Int(offset)]
        }
        var budget = 8 * bytes.count
        for index in 0..<objects {
            guard let marker = objectMarker(index), let offset = integer(at: Int(table) + Int(index) * offsetSize, size: offsetSize)
            else { return nil }
            // Arrays (0xA), sets (0xC), dictionaries (0xD), UTF-16 strings (0x6): a count in the
            // marker's low bits, or 0xF and an integer object after it.
            let unit: UInt64
            switch marker >> 4 {
            case 0xA, 0xC: unit = referenceSize
            case 0xD: unit = 2 * referenceSize
            case 0x6: unit = 2
            default: continue
            }
            var count = UInt64(marker & 0x0F)
            var start = Int(offset) + 1
            if count == 0xF {
                guard start < bytes.count, bytes[start] >> 4 == 1 else { continue }
                let size = 1 << Int(bytes[start] & 0x0F)
                // Foundation reads only the last 8 bytes of a longer integer.
                guard let value = integer(at: start + 1 + max(0, size - 8), size: min(size, 8)) else { continue }
                count = value
                start += 1 + size
            }
            // With a reference size of 0 a count costs no bytes; it is still at most one per byte.
            let (needed, overflow) = count.multipliedReportingOverflow(by: max(unit, 1))
            if overflow || start > bytes.count || needed > UInt64(bytes.count - start) { return "a count larger than the file" }
            // A dictionary's keys: its first `count` references.
            // PropertyListSerialization crashes on any set, even one of strings.
            if marker >> 4 == 0xC { return "a set" }
            guard marker >> 4 == 0xD else { continue }
            // Objects may share their bytes: past a budget of references read, stop looking
            // rather than take quadratic time (found by fuzz-plist-codec as a hang).
            budget -= Int(count)
            if budget < 0 { return nil }
            for position in 0..<Int(count) {
                let at = start + position * Int(referenceSize)
                guard let reference = integer(at: at, size: Int(referenceSize)), let element = objectMarker(reference) else { continue }
                if [0xA, 0xC, 0xD].contains(element >> 4) { return "a dictionary key that is a collection" }
            }
        }
        return nil
    }
}
