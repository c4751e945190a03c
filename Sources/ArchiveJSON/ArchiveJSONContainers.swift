import Foundation

// MARK: - Containers

extension ArchiveJSONDecoder {
    struct Keyed<Key: CodingKey>: KeyedDecodingContainerProtocol {
        let decoder: ArchiveJSONDecoder
        let index: Int

        var codingPath: [any CodingKey] { decoder.codingPath }

        /// The keys, in the document's order; gives up (an empty list) unless every key is plain
        /// ASCII and none repeats.
        var allKeys: [Key] {
            guard let object = try? decoder.node(index), object.flags & JSONNode.plainKeys != 0 else {
                _ = decoder.unsupported()
                return []
            }
            var names: [String] = []
            names.reserveCapacity(Int(object.count))
            var member = index + 1
            for _ in 0..<object.count {
                guard let name = try? decoder.decodeString(at: member), let value = try? decoder.node(member + 1) else { return [] }
                names.append(name)
                member = Int(value.after)
            }
            if Set(names).count != names.count {
                _ = decoder.unsupported()
                return []
            }
            return names.compactMap { Key(stringValue: $0) }
        }

        /// The value's node for `key`: the first one with that name, as JSONDecoder takes. Gives
        /// up when a comparison of bytes could disagree with a comparison of `String`s
        /// (escaped or non-ASCII names).
        func value(for key: Key) throws -> Int? {
            let object = try decoder.node(index)
            guard object.flags & JSONNode.plainKeys != 0 else { throw decoder.unsupported() }
            var name = key.stringValue
            return try name.withUTF8 { name -> Int? in
                for byte in name where byte >= 0x80 { throw decoder.unsupported() }
                var member = index + 1
                for _ in 0..<object.count {
                    let keyNode = try decoder.node(member)
                    let value = try decoder.node(member + 1)
                    if Int(keyNode.end - keyNode.start) == name.count,
                        name.count == 0 || memcmp(decoder.bytes.baseAddress! + Int(keyNode.start), name.baseAddress!, name.count) == 0
                    {
                        return member + 1
                    }
                    member = Int(value.after)
                }
                return nil
            }
        }

        func require(_ key: Key) throws -> Int {
            guard let index = try value(for: key) else { throw decoder.unsupported() }
            return index
        }

        func contains(_ key: Key) -> Bool {
            (try? value(for: key)) != nil
        }

        func decodeNil(forKey key: Key) throws -> Bool { try decoder.decodeNil(at: require(key)) }
        func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try decoder.decodeBool(at: require(key)) }
        func decode(_ type: String.Type, forKey key: Key) throws -> String { try decoder.decodeString(at: require(key)) }
        func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try decoder.decodeFloatingPoint(type, at: require(key)) }
        func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try decoder.decodeFloatingPoint(type, at: require(key)) }
        func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try decoder.decodeInteger(type, at: require(key)) }
        func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try decoder.decodeInteger(type, at: require(key)) }
        func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try decoder.decodeInteger(type, at: require(key)) }
        func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try decoder.decodeInteger(type, at: require(key)) }
        func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try decoder.decodeInteger(type, at: require(key)) }
        func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try decoder.decodeInteger(type, at: require(key)) }
        func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try decoder.decodeInteger(type, at: require(key)) }
        func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try decoder.decodeInteger(type, at: require(key)) }
        func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try decoder.decodeInteger(type, at: require(key)) }
        func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try decoder.decodeInteger(type, at: require(key)) }
        func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try decoder.decode(type, at: require(key)) }

        func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
            try decoder.keyedContainer(at: require(key))
        }

        func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
            try decoder.unkeyedContainer(at: require(key))
        }

        func superDecoder() throws -> any Decoder { throw decoder.unsupported() }
        func superDecoder(forKey key: Key) throws -> any Decoder { throw decoder.unsupported() }
    }

    /// Three words (the size an existential holds without a box of its own).
    struct Unkeyed: UnkeyedDecodingContainer {
        let decoder: ArchiveJSONDecoder
        let index: Int32
        let total: Int32
        private var next: Int32
        private var decoded: Int32 = 0

        init(decoder: ArchiveJSONDecoder, index: Int32, count: Int32) {
            self.decoder = decoder
            self.index = index
            self.total = count
            next = index + 1
        }

        var codingPath: [any CodingKey] { decoder.codingPath }
        var count: Int? { Int(total) }
        var isAtEnd: Bool { decoded >= total }
        var currentIndex: Int { Int(decoded) }

        /// Decodes the next element with `body` and moves past it (only when it succeeded).
        private mutating func next<T>(_ body: (ArchiveJSONDecoder, Int) throws -> T) throws -> T {
            guard decoded < total else { throw decoder.unsupported() }
            let element = Int(next)
            let value = try body(decoder, element)
            next = try decoder.node(element).after
            decoded += 1
            return value
        }

        mutating func decodeNil() throws -> Bool {
            guard decoded < total else { throw decoder.unsupported() }
            guard try decoder.decodeNil(at: Int(next)) else { return false }
            _ = try next { _, _ in () }
            return true
        }

        mutating func decode(_ type: Bool.Type) throws -> Bool { try next { try $0.decodeBool(at: $1) } }
        mutating func decode(_ type: String.Type) throws -> String { try next { try $0.decodeString(at: $1) } }
        mutating func decode(_ type: Double.Type) throws -> Double { try next { try $0.decodeFloatingPoint(type, at: $1) } }
        mutating func decode(_ type: Float.Type) throws -> Float { try next { try $0.decodeFloatingPoint(type, at: $1) } }
        mutating func decode(_ type: Int.Type) throws -> Int { try next { try $0.decodeInteger(type, at: $1) } }
        mutating func decode(_ type: Int8.Type) throws -> Int8 { try next { try $0.decodeInteger(type, at: $1) } }
        mutating func decode(_ type: Int16.Type) throws -> Int16 { try next { try $0.decodeInteger(type, at: $1) } }
        mutating func decode(_ type: Int32.Type) throws -> Int32 { try next { try $0.decodeInteger(type, at: $1) } }
        mutating func decode(_ type: Int64.Type) throws -> Int64 { try next { try $0.decodeInteger(type, at: $1) } }
        mutating func decode(_ type: UInt.Type) throws -> UInt { try next { try $0.decodeInteger(type, at: $1) } }
        mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try next { try $0.decodeInteger(type, at: $1) } }
        mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try next { try $0.decodeInteger(type, at: $1) } }
        mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try next { try $0.decodeInteger(type, at: $1) } }
        mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try next { try $0.decodeInteger(type, at: $1) } }
        mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try next { try $0.decode(type, at: $1) } }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
            try next { try $0.keyedContainer(at: $1) }
        }

        mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
            try next { try $0.unkeyedContainer(at: $1) }
        }

        mutating func superDecoder() throws -> any Decoder { throw decoder.unsupported() }
    }

    struct SingleValue: SingleValueDecodingContainer {
        let decoder: ArchiveJSONDecoder
        let index: Int

        var codingPath: [any CodingKey] { decoder.codingPath }

        func decodeNil() -> Bool { (try? decoder.decodeNil(at: index)) ?? false }
        func decode(_ type: Bool.Type) throws -> Bool { try decoder.decodeBool(at: index) }
        func decode(_ type: String.Type) throws -> String { try decoder.decodeString(at: index) }
        func decode(_ type: Double.Type) throws -> Double { try decoder.decodeFloatingPoint(type, at: index) }
        func decode(_ type: Float.Type) throws -> Float { try decoder.decodeFloatingPoint(type, at: index) }
        func decode(_ type: Int.Type) throws -> Int { try decoder.decodeInteger(type, at: index) }
        func decode(_ type: Int8.Type) throws -> Int8 { try decoder.decodeInteger(type, at: index) }
        func decode(_ type: Int16.Type) throws -> Int16 { try decoder.decodeInteger(type, at: index) }
        func decode(_ type: Int32.Type) throws -> Int32 { try decoder.decodeInteger(type, at: index) }
        func decode(_ type: Int64.Type) throws -> Int64 { try decoder.decodeInteger(type, at: index) }
        func decode(_ type: UInt.Type) throws -> UInt { try decoder.decodeInteger(type, at: index) }
        func decode(_ type: UInt8.Type) throws -> UInt8 { try decoder.decodeInteger(type, at: index) }
        func decode(_ type: UInt16.Type) throws -> UInt16 { try decoder.decodeInteger(type, at: index) }
        func decode(_ type: UInt32.Type) throws -> UInt32 { try decoder.decodeInteger(type, at: index) }
        func decode(_ type: UInt64.Type) throws -> UInt64 { try decoder.decodeInteger(type, at: index) }
        func decode<T: Decodable>(_ type: T.Type) throws -> T { try decoder.decode(type, at: index) }
    }
}
