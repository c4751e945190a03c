import Foundation

/// A write in flight: recorded before its temp file exists, removed when the manifest has
/// recorded the write. One left behind by a dead process tells the next open exactly which
/// temp files to remove and which objects to reconcile.
struct WriteIntent: Sendable {
    struct Entry: Codable, Sendable, Equatable {
        var collection: String
        var key: String
        /// The file to write, or "" for a delete.
        var file: String
        var temp: String?
        /// The new contents' hash: finding it in `file` tells recovery that the rename happened
        /// (an intent written before its commit; a committed one leaves it out).
        var hash: ContentHash?
        var schemaVersion: Int?
        /// A sync's write: the version as its other replica recorded it, which recovery
        /// records too (rather than taking a landed sync write for this replica's own edit).
        var vector: VersionVector? = nil
        var modified: Int64? = nil
        var author: ReplicaID? = nil
        /// True in a *committed* intent: recorded in the same commit as its writes, whose
        /// files were put in place after it without a flush, and dropped once a `syncfs` has
        /// made them durable (Durability.swift).
        var committed: Bool? = nil
        /// In a committed intent: the hash the object's file held before the write, which
        /// recovery takes for a rename a power cut lost.
        var previous: ContentHash? = nil
        /// In a committed intent: the object's file under another name that the write removed
        /// (a change of codec), which a power cut may have kept.
        var replaced: String? = nil

        /// The sync's version this write carries, if it is a sync's.
        var incoming: ReplicatedVersion? {
            guard let vector, let modified, let author else { return nil }
            return ReplicatedVersion(vector: vector, modified: modified, author: author)
        }
    }

    var id: Int64
    var owner: ProcessIdentity
    /// nil when the recorded entries cannot be read, or name something no write of the store
    /// makes (an invalid id, a file that is not the key's, a temp name that is not one): a
    /// damaged manifest's record, which recovery must not follow by name.
    var entries: [Entry]?
    /// A *settle period*'s intent: its owner's commits with a change sequence after this one
    /// put their files in place without a flush and without an intent of their own, until
    /// the owner's next settle (Durability.swift). Its entries are empty: recovery checks
    /// every object changed after it.
    var after: Int? = nil

    /// What a settle period's row holds where other intents hold their entries.
    static let settlePeriodEntries = "settle period"

    /// Whether this is a committed intent (``Entry/committed``): its writes are recorded, and
    /// recovery puts their files back from the manifest rather than reconciling them.
    var isCommitted: Bool { entries?.first?.committed == true }
}

extension WriteIntent.Entry {
    /// Whether this entry names only what a write of the store makes: a valid id, the key's
    /// own file name (or "" for a delete) and a temp file name, each one name in the
    /// collection's directory.
    var isWellFormed: Bool {
        guard ObjectID.problem(with: collection, isCollection: true) == nil, ObjectID.problem(with: key, isCollection: false) == nil
        else { return false }
        if !file.isEmpty, FileName.problem(withFile: file, ofKey: key) != nil { return false }
        if let temp, !temp.hasPrefix(FileName.tempPrefix) || temp.contains("/") { return false }
        if let replaced, FileName.problem(withFile: replaced, ofKey: key) != nil { return false }
        return true
    }

    /// `entries` as the JSON that `JSONEncoder` makes of them (nil fields left out), written
    /// directly: a sync records an intent of 1,000 entries per page, and `JSONEncoder` took 6%
    /// of a first sync's time doing it. Read back with `JSONDecoder`.
    static func json(_ entries: [Self]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(entries.count * 256)
        func string(_ value: String) {
            out.append(UInt8(ascii: "\""))
            // Names and keys rarely need an escape: copied whole, not byte by byte (every save
            // writes an intent).
            if !value.utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
                out.append(contentsOf: value.utf8)
                out.append(UInt8(ascii: "\""))
                return
            }
            for byte in value.utf8 {
                switch byte {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                    out += [UInt8(ascii: "\\"), byte]
                case 0..<0x20:
                    out += Array("\\u00".utf8) + [hexDigits[Int(byte >> 4)], hexDigits[Int(byte & 0xF)]]
                default:
                    out.append(byte)
                }
            }
            out.append(UInt8(ascii: "\""))
        }
        func field(_ name: StaticString, first: Bool = false) {
            if !first { out.append(UInt8(ascii: ",")) }
            out.append(UInt8(ascii: "\""))
            out.append(contentsOf: UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
            out.append(UInt8(ascii: "\""))
            out.append(UInt8(ascii: ":"))
        }
        func hex(_ hash: ContentHash) {
            out.append(UInt8(ascii: "\""))
            hash.appendHex(to: &out)
            out.append(UInt8(ascii: "\""))
        }
        out.append(UInt8(ascii: "["))
        for (index, entry) in entries.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            out.append(UInt8(ascii: "{"))
            field("collection", first: true)
            string(entry.collection)
            field("key")
            string(entry.key)
            field("file")
            string(entry.file)
            if let temp = entry.temp {
                field("temp")
                string(temp)
            }
            if let hash = entry.hash {
                field("hash")
                hex(hash)
            }
            if let schemaVersion = entry.schemaVersion {
                field("schemaVersion")
                out += Array(String(schemaVersion).utf8)
            }
            if let vector = entry.vector {
                field("vector")
                out.append(UInt8(ascii: "{"))
                for (position, (replica, counter)) in vector.counters.enumerated() {
                    if position > 0 { out.append(UInt8(ascii: ",")) }
                    string(replica.rawValue)
                    out.append(UInt8(ascii: ":"))
                    out += Array(String(counter).utf8)
                }
                out.append(UInt8(ascii: "}"))
            }
            if let modified = entry.modified {
                field("modified")
                out += Array(String(modified).utf8)
            }
            if let author = entry.author {
                field("author")
                string(author.rawValue)
            }
            if entry.committed == true {
                field("committed")
                out += Array("true".utf8)
            }
            if let previous = entry.previous {
                field("previous")
                hex(previous)
            }
            if let replaced = entry.replaced {
                field("replaced")
                string(replaced)
            }
            out.append(UInt8(ascii: "}"))
        }
        out.append(UInt8(ascii: "]"))
        return String(decoding: out, as: UTF8.self)
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)
}
