import Crypto
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The on-disk name rules, in one place: how a key or a collection name becomes a file or
/// directory name, and back.
///
/// - Bytes a file name cannot hold or that would change its meaning are percent-encoded as
///   `%XX` (upper-case hex): `/`, NUL, control bytes (0x01–0x1F, 0x7F), `%` itself, and a
///   leading `.` (so no name is ever `.`, `..`, hidden, or a reserved temp name).
/// - Every other byte, including any non-ASCII UTF-8, is kept, so names stay readable.
/// - A name longer than ``maximumStemBytes`` keeps a readable prefix and ends in `%~` and 32
///   hex digits of the key's SHA-256. `%~` never appears in a short name, so the two forms
///   cannot collide; the real key of a long name is in the manifest.
enum FileName {
    /// Longest encoded name kept whole; leaves room for `.` and an extension within 255 bytes.
    static let maximumStemBytes = 240
    /// Length of the readable prefix kept in a long name.
    static let longPrefixBytes = 190
    /// Marks a long (hashed) name.
    static let longMarker = "%~"
    /// Temp files start with this; the store, scans and sync ignore and clean them.
    static let tempPrefix = ".archive-sync-tmp."
    /// Store metadata lives in this directory at the root of a store.
    static let metadataDirectory = ".archive-sync"

    private static let hexDigits = Array("0123456789ABCDEF".utf8)

    /// The file-name stem for `key`: reversible for short keys, prefix + hash for long ones.
    static func encode(_ key: String) -> String {
        // Most keys need no escape: return them as they are, without copying.
        var first = true
        if key.utf8.count <= maximumStemBytes,
            !key.utf8.contains(where: { byte in
                defer { first = false }
                return needsEscape(byte, first: first)
            })
        {
            return key
        }
        var out: [UInt8] = []
        out.reserveCapacity(key.utf8.count)
        first = true
        for byte in key.utf8 {
            if needsEscape(byte, first: first) {
                out.append(UInt8(ascii: "%"))
                out.append(hexDigits[Int(byte >> 4)])
                out.append(hexDigits[Int(byte & 0xF)])
            } else {
                out.append(byte)
            }
            first = false
        }
        if out.count <= maximumStemBytes {
            return String(decoding: out, as: UTF8.self)
        }
        var cut = longPrefixBytes
        // Never split an escape (`%XX`) or a multi-byte UTF-8 character.
        while cut > 0, out[cut] & 0xC0 == 0x80 { cut -= 1 }
        if cut >= 1, out[cut - 1] == UInt8(ascii: "%") {
            cut -= 1
        } else if cut >= 2, out[cut - 2] == UInt8(ascii: "%") {
            cut -= 2
        }
        let digest = SHA256.hash(data: Data(key.utf8))
        let hex = digest.prefix(16).map { String(format: "%02x", $0) }.joined()
        return String(decoding: out[..<cut], as: UTF8.self) + longMarker + hex
    }

    /// The key a stem encodes, or nil when the stem is a long (hashed) name or is not one
    /// that ``encode(_:)`` would produce.
    static func decode(_ stem: Substring) -> String? {
        guard !stem.isEmpty, !stem.contains(longMarker) else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(stem.utf8.count)
        var iterator = stem.utf8.makeIterator()
        while let byte = iterator.next() {
            if byte == UInt8(ascii: "%") {
                guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else {
                    return nil
                }
                bytes.append(high << 4 | low)
            } else {
                bytes.append(byte)
            }
        }
        guard let key = String(validating: bytes, as: UTF8.self) else { return nil }
        // Only canonical names count: `%41` for `A` is not a name the store writes.
        return encode(key) == stem ? key : nil
    }

    /// `stem.ext`, or `stem` alone when there is no extension.
    static func join(stem: String, extension ext: String) -> String {
        ext.isEmpty ? stem : stem + "." + ext
    }

    /// Splits a file name at its last `.` into stem and extension.
    static func split(_ name: String) -> (stem: Substring, extension: Substring) {
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex else {
            return (name[...], "")
        }
        return (name[..<dot], name[name.index(after: dot)...])
    }

    /// Why `file` is not a name a write of the store gives `key`'s file (one name in its
    /// collection's directory, whose stem encodes the key), or nil when it is: "is empty",
    /// "is not one name in its collection's directory"... A manifest row
    /// or intent failing this is damaged, and its name is never followed.
    static func problem(withFile file: String, ofKey key: String) -> String? {
        if file.isEmpty { return "is empty" }
        if file.utf8.contains(UInt8(ascii: "/")) || file.utf8.contains(0) { return "is not one name in its collection's directory" }
        if split(file).stem != encode(key) { return "is not the name the key gives its file" }
        return nil
    }

    /// A name as people read it: its UTF-8 as it is, and each byte that is not part of a UTF-8
    /// character as `\xff`. The store cannot name such a file, only report it.
    static func readable(_ name: some Collection<UInt8>) -> String {
        let bytes = Array(name)
        var text = ""
        var offset = 0
        var iterator = bytes.makeIterator()
        var parser = Unicode.UTF8.ForwardParser()
        while true {
            switch parser.parseScalar(from: &iterator) {
            case .valid(let encoded):
                text.unicodeScalars.append(Unicode.UTF8.decode(encoded))
                offset += encoded.count
            case .error(let length):
                // Never ASCII (which is always valid), so always two hex digits.
                for byte in bytes[offset..<offset + length] { text += "\\x" + String(byte, radix: 16) }
                offset += length
            case .emptyInput:
                return text
            }
        }
    }

    /// True for names that are never objects: dot files, including temp files and `.archive-sync`.
    static func isReserved(_ name: String) -> Bool {
        isReserved(name.utf8)
    }

    /// ``isReserved(_:)`` of a name's UTF-8 bytes.
    static func isReserved(_ name: some Collection<UInt8>) -> Bool {
        name.first == UInt8(ascii: ".")
    }

    private static func needsEscape(_ byte: UInt8, first: Bool) -> Bool {
        byte < 0x20 || byte == 0x7F || byte == UInt8(ascii: "/") || byte == UInt8(ascii: "%")
            || (first && byte == UInt8(ascii: "."))
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}

/// A name compared and hashed byte for byte.
///
/// Swift's `String` equality is canonical equivalence: `"\u{E9}" == "e\u{301}"`. File names and
/// keys are bytes (the manifest compares them as bytes too), and those are two files and two
/// keys, so every dictionary or set of names in the store is keyed by `ExactName`.
struct ExactName: Hashable, Sendable, CustomStringConvertible {
    let string: String

    init(_ string: String) { self.string = string }

    var description: String { string }

    static func == (lhs: ExactName, rhs: ExactName) -> Bool {
        guard lhs.string.utf8.count == rhs.string.utf8.count else { return false }
        var left = lhs.string
        var right = rhs.string
        return left.withUTF8 { l in right.withUTF8 { r in l.count == 0 || memcmp(l.baseAddress!, r.baseAddress!, l.count) == 0 } }
    }

    func hash(into hasher: inout Hasher) {
        var copy = string
        copy.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }
}
