import Foundation

/// Reads the binary property list format (`bplist00`): a header, the objects, an offset table
/// giving where each object starts, and a 32-byte trailer that sizes the rest.
///
/// Every length, offset and object reference is checked against the file before it is used,
/// and objects are read one by one from the offset table, so no input can make it read out of
/// bounds, recurse, or allocate more than the file's size suggests.
enum BinaryPropertyListReader {
    static func read(_ data: Data) throws(KeyedArchiveError) -> PropertyListTable {
        let bytes = [UInt8](data)
        var reader = Reader(bytes: bytes)
        return try reader.readTable()
    }

    private struct Reader {
        let bytes: [UInt8]
        var objectCount = 0
        var referenceSize = 0

        init(bytes: [UInt8]) { self.bytes = bytes }

        mutating func readTable() throws(KeyedArchiveError) -> PropertyListTable {
            let headerSize = 8
            let trailerSize = 32
            guard bytes.count >= headerSize + trailerSize + 1 else {
                throw .notAPropertyList("a binary property list of \(bytes.count) bytes is too short to hold a trailer (truncated?)")
            }
            guard bytes[6] == UInt8(ascii: "0") || bytes[6] == UInt8(ascii: "1") else {
                throw .notAPropertyList("unknown binary property list version")
            }
            let trailer = bytes.count - trailerSize
            let offsetSize = Int(bytes[trailer + 6])
            referenceSize = Int(bytes[trailer + 7])
            let count = uint(at: trailer + 8, size: 8)
            let top = uint(at: trailer + 16, size: 8)
            let tableOffset = uint(at: trailer + 24, size: 8)
            guard (1...8).contains(offsetSize), (1...8).contains(referenceSize) else {
                throw .notAPropertyList("the trailer's integer sizes are invalid (truncated or not a property list)")
            }
            // Each object takes at least one byte between the header and the offset table.
            guard count >= 1, tableOffset >= UInt64(headerSize), tableOffset <= UInt64(trailer),
                count <= UInt64(trailer) - tableOffset, count <= (UInt64(trailer) - tableOffset) / UInt64(offsetSize),
                count <= tableOffset - UInt64(headerSize) + 1, top < count
            else {
                throw .notAPropertyList("the trailer does not describe this file (truncated or not a property list)")
            }
            objectCount = Int(count)
            var nodes: [PropertyListNode] = []
            nodes.reserveCapacity(objectCount)
            let table = Int(tableOffset)
            for index in 0..<objectCount {
                let offset = uint(at: table + index * offsetSize, size: offsetSize)
                guard offset >= UInt64(headerSize), offset < tableOffset else {
                    throw .notAPropertyList("object \(index) starts outside the object area")
                }
                nodes.append(try readObject(at: Int(offset), end: table, index: index))
            }
            return PropertyListTable(nodes: nodes, top: Int(top))
        }

        /// A big-endian unsigned integer of `size` (at most 8) bytes; the caller checked the bounds.
        func uint(at offset: Int, size: Int) -> UInt64 {
            var value: UInt64 = 0
            for i in 0..<size { value = value << 8 | UInt64(bytes[offset + i]) }
            return value
        }

        func need(_ offset: Int, _ length: Int, end: Int, index: Int) throws(KeyedArchiveError) {
            guard length >= 0, offset <= end, length <= end - offset else {
                throw .notAPropertyList("object \(index) runs past the end of the object area (truncated?)")
            }
        }

        /// The length in a marker's low nibble, or the integer object that follows it when the nibble is 0xF.
        func length(_ info: UInt8, at offset: inout Int, end: Int, index: Int) throws(KeyedArchiveError) -> Int {
            if info != 0x0F { return Int(info) }
            try need(offset, 1, end: end, index: index)
            let marker = bytes[offset]
            guard marker >> 4 == 0x1, marker & 0x0F <= 3 else { throw .notAPropertyList("object \(index) has an invalid length") }
            let size = 1 << Int(marker & 0x0F)
            try need(offset + 1, size, end: end, index: index)
            let value = uint(at: offset + 1, size: size)
            offset += 1 + size
            guard value <= UInt64(end - offset) else { throw .notAPropertyList("object \(index) claims more bytes than the file has") }
            return Int(value)
        }

        func references(at offset: Int, count: Int, end: Int, index: Int) throws(KeyedArchiveError) -> [Int] {
            guard count <= (end - offset) / referenceSize else {
                throw .notAPropertyList("object \(index) claims more references than the file has")
            }
            var result: [Int] = []
            result.reserveCapacity(count)
            for i in 0..<count {
                let reference = uint(at: offset + i * referenceSize, size: referenceSize)
                guard reference < UInt64(objectCount) else {
                    throw .notAPropertyList("object \(index) refers to object \(reference), past the last (\(objectCount - 1))")
                }
                result.append(Int(reference))
            }
            return result
        }

        func readObject(at start: Int, end: Int, index: Int) throws(KeyedArchiveError) -> PropertyListNode {
            let marker = bytes[start]
            let info = marker & 0x0F
            var offset = start + 1
            switch marker >> 4 {
            case 0x0:
                switch info {
                case 0x0: return .null
                case 0x8: return .bool(false)
                case 0x9: return .bool(true)
                default: throw .notAPropertyList("object \(index) has an unknown marker 0x\(String(marker, radix: 16))")
                }
            case 0x1:
                guard info <= 4 else { throw .notAPropertyList("object \(index) is an integer of an invalid size") }
                let size = 1 << Int(info)
                try need(offset, size, end: end, index: index)
                if size == 16 {
                    let high = uint(at: offset, size: 8)
                    let low = uint(at: offset + 8, size: 8)
                    if high == 0, low <= UInt64(Int64.max) { return .integer(Int64(low)) }
                    if high == 0 { return .real(Double(low)) }  // beyond Int64: kept as the nearest Double
                    if high == UInt64.max, low > UInt64(Int64.max) { return .integer(Int64(bitPattern: low)) }
                    throw .notAPropertyList("object \(index) is an integer wider than 64 bits")
                }
                let value = uint(at: offset, size: size)
                return .integer(size == 8 ? Int64(bitPattern: value) : Int64(value))
            case 0x2:
                switch info {
                case 2:
                    try need(offset, 4, end: end, index: index)
                    return .real(Double(Float(bitPattern: UInt32(uint(at: offset, size: 4)))))
                case 3:
                    try need(offset, 8, end: end, index: index)
                    return .real(Double(bitPattern: uint(at: offset, size: 8)))
                default: throw .notAPropertyList("object \(index) is a real of an invalid size")
                }
            case 0x3:
                guard info == 3 else { throw .notAPropertyList("object \(index) is a date of an invalid size") }
                try need(offset, 8, end: end, index: index)
                return .date(Double(bitPattern: uint(at: offset, size: 8)))
            case 0x4:
                let count = try length(info, at: &offset, end: end, index: index)
                try need(offset, count, end: end, index: index)
                return .data(Data(bytes[offset..<offset + count]))
            case 0x5:
                let count = try length(info, at: &offset, end: end, index: index)
                try need(offset, count, end: end, index: index)
                return .string(String(decoding: bytes[offset..<offset + count], as: UTF8.self))
            case 0x6:
                let count = try length(info, at: &offset, end: end, index: index)
                guard count <= (end - offset) / 2 else { throw .notAPropertyList("object \(index) runs past the end of the object area") }
                var units: [UInt16] = []
                units.reserveCapacity(count)
                for i in 0..<count { units.append(UInt16(bytes[offset + 2 * i]) << 8 | UInt16(bytes[offset + 2 * i + 1])) }
                return .string(String(decoding: units, as: UTF16.self))
            case 0x7:
                let count = try length(info, at: &offset, end: end, index: index)
                try need(offset, count, end: end, index: index)
                return .string(String(decoding: bytes[offset..<offset + count], as: UTF8.self))
            case 0x8:
                let size = Int(info) + 1
                guard size <= 8 else { throw .notAPropertyList("object \(index) is a UID wider than 64 bits") }
                try need(offset, size, end: end, index: index)
                let value = uint(at: offset, size: size)
                return .uid(value <= UInt64(Int.max) ? Int(value) : Int.max)
            case 0xA, 0xB, 0xC:
                let count = try length(info, at: &offset, end: end, index: index)
                let elements = try references(at: offset, count: count, end: end, index: index)
                return marker >> 4 == 0xA ? .array(elements) : .set(elements)
            case 0xD:
                let count = try length(info, at: &offset, end: end, index: index)
                guard count <= Int.max / 2 else { throw .notAPropertyList("object \(index) is too large") }
                let both = try references(at: offset, count: 2 * count, end: end, index: index)
                return .dictionary(keys: Array(both[0..<count]), values: Array(both[count...]))
            default:
                throw .notAPropertyList("object \(index) has an unknown marker 0x\(String(marker, radix: 16))")
            }
        }
    }
}
