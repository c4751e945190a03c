#if canImport(Glibc)
    import Glibc
#endif

/// The names of one directory's entries, each NUL-terminated in one buffer, with an index from
/// name to position.
///
/// A scan of a large collection handles every name several times (list, stat, look up its
/// manifest row): one buffer instead of a `String` per name keeps that to a few bytes a name,
/// hands `fstatat` a C string without a copy, and finds a row's file by its bytes as SQLite
/// returns them. Names are compared byte for byte, as the file system does (see `ExactName`).
struct NameList: Sendable {
    private var bytes: [UInt8] = []
    private var starts: [Int32] = []
    /// Open addressing, linear probing. A slot holds the name's hash in its high 32 bits (to
    /// skip most byte comparisons) and its position + 1 in the low 32, or 0 when empty.
    private var slots: [UInt64] = []

    var count: Int { starts.count }
    var indices: Range<Int> { 0..<count }

    /// Seeds the hash per process, so that names chosen to collide cannot be prepared ahead.
    private static let seed = UInt64.random(in: .min ... .max) | 1

    /// Adds a name (its bytes, without a NUL).
    mutating func append(_ name: UnsafeBufferPointer<UInt8>) {
        starts.append(Int32(bytes.count))
        bytes.append(contentsOf: name)
        bytes.append(0)
    }

    /// The name at `index`, as a `String`.
    func name(_ index: Int) -> String {
        withName(index) { String(decoding: $0, as: UTF8.self) }
    }

    /// Calls `body` with the bytes of the name at `index`, without its NUL (which follows them).
    func withName<R>(_ index: Int, _ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R {
        let start = Int(starts[index])
        let end = index + 1 < starts.count ? Int(starts[index + 1]) - 1 : bytes.count - 1
        return try bytes.withUnsafeBufferPointer { try body(UnsafeBufferPointer(rebasing: $0[start..<end])) }
    }

    /// Builds the index that ``index(of:)`` searches. Call once, after the last `append`.
    mutating func buildIndex() {
        var capacity = 16
        while capacity < count * 2 { capacity <<= 1 }
        let mask = capacity - 1
        var slots = [UInt64](repeating: 0, count: capacity)
        for index in indices {
            let hash = withName(index) { Self.hash($0) }
            var slot = Int(truncatingIfNeeded: hash) & mask
            while slots[slot] != 0 { slot = (slot + 1) & mask }
            slots[slot] = hash & 0xFFFF_FFFF_0000_0000 | UInt64(index + 1)
        }
        self.slots = slots
    }

    /// The position of the name with exactly these bytes, or nil.
    func index(of name: UnsafeBufferPointer<UInt8>) -> Int? {
        guard !slots.isEmpty else { return nil }
        let hash = Self.hash(name)
        let tag = hash & 0xFFFF_FFFF_0000_0000
        return slots.withUnsafeBufferPointer { slots in
            bytes.withUnsafeBufferPointer { bytes in
                let mask = slots.count - 1
                var slot = Int(truncatingIfNeeded: hash) & mask
                while slots[slot] != 0 {
                    if slots[slot] & 0xFFFF_FFFF_0000_0000 == tag {
                        let index = Int(slots[slot] & 0xFFFF_FFFF) - 1
                        let start = Int(starts[index])
                        // The stored name is followed by its NUL: equal lengths and bytes, then a NUL.
                        if start + name.count < bytes.count, bytes[start + name.count] == 0,
                            name.count == 0 || memcmp(bytes.baseAddress! + start, name.baseAddress!, name.count) == 0
                        {
                            return index
                        }
                    }
                    slot = (slot + 1) & mask
                }
                return nil
            }
        }
    }

    /// FNV-1a over the bytes from a per-process basis, then mixed (MurmurHash3's finalizer) so
    /// that the low bits, which pick the slot, depend on every byte.
    private static func hash(_ name: UnsafeBufferPointer<UInt8>) -> UInt64 {
        var hash = seed
        for byte in name { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        hash = (hash ^ (hash >> 33)) &* 0xff51_afd7_ed55_8ccd
        hash = (hash ^ (hash >> 33)) &* 0xc4ce_b9fe_1a85_ec53
        return hash ^ (hash >> 33)
    }
}
