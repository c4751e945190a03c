import Foundation

#if canImport(FoundationXML)
    import FoundationXML
#endif

/// Reads an XML property list with Foundation's streaming `XMLParser`, into the same flat
/// table as the binary reader. `PropertyListSerialization` is not used because on Linux it
/// hands back keyed-archive UIDs as opaque objects whose number cannot be read.
///
/// Open elements are kept on an explicit stack, so deep nesting costs memory, not call depth.
enum XMLPropertyListReader {
    static func read(_ data: Data) throws(KeyedArchiveError) -> PropertyListTable {
        let builder = Builder()
        let parser = XMLParser(data: data)
        parser.shouldResolveExternalEntities = false
        parser.delegate = builder
        let parsed = parser.parse()
        if let failure = builder.failure { throw .notAPropertyList(failure) }
        guard parsed else {
            let reason = parser.parserError.map { "\($0.localizedDescription)" } ?? "malformed XML"
            throw .notAPropertyList("the XML cannot be parsed (line \(parser.lineNumber)): \(reason)")
        }
        guard let top = builder.top else { throw .notAPropertyList("the XML property list holds no object") }
        return PropertyListTable(nodes: builder.nodes, top: top)
    }

    private final class Builder: NSObject, XMLParserDelegate {
        /// An open element: its name, and the table indices of its children so far.
        struct Open {
            var name: String
            var children: [Int] = []
        }

        var nodes: [PropertyListNode] = []
        var top: Int?
        var failure: String?
        private var stack: [Open] = []
        private var text = ""
        private var sawPlist = false

        private static let containers: Set<String> = ["array", "dict"]
        private static let scalars: Set<String> = ["key", "string", "integer", "real", "true", "false", "date", "data"]

        func parser(
            _ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?, qualifiedName: String?,
            attributes: [String: String] = [:]
        ) {
            guard failure == nil else { return }
            if elementName == "plist" && stack.isEmpty && !sawPlist {
                sawPlist = true
                return
            }
            guard sawPlist, Self.containers.contains(elementName) || Self.scalars.contains(elementName) else {
                fail(parser, "unexpected element <\(elementName)>")
                return
            }
            if let open = stack.last, !Self.containers.contains(open.name) {
                fail(parser, "<\(elementName)> inside <\(open.name)>")
                return
            }
            stack.append(Open(name: elementName))
            text = ""
        }

        func parser(_ parser: XMLParser, foundCharacters string: String) {
            if failure == nil, let open = stack.last, !Self.containers.contains(open.name) { text += string }
        }

        func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName: String?) {
            guard failure == nil else { return }
            if elementName == "plist" && stack.isEmpty { return }
            guard let open = stack.popLast() else {
                fail(parser, "unbalanced </\(elementName)>")
                return
            }
            guard let node = makeNode(open) else {
                fail(parser, "invalid <\(open.name)> value \(text.prefix(40).debugDescription)")
                return
            }
            nodes.append(node)
            let index = nodes.count - 1
            if stack.isEmpty {
                if top != nil { fail(parser, "more than one top-level object") }
                top = index
            } else {
                stack[stack.count - 1].children.append(index)
            }
            text = ""
        }

        private func makeNode(_ open: Open) -> PropertyListNode? {
            let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
            switch open.name {
            case "key", "string": return .string(text)
            case "integer":
                if let value = Int64(trimmed) { return .integer(value) }
                if let value = UInt64(trimmed) { return .real(Double(value)) }
                if trimmed.hasPrefix("0x"), let value = Int64(trimmed.dropFirst(2), radix: 16) { return .integer(value) }
                return nil
            case "real":
                switch trimmed.lowercased() {
                case "nan": return .real(.nan)
                case "+infinity", "infinity", "inf": return .real(.infinity)
                case "-infinity", "-inf": return .real(-.infinity)
                default: return Double(trimmed).map { .real($0) }
                }
            case "true": return .bool(true)
            case "false": return .bool(false)
            case "date":
                let formatter = ISO8601DateFormatter()
                return formatter.date(from: trimmed).map { .date($0.timeIntervalSinceReferenceDate) }
            case "data": return Data(base64Encoded: trimmed, options: .ignoreUnknownCharacters).map { .data($0) }
            case "array": return .array(open.children)
            case "dict":
                guard open.children.count % 2 == 0 else { return nil }
                var keys: [Int] = []
                var values: [Int] = []
                for pair in stride(from: 0, to: open.children.count, by: 2) {
                    keys.append(open.children[pair])
                    values.append(open.children[pair + 1])
                }
                // A keyed archive's UID is written as <dict><key>CF$UID</key><integer>n</integer></dict>.
                if keys.count == 1, case .string("CF$UID") = nodes[keys[0]], case .integer(let value) = nodes[values[0]] {
                    return value >= 0 ? .uid(Int(value)) : nil
                }
                return .dictionary(keys: keys, values: values)
            default: return nil
            }
        }

        private func fail(_ parser: XMLParser, _ reason: String) {
            failure = "line \(parser.lineNumber): \(reason)"
            parser.abortParsing()
        }
    }
}
