import Foundation

/// Reads an XML property list into the same flat table as the binary reader.
///
/// A small tokenizer of its own, for the plist subset of XML (elements, text, character and
/// the five predefined entity references, CDATA, comments, the prolog and DOCTYPE).
/// Foundation offers two readers, and neither fits: `PropertyListSerialization` on Linux
/// returns keyed-archive UIDs as opaque objects whose number cannot be read, and `XMLParser`
/// traps on some malformed input (found by this module's fuzz tests), where this reader must throw.
///
/// Open elements are kept on an explicit stack, so deep nesting costs memory, not call depth;
/// every index is checked against the input before it is read.
enum XMLPropertyListReader {
    static func read(_ data: Data) throws(KeyedArchiveError) -> PropertyListTable {
        var reader = Reader(bytes: [UInt8](data))
        return try reader.read()
    }

    private struct Reader {
        /// An open element: its name, the table indices of its children, and its text so far.
        struct Open {
            var name: String
            var children: [Int] = []
            var text: [UInt8] = []
        }

        let bytes: [UInt8]
        var position = 0
        var nodes: [PropertyListNode] = []
        var stack: [Open] = []
        var top: Int?
        var insidePlist = false

        init(bytes: [UInt8]) { self.bytes = bytes }

        static let containers: Set<String> = ["array", "dict"]
        static let scalars: Set<String> = ["key", "string", "integer", "real", "true", "false", "date", "data"]

        func fail(_ reason: String) -> KeyedArchiveError {
            let line = bytes[..<min(position, bytes.count)].reduce(1) { $1 == UInt8(ascii: "\n") ? $0 + 1 : $0 }
            return .notAPropertyList("XML line \(line): \(reason)")
        }

        /// True when the input at the current position starts with `text`.
        func looking(at text: String) -> Bool {
            let pattern = Array(text.utf8)
            guard pattern.count <= bytes.count - position else { return false }
            return bytes[position..<position + pattern.count].elementsEqual(pattern)
        }

        /// Moves past the next occurrence of `terminator`, or fails.
        mutating func skip(past terminator: String) throws(KeyedArchiveError) {
            let pattern = Array(terminator.utf8)
            while position <= bytes.count - pattern.count {
                if bytes[position] == pattern[0], bytes[position..<position + pattern.count].elementsEqual(pattern) {
                    position += pattern.count
                    return
                }
                position += 1
            }
            throw fail("missing '\(terminator)' (truncated?)")
        }

        mutating func read() throws(KeyedArchiveError) -> PropertyListTable {
            if looking(at: "\u{FEFF}") { position += 3 }
            while position < bytes.count {
                if bytes[position] == UInt8(ascii: "<") {
                    try markup()
                } else {
                    try text()
                }
            }
            guard stack.isEmpty, !insidePlist else { throw fail("the document ends inside <\(stack.last?.name ?? "plist")> (truncated?)") }
            guard let top else { throw fail("the property list holds no object") }
            return PropertyListTable(nodes: nodes, top: top)
        }

        /// Text up to the next '<': kept for scalar elements, whitespace elsewhere.
        mutating func text() throws(KeyedArchiveError) {
            let start = position
            while position < bytes.count, bytes[position] != UInt8(ascii: "<") { position += 1 }
            let segment = bytes[start..<position]
            if let open = stack.last, !Self.containers.contains(open.name) {
                stack[stack.count - 1].text += try decodeEntities(segment)
            } else if !segment.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }) {
                throw fail("text outside a value")
            }
        }

        func decodeEntities(_ segment: ArraySlice<UInt8>) throws(KeyedArchiveError) -> [UInt8] {
            guard segment.contains(UInt8(ascii: "&")) else { return Array(segment) }
            var out: [UInt8] = []
            out.reserveCapacity(segment.count)
            var i = segment.startIndex
            while i < segment.endIndex {
                guard segment[i] == UInt8(ascii: "&") else {
                    out.append(segment[i])
                    i += 1
                    continue
                }
                guard let end = segment[i...].prefix(12).firstIndex(of: UInt8(ascii: ";")) else { throw fail("an unterminated '&' reference") }
                let name = String(decoding: segment[(i + 1)..<end], as: UTF8.self)
                switch name {
                case "lt": out.append(UInt8(ascii: "<"))
                case "gt": out.append(UInt8(ascii: ">"))
                case "amp": out.append(UInt8(ascii: "&"))
                case "quot": out.append(UInt8(ascii: "\""))
                case "apos": out.append(UInt8(ascii: "'"))
                default:
                    let number: UInt32?
                    if name.hasPrefix("#x") || name.hasPrefix("#X") {
                        number = UInt32(name.dropFirst(2), radix: 16)
                    } else if name.hasPrefix("#") {
                        number = UInt32(name.dropFirst())
                    } else {
                        number = nil
                    }
                    guard let number, let scalar = Unicode.Scalar(number) else { throw fail("unknown reference '&\(name);'") }
                    out += Array(String(Character(scalar)).utf8)
                }
                i = end + 1
            }
            return out
        }

        mutating func markup() throws(KeyedArchiveError) {
            if looking(at: "<?") { return try skip(past: "?>") }
            if looking(at: "<!--") { return try skip(past: "-->") }
            if looking(at: "<![CDATA[") {
                position += 9
                let start = position
                try skip(past: "]]>")
                guard let open = stack.last, !Self.containers.contains(open.name) else { throw fail("CDATA outside a value") }
                stack[stack.count - 1].text += bytes[start..<position - 3]
                return
            }
            if looking(at: "<!DOCTYPE") {
                guard nodes.isEmpty, stack.isEmpty, !insidePlist else { throw fail("a DOCTYPE inside the document") }
                while position < bytes.count, bytes[position] != UInt8(ascii: ">") {
                    if bytes[position] == UInt8(ascii: "[") { throw fail("DOCTYPE declarations are not supported") }
                    position += 1
                }
                guard position < bytes.count else { throw fail("an unterminated DOCTYPE") }
                position += 1
                return
            }
            // A tag: <name attributes...>, <name/>, or </name>.
            position += 1
            let closing = position < bytes.count && bytes[position] == UInt8(ascii: "/")
            if closing { position += 1 }
            let nameStart = position
            while position < bytes.count, !Self.endsName(bytes[position]) { position += 1 }
            let name = String(decoding: bytes[nameStart..<position], as: UTF8.self)
            var selfClosing = false
            var quote: UInt8?
            while position < bytes.count {
                let byte = bytes[position]
                position += 1
                if let open = quote {
                    if byte == open { quote = nil }
                } else if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "'") {
                    quote = byte
                } else if byte == UInt8(ascii: ">") {
                    selfClosing = position >= 2 && bytes[position - 2] == UInt8(ascii: "/")
                    if closing {
                        return try end(name)
                    }
                    try start(name)
                    if selfClosing { try end(name) }
                    return
                }
            }
            throw fail("an unterminated tag <\(name.prefix(40))")
        }

        static func endsName(_ byte: UInt8) -> Bool {
            byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D || byte == UInt8(ascii: ">") || byte == UInt8(ascii: "/")
        }

        mutating func start(_ name: String) throws(KeyedArchiveError) {
            if name == "plist" {
                guard !insidePlist, top == nil, stack.isEmpty else { throw fail("a nested <plist>") }
                insidePlist = true
                return
            }
            guard insidePlist, Self.containers.contains(name) || Self.scalars.contains(name) else {
                throw fail("unexpected element <\(name.prefix(40))>")
            }
            if let open = stack.last, !Self.containers.contains(open.name) { throw fail("<\(name)> inside <\(open.name)>") }
            if stack.isEmpty, top != nil { throw fail("more than one top-level object") }
            stack.append(Open(name: name))
        }

        mutating func end(_ name: String) throws(KeyedArchiveError) {
            if name == "plist" {
                guard insidePlist, stack.isEmpty else { throw fail("</plist> inside an open element") }
                insidePlist = false
                return
            }
            guard let open = stack.popLast(), open.name == name else { throw fail("unbalanced </\(name.prefix(40))>") }
            let node = try makeNode(open)
            nodes.append(node)
            let index = nodes.count - 1
            if stack.isEmpty {
                top = index
            } else {
                stack[stack.count - 1].children.append(index)
            }
        }

        func makeNode(_ open: Open) throws(KeyedArchiveError) -> PropertyListNode {
            let text = String(decoding: open.text, as: UTF8.self)
            let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
            switch open.name {
            case "key", "string": return .string(text)
            case "integer":
                if let value = Int64(trimmed) { return .integer(value) }
                if let value = UInt64(trimmed) { return .real(Double(value)) }
                if trimmed.hasPrefix("0x"), let value = Int64(trimmed.dropFirst(2), radix: 16) { return .integer(value) }
            case "real":
                switch trimmed.lowercased() {
                case "nan": return .real(.nan)
                case "+infinity", "infinity", "inf": return .real(.infinity)
                case "-infinity", "-inf": return .real(-.infinity)
                default: if let value = Double(trimmed) { return .real(value) }
                }
            case "true": return .bool(true)
            case "false": return .bool(false)
            case "date":
                if let date = ISO8601DateFormatter().date(from: trimmed) { return .date(date.timeIntervalSinceReferenceDate) }
            case "data":
                if let data = Data(base64Encoded: trimmed, options: .ignoreUnknownCharacters) { return .data(data) }
            case "array": return .array(open.children)
            case "dict":
                guard open.children.count % 2 == 0 else { throw fail("a <dict> with a key and no value") }
                var keys: [Int] = []
                var values: [Int] = []
                keys.reserveCapacity(open.children.count / 2)
                values.reserveCapacity(open.children.count / 2)
                for pair in stride(from: 0, to: open.children.count, by: 2) {
                    keys.append(open.children[pair])
                    values.append(open.children[pair + 1])
                }
                // A keyed archive's UID is written as <dict><key>CF$UID</key><integer>n</integer></dict>.
                if keys.count == 1, case .string("CF$UID") = nodes[keys[0]], case .integer(let value) = nodes[values[0]] {
                    guard value >= 0 else { throw fail("a negative CF$UID") }
                    return .uid(Int(value))
                }
                return .dictionary(keys: keys, values: values)
            default: break
            }
            throw fail("invalid <\(open.name)> value \(String(trimmed.prefix(40)).debugDescription)")
        }
    }
}
