import Foundation

/// An element of an S3 response's XML: its name (namespace prefix dropped), its text and its
/// child elements.
///
/// A small parser of our own rather than FoundationXML's `XMLParser`: that one links libxml2,
/// which the release build of `archive-sync` (static Swift libraries, run on hosts without
/// Swift) would then need on every host, and S3's answers use a small part of XML: elements,
/// text, the five entities and character references, a declaration, no DTD.
struct S3XMLElement: Sendable {
    var name: String
    var text = ""
    var children: [S3XMLElement] = []

    /// The first child named `name`.
    func child(_ name: String) -> S3XMLElement? { children.first { $0.name == name } }

    /// Every child named `name`.
    func children(_ name: String) -> [S3XMLElement] { children.filter { $0.name == name } }

    /// The text of the first child named `name`.
    func text(of name: String) -> String? { child(name)?.text }

    /// Parses a document; throws ``S3Error/invalidResponse(_:)`` naming what broke.
    static func parse(_ bytes: some Collection<UInt8>) throws -> S3XMLElement {
        var parser = Parser(bytes: Array(bytes))
        return try parser.document()
    }

    private struct Parser {
        let bytes: [UInt8]
        var index = 0

        mutating func document() throws -> S3XMLElement {
            skipMisc()
            guard index < bytes.count else { throw failure("an empty document") }
            let root = try element()
            skipMisc()
            guard index == bytes.count else { throw failure("text after the root element") }
            return root
        }

        /// Skips white space, the declaration, processing instructions and comments.
        mutating func skipMisc() {
            while index < bytes.count {
                if isSpace(bytes[index]) {
                    index += 1
                } else if starts(with: "<?") {
                    skip(past: "?>")
                } else if starts(with: "<!--") {
                    skip(past: "-->")
                } else {
                    return
                }
            }
        }

        mutating func element() throws -> S3XMLElement {
            guard consume("<") else { throw failure("expected an element") }
            var element = S3XMLElement(name: localName(name()))
            // Attributes (xmlns) carry nothing S3's answers need.
            while index < bytes.count, bytes[index] != UInt8(ascii: ">"), !starts(with: "/>") {
                if bytes[index] == UInt8(ascii: "\"") || bytes[index] == UInt8(ascii: "'") {
                    let quote = bytes[index]
                    index += 1
                    while index < bytes.count, bytes[index] != quote { index += 1 }
                }
                index += 1
            }
            if consume("/>") { return element }
            guard consume(">") else { throw failure("an unterminated tag <\(element.name)") }
            var text: [UInt8] = []
            while true {
                guard index < bytes.count else { throw failure("<\(element.name)> is never closed") }
                if starts(with: "</") {
                    index += 2
                    let closing = localName(name())
                    guard closing == element.name, consume(">") else {
                        throw failure("</\(closing)> closes <\(element.name)>")
                    }
                    element.text = String(decoding: text, as: UTF8.self)
                    return element
                } else if starts(with: "<!--") {
                    skip(past: "-->")
                } else if starts(with: "<![CDATA[") {
                    index += 9
                    while index < bytes.count, !starts(with: "]]>") {
                        text.append(bytes[index])
                        index += 1
                    }
                    index += 3
                } else if bytes[index] == UInt8(ascii: "<") {
                    element.children.append(try self.element())
                } else if bytes[index] == UInt8(ascii: "&") {
                    text += try entity()
                } else {
                    text.append(bytes[index])
                    index += 1
                }
            }
        }

        mutating func entity() throws -> [UInt8] {
            guard let end = bytes[index...].firstIndex(of: UInt8(ascii: ";")), end - index < 12 else {
                throw failure("an unterminated entity")
            }
            let name = String(decoding: bytes[(index + 1)..<end], as: UTF8.self)
            index = end + 1
            switch name {
            case "amp": return Array("&".utf8)
            case "lt": return Array("<".utf8)
            case "gt": return Array(">".utf8)
            case "quot": return Array("\"".utf8)
            case "apos": return Array("'".utf8)
            default:
                let value = name.hasPrefix("#x") ? UInt32(name.dropFirst(2), radix: 16) : name.hasPrefix("#") ? UInt32(name.dropFirst()) : nil
                guard let value, let scalar = Unicode.Scalar(value) else { throw failure("the unknown entity &\(name);") }
                return Array(String(scalar).utf8)
            }
        }

        mutating func name() -> String {
            let start = index
            while index < bytes.count, !isSpace(bytes[index]), ![UInt8(ascii: ">"), UInt8(ascii: "/")].contains(bytes[index]) {
                index += 1
            }
            return String(decoding: bytes[start..<index], as: UTF8.self)
        }

        func localName(_ name: String) -> String {
            name.split(separator: ":").last.map(String.init) ?? name
        }

        func starts(with literal: String) -> Bool {
            bytes[index...].starts(with: literal.utf8)
        }

        mutating func consume(_ literal: String) -> Bool {
            guard starts(with: literal) else { return false }
            index += literal.utf8.count
            return true
        }

        mutating func skip(past literal: String) {
            while index < bytes.count, !consume(literal) { index += 1 }
        }

        func isSpace(_ byte: UInt8) -> Bool {
            byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
        }

        func failure(_ what: String) -> S3Error {
            S3Error.invalidResponse("the S3 server's XML answer does not parse: \(what) at byte \(index)")
        }
    }
}

extension String {
    /// The text with `&`, `<` and `>` escaped, for an XML request body.
    var xmlEscaped: String {
        replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
    }
}
