import Foundation

/// The store's decoders of what it reads back from disk (names found in a directory, write
/// intents and manifest columns), each checked against the promise its callers rely on: the
/// entry points of the fuzz targets under `Fuzz/` (docs/fuzzing.md). Each traps when a
/// promise is broken, which is what a fuzzer reports; none throws.
package enum ReadBack {
    /// A name found in a store's directory: what a scan makes of it.
    ///
    /// Promises: a name the store writes for a key never leaves its directory (no `/`, NUL or
    /// leading `.`, at most 240 bytes); a short name decodes back to exactly its key; a name
    /// that decodes gives a key that encodes to that name again.
    package static func checkFileName(_ name: String) {
        let (stem, ext) = FileName.split(name)
        precondition(FileName.join(stem: String(stem), extension: String(ext)) == name || ext.isEmpty)
        if let key = FileName.decode(stem) {
            precondition(ExactName(FileName.encode(key)) == ExactName(String(stem)), "a decoded name does not encode back")
        }
        // No file is named "", so no key encodes to it.
        for candidate in [name, String(stem)] where !candidate.isEmpty {
            let encoded = FileName.encode(candidate)
            precondition(encoded.utf8.count <= FileName.maximumStemBytes, "an encoded name over the limit")
            precondition(!encoded.utf8.contains(0) && !encoded.contains("/") && !FileName.isReserved(encoded), "an encoded name leaves its directory")
            if !encoded.contains(FileName.longMarker) {
                precondition(FileName.decode(encoded[...]).map(ExactName.init) == ExactName(candidate), "a name does not decode to its key")
            }
        }
        if let id = try? ObjectID(parsing: name) {
            precondition(ObjectID.problem(with: id.collection, isCollection: true) == nil && !id.collection.contains("/"))
            precondition(ObjectID.problem(with: id.key, isCollection: false) == nil)
        }
    }

    /// A write intent's entries as the manifest's `intents` table holds them (JSON): recovery
    /// follows only well-formed entries, and the store's own writer of that JSON reads back as
    /// the same entries.
    package static func checkIntentEntries(_ json: Data) {
        guard let entries = try? JSONDecoder().decode([WriteIntent.Entry].self, from: json) else { return }
        let reread = try? JSONDecoder().decode([WriteIntent.Entry].self, from: Data(WriteIntent.Entry.json(entries).utf8))
        precondition(reread == entries, "WriteIntent.Entry.json does not read back as the entries it was given")
        for entry in entries where entry.isWellFormed {
            precondition(!entry.file.contains("/") && !(entry.temp ?? "").contains("/"), "a well-formed intent names a path")
            _ = entry.incoming
        }
    }

    /// A version vector as the manifest's `vector` column holds it: one that parses prints as
    /// text that parses to the same vector.
    package static func checkVersionVector(_ text: String) {
        guard let vector = VersionVector(parsing: text) else { return }
        precondition(VersionVector(parsing: vector.description) == vector, "a version vector does not read back")
        precondition(vector.counters.values.allSatisfy { $0 >= 0 })
    }

    /// A content hash as JSON holds it (an intent's `hash`): 32 bytes or an error.
    package static func checkContentHash(_ json: Data) {
        guard let hash = try? JSONDecoder().decode([ContentHash].self, from: json) else { return }
        precondition(hash.allSatisfy { $0.bytes.count == 32 }, "a decoded hash is not 32 bytes")
    }

    /// The check `put` makes of the bytes it is given in `codec` (Foundation's parsers behind
    /// it): an error or nothing, never a trap.
    package static func checkValidation(_ data: Data, as codec: ArchiveCodec) {
        _ = try? codec.validate(data)
    }
}
