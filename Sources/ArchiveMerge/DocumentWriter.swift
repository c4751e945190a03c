import Foundation

extension Document {
    /// The document as the store's JSON codec writes a model with the same values: through
    /// `JSONEncoder` with `[.sortedKeys, .withoutEscapingSlashes]`, so the bytes are the
    /// encoder's own and the same on every replica.
    ///
    /// Throws a ``DocumentError`` for a date or data: JSON has neither.
    public func jsonData() throws(DocumentError) -> Data {
        try Self.encoding { try Self.jsonEncoder.encode(EncodedDocument(document: self, format: .json)) }
    }

    /// The document as the store's property-list codec writes a model with the same values:
    /// through `PropertyListEncoder` in its binary format, members in the order of their names'
    /// UTF-8 bytes (a model's own order is its declaration's, which a tree does not know).
    ///
    /// Numbers are written in their ``DocumentNumber`` form: an integral real (a `Double` property
    /// holding 2.0) becomes an integer, which `PropertyListDecoder` reads back into a `Double`
    /// as 2.0. Throws a ``DocumentError`` for a null: property lists have none.
    public func propertyListData() throws(DocumentError) -> Data {
        try Self.encoding { try Self.plistEncoder.encode(EncodedDocument(document: self, format: .propertyList)) }
    }

    // The store's encoders, configured as ArchiveCodec configures its own.
    private static let jsonEncoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    private static let plistEncoder: PropertyListEncoder = {
        let encoder = PropertyListEncoder()
        encoder.outputFormat = .binary
        return encoder
    }()

    private static func encoding(_ body: () throws -> Data) throws(DocumentError) -> Data {
        do {
            return try body()
        } catch let error as DocumentError {
            throw error
        } catch {
            throw DocumentError("the document could not be encoded: \(error)")
        }
    }
}

/// A ``Document`` as an `Encodable` value, so the store's own encoders write it.
private struct EncodedDocument: Encodable {
    enum Format { case json, propertyList }

    let document: Document
    let format: Format

    struct Name: CodingKey {
        let stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    func encode(to encoder: any Encoder) throws {
        switch document {
        case .object(let members):
            var container = encoder.container(keyedBy: Name.self)
            // Insertion order is the order PropertyListEncoder writes (JSONEncoder sorts anyway),
            // and a dictionary's own order differs between processes: sort, so every replica
            // writes the same bytes.
            for (name, value) in members.sorted(by: { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }) {
                try container.encode(EncodedDocument(document: value, format: format), forKey: Name(stringValue: name))
            }
        case .array(let elements):
            var container = encoder.unkeyedContainer()
            for element in elements { try container.encode(EncodedDocument(document: element, format: format)) }
        default:
            var container = encoder.singleValueContainer()
            try encodeScalar(into: &container)
        }
    }

    private func encodeScalar(into container: inout any SingleValueEncodingContainer) throws {
        switch (document, format) {
        case (.string(let text), _): try container.encode(text)
        case (.bool(let flag), _): try container.encode(flag)
        case (.number(let number), _):
            switch number.value {
            case .integer(let value): try container.encode(value)
            case .unsigned(let value): try container.encode(value)
            case .real(let value): try container.encode(value)
            }
        case (.null, .json): try container.encodeNil()
        case (.date(let date), .propertyList): try container.encode(date)
        case (.data(let data), .propertyList): try container.encode(data)
        default:
            throw DocumentError("a \(document.kind) has no form in \(format == .json ? "JSON" : "a property list")")
        }
    }
}
