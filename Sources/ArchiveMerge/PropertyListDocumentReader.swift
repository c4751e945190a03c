import Foundation

extension Document {
    /// Reads a property list, binary (`bplist00`, what the store's codec writes) or XML, into a
    /// tree.
    ///
    /// Binary lists are read here, with every offset and count checked against the bytes, so
    /// no input traps (Foundation's reader traps on some, see `PropertyListGuard` in
    /// ArchiveStore). An XML list must be UTF-8 and no deeper than `limits.depth`; Foundation
    /// parses it, and its binary form is read here. Refused with a ``DocumentError``: sets, UIDs,
    /// nulls, dictionary keys that are not strings, two keys that `PropertyListDecoder` would
    /// take for one in a binary list (in XML, Foundation keeps the last of them, as
    /// `PropertyListDecoder` does), nesting deeper than `limits.depth`, more than
    /// `limits.values` values.
    public init(propertyList data: Data, limits: DocumentLimits = .standard) throws(DocumentError) {
        if data.starts(with: "bplist0".utf8) {
            var reader = try BinaryPropertyListReader(bytes: [UInt8](data), limits: limits)
            self = try reader.readDocument()
            return
        }
        guard let text = String(validating: data, as: UTF8.self) else {
            throw DocumentError("an XML property list must be UTF-8")
        }
        // Foundation would also read the old text format (`b` is the string "b"), which the store
        // never writes.
        guard text.drop(while: \.isWhitespace).hasPrefix("<") else {
            throw DocumentError("the property list is neither binary nor XML")
        }
        try Self.checkXMLDepth(text, limit: limits.depth)
        let binary: Data
        do {
            let list = try PropertyListSerialization.propertyList(from: data, options: [], format: nil)
            binary = try PropertyListSerialization.data(fromPropertyList: list, format: .binary, options: 0)
        } catch {
            throw DocumentError("the property list is not valid: \(error.localizedDescription)")
        }
        var reader = try BinaryPropertyListReader(bytes: [UInt8](binary), limits: limits)
        self = try reader.readDocument()
    }

    /// Counts `<array>` and `<dict>` nesting before Foundation's recursive parser sees the text.
    private static func checkXMLDepth(_ text: String, limit: Int) throws(DocumentError) {
        var depth = 0
        var rest = Substring(text)
        while let open = rest.firstIndex(of: "<") {
            rest = rest[rest.index(after: open)...]
            let closing = rest.hasPrefix("/")
            let name = rest.drop { $0 == "/" }.prefix { $0.isLetter }
            guard name == "array" || name == "dict" else { continue }
            let tagEnd = rest.firstIndex(of: ">") ?? rest.endIndex
            if rest[..<tagEnd].hasSuffix("/") { continue }
            depth += closing ? -1 : 1
            guard depth <= limit else { throw DocumentError("the property list nests deeper than \(limit) levels") }
        }
    }
}

/// A reader of Apple's `bplist00` format: a header, objects, an offset table, a 32-byte trailer.
struct BinaryPropertyListReader {
    private let bytes: [UInt8]
    private let limits: DocumentLimits
    private let offsetSize: Int
    private let referenceSize: Int
    private let objectCount: Int
    private let topObject: Int
    private let tableStart: Int
    private let trailerStart: Int
    private var valuesLeft: Int
    /// Objects can share bytes: one long string referenced a million times must not take a
    /// million copies' memory.
    private var textBytesLeft: Int

    init(bytes: [UInt8], limits: DocumentLimits) throws(DocumentError) {
        self.bytes = bytes
        self.limits = limits
        trailerStart = bytes.count - 32
        guard trailerStart >= 8 else { throw DocumentError("the binary property list is too short") }
        offsetSize = Int(bytes[trailerStart + 6])
        referenceSize = Int(bytes[trailerStart + 7])
        func field(_ at: Int) -> UInt64 { bytes[at..<at + 8].reduce(0) { $0 << 8 | UInt64($1) } }
        let count = field(trailerStart + 8)
        let top = field(trailerStart + 16)
        let table = field(trailerStart + 24)
        guard (1...8).contains(offsetSize), (1...8).contains(referenceSize), count >= 1, count <= UInt64(bytes.count), top < count,
            table >= 8, table <= UInt64(trailerStart), count * UInt64(offsetSize) <= UInt64(trailerStart) - table
        else { throw DocumentError("the binary property list's trailer is not valid") }
        objectCount = Int(count)
        topObject = Int(top)
        tableStart = Int(table)
        valuesLeft = limits.values
        textBytesLeft = max(16 * bytes.count, 1 << 20)
    }

    private mutating func charge(_ range: Range<Int>) throws(DocumentError) -> Range<Int> {
        textBytesLeft -= range.count
        guard textBytesLeft >= 0 else { throw DocumentError("the property list expands to more than 16 times its size") }
        return range
    }

    mutating func readDocument() throws(DocumentError) -> Document {
        try readObject(topObject, depth: 0)
    }

    private func integer(at offset: Int, size: Int) throws(DocumentError) -> UInt64 {
        guard size >= 1, size <= 8, offset >= 8, offset <= trailerStart - size else {
            throw DocumentError("the binary property list points outside its objects", at: offset)
        }
        return bytes[offset..<offset + size].reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// The bytes `[start, start + count × unit)`, checked to lie among the objects.
    private func span(_ start: Int, count: UInt64, unit: Int) throws(DocumentError) -> Range<Int> {
        let (length, overflow) = count.multipliedReportingOverflow(by: UInt64(unit))
        guard !overflow, start <= trailerStart, length <= UInt64(trailerStart - start) else {
            throw DocumentError("the binary property list has a count larger than the file", at: start)
        }
        return start..<start + Int(length)
    }

    private mutating func readObject(_ reference: Int, depth: Int) throws(DocumentError) -> Document {
        valuesLeft -= 1
        guard valuesLeft >= 0 else { throw DocumentError("the property list holds more than \(limits.values) values") }
        guard reference < objectCount else { throw DocumentError("the binary property list refers to a missing object") }
        let start = Int(try integer(at: tableStart + reference * offsetSize, size: offsetSize))
        guard start >= 8, start < trailerStart else { throw DocumentError("the binary property list points outside its objects", at: start) }
        let marker = bytes[start]
        let low = Int(marker & 0x0F)
        switch marker >> 4 {
        case 0x0 where marker == 0x08: return .bool(false)
        case 0x0 where marker == 0x09: return .bool(true)
        case 0x1: return .number(try readInteger(at: start))
        case 0x2 where low == 2 || low == 3:
            let raw = try integer(at: start + 1, size: 1 << low)
            return .number(DocumentNumber(low == 2 ? Double(Float(bitPattern: UInt32(raw))) : Double(bitPattern: raw)))
        case 0x3 where marker == 0x33:
            return .date(Date(timeIntervalSinceReferenceDate: Double(bitPattern: try integer(at: start + 1, size: 8))))
        case 0x4:
            let (count, first) = try readCount(low, after: start)
            return .data(Data(bytes[try charge(try span(first, count: count, unit: 1))]))
        case 0x5, 0x6, 0x7:
            let (count, first) = try readCount(low, after: start)
            return .string(try readString(marker >> 4, bytes: try charge(try span(first, count: count, unit: marker >> 4 == 0x6 ? 2 : 1))))
        case 0xA:
            guard depth < limits.depth else { throw DocumentError("the property list nests deeper than \(limits.depth) levels") }
            let (count, first) = try readCount(low, after: start)
            var elements: [Document] = []
            for at in stride(from: first, to: try span(first, count: count, unit: referenceSize).upperBound, by: referenceSize) {
                elements.append(try readObject(Int(try integer(at: at, size: referenceSize)), depth: depth + 1))
            }
            return .array(elements)
        case 0xD:
            guard depth < limits.depth else { throw DocumentError("the property list nests deeper than \(limits.depth) levels") }
            let (count, first) = try readCount(low, after: start)
            let keys = try span(first, count: count, unit: referenceSize)
            _ = try span(keys.upperBound, count: count, unit: referenceSize)
            var members: [String: Document] = [:]
            for at in stride(from: first, to: keys.upperBound, by: referenceSize) {
                guard case .string(let name) = try readObject(Int(try integer(at: at, size: referenceSize)), depth: depth + 1) else {
                    throw DocumentError("the property list has a dictionary key that is not a string", at: at)
                }
                let value = try readObject(Int(try integer(at: at + keys.count, size: referenceSize)), depth: depth + 1)
                guard members.updateValue(value, forKey: name) == nil else {
                    throw DocumentError("the property list has the key \(DocumentPath.quoted(name)) twice in one dictionary", at: at)
                }
            }
            return .object(members)
        case 0x0 where marker == 0x00: throw DocumentError("the property list has a null, which the store's codec never writes", at: start)
        case 0x8: throw DocumentError("the property list has a UID, which the store's codec never writes", at: start)
        case 0xC: throw DocumentError("the property list has a set, which the store's codec never writes", at: start)
        default: throw DocumentError("the binary property list has an unknown object marker", at: start)
        }
    }

    /// An integer object: 1, 2 or 4 bytes unsigned, 8 bytes signed, 16 bytes for a `UInt64`
    /// above `Int64.max` (the high half zero).
    private func readInteger(at start: Int) throws(DocumentError) -> DocumentNumber {
        let size = 1 << Int(bytes[start] & 0x0F)
        switch size {
        case 1, 2, 4: return DocumentNumber(try integer(at: start + 1, size: size))
        case 8: return DocumentNumber(Int64(bitPattern: try integer(at: start + 1, size: 8)))
        case 16:
            let high = try integer(at: start + 1, size: 8)
            let low = try integer(at: start + 9, size: 8)
            guard high == 0 || (high == UInt64.max && low > UInt64(Int64.max)) else {
                throw DocumentError("the property list has an integer larger than 64 bits", at: start)
            }
            return high == 0 ? DocumentNumber(low) : DocumentNumber(Int64(bitPattern: low))
        default: throw DocumentError("the property list has an integer larger than 64 bits", at: start)
        }
    }

    /// A count in a marker's low nibble, or (0xF) in the integer object after it.
    private func readCount(_ low: Int, after marker: Int) throws(DocumentError) -> (UInt64, Int) {
        guard low == 0xF else { return (UInt64(low), marker + 1) }
        guard marker + 1 < trailerStart, bytes[marker + 1] >> 4 == 0x1, bytes[marker + 1] & 0x0F <= 3 else {
            throw DocumentError("the binary property list has a malformed count", at: marker)
        }
        let size = 1 << Int(bytes[marker + 1] & 0x0F)
        return (try integer(at: marker + 2, size: size), marker + 2 + size)
    }

    private func readString(_ kind: UInt8, bytes range: Range<Int>) throws(DocumentError) -> String {
        let text: String?
        switch kind {
        case 0x5: text = bytes[range].allSatisfy { $0 < 0x80 } ? String(decoding: bytes[range], as: UTF8.self) : nil
        case 0x6:
            let units = stride(from: range.lowerBound, to: range.upperBound, by: 2).map { UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]) }
            text = String(validating: units, as: UTF16.self)
        default: text = String(validating: bytes[range], as: UTF8.self)
        }
        guard let text else { throw DocumentError("the property list has a string that is not valid text", at: range.lowerBound) }
        return text
    }
}
