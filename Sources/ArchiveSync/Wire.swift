import ArchiveStore
import CArchiveShims
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The protocol `archive-sync serve --stdio` speaks over a pipe: frames, and the binary
/// encoding of the messages inside them.
///
/// A frame is an 8-byte header, then its payload:
///
/// ```
///  0xA5 0x53  kind (1 byte)  0x00  payload length (4 bytes, big-endian)  payload
/// ```
///
/// The client sends one request frame and reads one reply frame, until it sends ``Kind/end``.
/// The first request is ``Kind/hello``, which names the protocol versions the client speaks;
/// the reply names the version the far side chose and its store's replica id. Integers in a
/// payload are unsigned LEB128 varints (zigzag for signed values), strings and byte blocks
/// a varint length and then the bytes. Every value read is checked: lengths, counts and
/// sizes against the caps below, ids with the same rules as keys.
package enum Wire {
    /// The protocol versions this build speaks. Version 2 adds ``Kind/mergeBases``: with a far
    /// side that speaks only 1, a field merge finds its base in the near side's history only.
    /// Version 3 adds live sessions (``Kind/watch``, ``Kind/ping``, ``Kind/changed``): a far
    /// side of 1 or 2 still serves one-shot syncs.
    package static let versions: ClosedRange<UInt32> = 1...3
    /// The first version with live sessions.
    package static let liveVersion: UInt32 = 3
    /// The largest payload a frame may carry; checked before anything is allocated.
    package static let maximumFrame = 64 << 20
    /// The largest object a sync carries between hosts (63 MiB): one object's bytes and the
    /// rest of its message (id, vector, hashes: at most about 80 KB) fit in one frame. A sync
    /// that would carry a larger one is refused before anything is written.
    package static let maximumObject = 63 << 20
    /// The most contents or writes one request carries, in bytes: well under a frame.
    package static let batchBytes = 16 << 20
    /// The most entries, ids, objects or merges one message carries.
    package static let maximumCount = 10_000
    static let magic: (UInt8, UInt8) = (0xA5, 0x53)

    /// One frame: the header, then `payload`, which must be at most ``maximumFrame`` bytes
    /// (``FrameChannel/send(_:_:)`` checks it, and throws, before calling this).
    package static func frame(_ kind: Kind, _ payload: [UInt8]) -> [UInt8] {
        precondition(payload.count <= maximumFrame, "a frame over the protocol's limit")
        var frame: [UInt8] = [magic.0, magic.1, kind.rawValue, 0]
        frame.reserveCapacity(8 + payload.count)
        let length = UInt32(payload.count)
        frame += [UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)]
        frame += payload
        return frame
    }

    /// The object limit in words, for messages.
    package static var describeObjectLimit: String {
        "the \(maximumObject >> 20) MiB (\(maximumObject) bytes) the sync protocol carries in one object between hosts"
    }

    /// At most the bytes an id takes in a message: a batch counts them, so that a batch of long
    /// keys stays within a frame.
    static func size(of id: ObjectID) -> Int { id.collection.utf8.count + id.key.utf8.count + 20 }

    /// At most the bytes a version vector takes in a message.
    static func size(of vector: VersionVector) -> Int { 80 * vector.counters.count + 10 }

    /// Reads a frame's 8-byte header: the kind of frame and the length of its payload.
    /// Throws ``WireError`` for bytes that are not a header of this protocol, an unknown kind,
    /// or a length over ``maximumFrame``.
    package static func header(_ header: [UInt8]) throws -> (kind: Kind, length: Int) {
        guard header.count == 8, header[0] == magic.0, header[1] == magic.1, header[3] == 0 else {
            let text = String(decoding: header.prefix(8).map { (32..<127).contains($0) ? $0 : UInt8(ascii: "?") }, as: UTF8.self)
            throw WireError("received bytes that are not a frame of the sync protocol (they begin \"\(text)\")")
        }
        guard let kind = Kind(rawValue: header[2]) else { throw WireError("received a frame of unknown kind \(header[2])") }
        let length = Int(header[4]) << 24 | Int(header[5]) << 16 | Int(header[6]) << 8 | Int(header[7])
        guard length <= maximumFrame else {
            throw WireError("received a frame of \(length) bytes, over the protocol's limit of \(maximumFrame)")
        }
        return (kind, length)
    }

    /// Decodes one whole frame from `bytes` (a header and exactly its payload), for tests and
    /// fuzzers: the checks ``FrameChannel/receive()`` makes.
    package static func decodeFrame(_ bytes: [UInt8]) throws -> (kind: Kind, payload: [UInt8]) {
        guard bytes.count >= 8 else { throw WireError("the connection closed in the middle of a frame (a truncated frame)") }
        let (kind, length) = try header(Array(bytes[0..<8]))
        guard bytes.count - 8 == length else {
            throw bytes.count - 8 < length
                ? WireError("the connection closed in the middle of a frame (a truncated frame)")
                : WireError("a frame has \(bytes.count - 8 - length) bytes left over after its end")
        }
        return (kind, Array(bytes[8...]))
    }

    /// What a frame holds.
    package enum Kind: UInt8, Sendable {
        case hello = 1
        case begin, end, makeCurrent, changeSequence, liveObjectCount, checkpoint, setCheckpoint, sequenceAfterOwnWrites
        case entriesAfter, entriesChanged, entriesFor, contents, apply, mergeVectors, mergeBases
        /// Version 3: the client asks the far side to watch its store for the session's life
        /// and to keep the link alive (see `WireLive.swift`).
        case watch
        /// A reply: the request was carried out; its results follow.
        case ok = 0x80
        /// A reply: the request failed; a message follows.
        case failure = 0x81
        /// Version 3, after ``watch``, either way and unanswered: the link is alive.
        case ping = 0x82
        /// Version 3, after ``watch``, far side to client, unsolicited: the far store's change
        /// sequence moved (the new sequence follows).
        case changed = 0x83
    }
}

/// A value that broke the protocol: the frame is refused and the session ends.
package struct WireError: Error, CustomStringConvertible, Sendable {
    package let description: String
    package init(_ description: String) { self.description = description }
}

// MARK: - Frames over file descriptors

/// Reads and writes frames on a pair of file descriptors (a pipe's ends, or stdin and stdout).
/// A reader that has gone makes a write fail with EPIPE; it never raises SIGPIPE, whatever the
/// process does with that signal.
package struct FrameChannel: Sendable {
    package let input: Int32
    package let output: Int32

    package init(input: Int32, output: Int32) {
        self.input = input
        self.output = output
    }

    /// Writes one frame. Throws ``WireError``, sending nothing, for a payload over the limit.
    package func send(_ kind: Wire.Kind, _ payload: [UInt8]) throws {
        guard payload.count <= Wire.maximumFrame else {
            throw WireError(
                "a message of \(payload.count) bytes is over the protocol's limit of \(Wire.maximumFrame) for a frame; nothing of it was sent")
        }
        let frame = Wire.frame(kind, payload)
        try frame.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = archive_write_nosigpipe(output, buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    throw ChannelClosed(midFrame: offset > 0, errno: errno)
                }
                offset += written
            }
        }
    }

    /// Reads one frame: its kind and payload. Throws ``ChannelClosed`` at end of input, and
    /// ``WireError`` for a header that is not the protocol's or a length over the limit.
    package func receive() throws -> (Wire.Kind, [UInt8]) {
        var header = [UInt8](repeating: 0, count: 8)
        try readExactly(&header, from: 0, startsFrame: true)
        let (kind, length) = try Wire.header(header)
        // The buffer grows with the bytes that arrive, so a header alone never costs a frame's
        // worth of memory.
        var payload = [UInt8](repeating: 0, count: min(length, 1 << 20))
        var filled = 0
        while true {
            try readExactly(&payload, from: filled, startsFrame: false)
            filled = payload.count
            if filled == length { return (kind, payload) }
            payload += [UInt8](repeating: 0, count: min(length, 2 * filled) - filled)
        }
    }

    /// Fills `buffer` from index `start` to its end.
    private func readExactly(_ buffer: inout [UInt8], from start: Int, startsFrame: Bool) throws {
        var offset = start
        while offset < buffer.count {
            let got = buffer.withUnsafeMutableBytes { read(input, $0.baseAddress! + offset, $0.count - offset) }
            if got < 0 {
                if errno == EINTR { continue }
                throw ChannelClosed(midFrame: true, errno: errno)
            }
            if got == 0 {
                if startsFrame && offset == 0 { throw ChannelClosed(midFrame: false, errno: 0) }
                throw WireError("the connection closed in the middle of a frame (a truncated frame)")
            }
            offset += got
        }
    }
}

/// The other end of the pipe went away.
package struct ChannelClosed: Error, Sendable {
    /// True when it went away in the middle of a frame.
    package let midFrame: Bool
    package let errno: Int32
}

// MARK: - Encoding

/// Builds a payload.
package struct WireWriter: Sendable {
    package private(set) var bytes: [UInt8] = []

    package init() {}

    package mutating func byte(_ value: UInt8) { bytes.append(value) }
    /// Appends another payload's bytes.
    package mutating func append(_ other: WireWriter) { bytes += other.bytes }
    package mutating func bool(_ value: Bool) { bytes.append(value ? 1 : 0) }

    package mutating func unsigned(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(value & 0x7F) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    /// A count, size or sequence number: never negative.
    package mutating func count(_ value: Int) { unsigned(UInt64(max(0, value))) }
    package mutating func signed(_ value: Int64) { unsigned(UInt64(bitPattern: (value << 1) ^ (value >> 63))) }

    package mutating func string(_ value: String) {
        let utf8 = value.utf8
        count(utf8.count)
        bytes.append(contentsOf: utf8)
    }

    package mutating func data(_ value: Data) {
        count(value.count)
        bytes.append(contentsOf: value)
    }

    package mutating func id(_ id: ObjectID) {
        string(id.collection)
        string(id.key)
    }

    package mutating func hash(_ hash: ContentHash?) {
        guard let hash else { return bool(false) }
        bool(true)
        bytes.append(contentsOf: hash.bytes)
    }

    package mutating func replica(_ replica: ReplicaID) { string(replica.rawValue) }

    package mutating func vector(_ vector: VersionVector) {
        count(vector.counters.count)
        for (replica, counter) in vector.counters.sorted(by: { $0.key < $1.key }) {
            self.replica(replica)
            count(counter)
        }
    }

    package mutating func entry(_ entry: ReplicaEntry) {
        id(entry.id)
        string(entry.file)
        vector(entry.vector)
        hash(entry.hash)
        count(entry.size)
        signed(entry.modified)
        replica(entry.author)
        bool(entry.isDeleted)
        count(entry.sequence)
    }
}

/// Reads a payload, checking every value.
package struct WireReader: Sendable {
    private let bytes: [UInt8]
    private var offset = 0

    package init(_ bytes: [UInt8]) { self.bytes = bytes }

    /// Throws unless every byte was read: trailing bytes are a malformed message.
    package func finish() throws {
        guard offset == bytes.count else { throw WireError("a message has \(bytes.count - offset) bytes left over after its end") }
    }

    package mutating func byte() throws -> UInt8 {
        guard offset < bytes.count else { throw WireError("a message ends early") }
        defer { offset += 1 }
        return bytes[offset]
    }

    package mutating func bool() throws -> Bool {
        switch try byte() {
        case 0: return false
        case 1: return true
        case let other: throw WireError("a message holds \(other) where a flag (0 or 1) belongs")
        }
    }

    package mutating func unsigned() throws -> UInt64 {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let next = try byte()
            guard shift < 63 || (shift == 63 && next <= 1) else { throw WireError("a message holds a number over 64 bits") }
            value |= UInt64(next & 0x7F) << shift
            if next & 0x80 == 0 { return value }
            shift += 7
        }
    }

    /// A count, size or sequence number: 0 through `limit`.
    package mutating func count(max limit: Int = Int(Int64.max / 2), _ what: String) throws -> Int {
        let value = try unsigned()
        guard value <= UInt64(max(0, limit)) else { throw WireError("a message gives \(value) as \(what), over the limit of \(limit)") }
        return Int(value)
    }

    package mutating func signed() throws -> Int64 {
        let raw = try unsigned()
        return Int64(bitPattern: raw >> 1) ^ -Int64(bitPattern: raw & 1)
    }

    package mutating func rawBytes(_ count: Int) throws -> ArraySlice<UInt8> {
        guard count >= 0, count <= bytes.count - offset else { throw WireError("a message ends early") }
        defer { offset += count }
        return bytes[offset..<offset + count]
    }

    package mutating func string(max limit: Int = ObjectID.maximumLength, _ what: String) throws -> String {
        let length = try count(max: limit, "the length of \(what)")
        guard let text = String(validating: try rawBytes(length), as: UTF8.self) else {
            throw WireError("\(what) in a message is not valid UTF-8")
        }
        return text
    }

    package mutating func data(max limit: Int = Wire.maximumObject) throws -> Data {
        Data(try rawBytes(try count(max: limit, "the size of an object")))
    }

    package mutating func id() throws -> ObjectID {
        let collection = try string("a collection")
        let key = try string("a key")
        do {
            return try ObjectID(collection: collection, key: key)
        } catch {
            throw WireError("a message names an object the store cannot hold: \(error)")
        }
    }

    package mutating func hash() throws -> ContentHash? {
        guard try bool() else { return nil }
        guard let hash = ContentHash(digest: Data(try rawBytes(32))) else { throw WireError("a message holds a malformed hash") }
        return hash
    }

    /// A replica id: 1 to 64 letters, digits, `-`, `_` or `.` (nothing the manifest's vector
    /// form uses as a separator).
    package mutating func replica() throws -> ReplicaID {
        let text = try string(max: 64, "a replica id")
        guard !text.isEmpty, text.utf8.allSatisfy({ Self.replicaCharacters.contains($0) }) else {
            throw WireError("a message holds a malformed replica id")
        }
        return ReplicaID(rawValue: text)
    }

    private static let replicaCharacters = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.".utf8)

    package mutating func vector() throws -> VersionVector {
        var counters: [ReplicaID: Int] = [:]
        for _ in 0..<(try count(max: 1_000, "the size of a version vector")) {
            let replica = try replica()
            counters[replica] = try count("a version counter")
        }
        return VersionVector(counters)
    }

    /// A file name in a collection's directory: no `/`, no NUL, not `.` or `..`, at most 255 bytes.
    package mutating func fileName() throws -> String {
        let file = try string(max: 255, "a file name")
        guard !file.contains("/"), !file.contains("\0"), file != ".", file != ".." else {
            throw WireError("a message names a file outside its collection's directory")
        }
        return file
    }

    package mutating func fileExtension() throws -> String {
        let ext = try string(max: 16, "a file extension")
        guard ArchiveCodec(fileExtension: ext) != nil else { throw WireError("a message names the file extension '\(ext)', which names no codec") }
        return ext
    }

    package mutating func entry() throws -> ReplicaEntry {
        let id = try id()
        let file = try fileName()
        let vector = try vector()
        let hash = try hash()
        let size = try count(max: Int(Int64.max / 2), "an object's size")
        let modified = try signed()
        let author = try replica()
        let deleted = try bool()
        let sequence = try count("a change sequence")
        guard deleted || hash != nil else { throw WireError("a message holds a live object without a hash") }
        return ReplicaEntry(
            id: id, file: file, vector: vector, hash: deleted ? nil : hash, size: size, modified: modified, author: author,
            isDeleted: deleted, sequence: sequence)
    }

    /// A list of `what`, at most ``Wire/maximumCount`` long.
    package mutating func list<T>(_ what: String, _ element: (inout WireReader) throws -> T) throws -> [T] {
        let n = try count(max: Wire.maximumCount, "the number of \(what)")
        var result: [T] = []
        result.reserveCapacity(n)
        for _ in 0..<n { result.append(try element(&self)) }
        return result
    }
}
