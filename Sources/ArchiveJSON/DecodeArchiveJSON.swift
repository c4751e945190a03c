import Foundation

// A decoder for the JSON archives the store writes, which gives exactly the values
// Foundation's `JSONDecoder` (default strategies: dates deferred to `Date`, data as base64,
// non-conforming floats refused, keys as they are) gives, in about a third of its time for
// models such as the benchmarks' Person.
//
// It answers only what it can answer for certain and gives up on everything else: any
// syntax error anywhere, a non-ASCII or escaped key it would have to compare, a number that
// does not fit, base64 `Data` that is not canonical, `Decimal`, a super decoder, a coding
// path asked for, any error a model's `init(from:)` meets. Once it gives up on a document,
// the whole document is decoded again by JSONDecoder, whose value or error is the answer. So
// a model that catches an error (`try?`) cannot see a different outcome here than it would
// with JSONDecoder: every error is JSONDecoder's own.

/// Decodes JSON the way the store's shared `JSONDecoder` does, faster; nil when it gave up and
/// JSONDecoder must decode `data` instead.
package func decodeArchiveJSON<T: Decodable>(_ type: T.Type, from data: Data) -> T? {
    data.withUnsafeBytes { bytes -> T? in
        guard bytes.count > 0, bytes.count < Int(Int32.max) else { return nil }
        var parser = JSONParser(bytes: bytes)
        defer { parser.nodes.deallocate() }
        guard (try? parser.parseDocument()) != nil else { return nil }
        let decoder = ArchiveJSONDecoder(bytes: bytes, nodes: UnsafeBufferPointer(start: parser.nodes, count: parser.count))
        // Whatever escapes the call (a kept decoder or container) finds an empty document.
        defer { decoder.finish() }
        guard let value = try? decoder.decode(type, at: 0), !decoder.gaveUp else { return nil }
        return value
    }
}
