import Foundation
import Testing

@testable import ArchiveStore

/// Keys that a naive file-name mapping gets wrong.
private let trickyKeys: [String] = [
    "plain", "A", "a/b", "a//b", "a/", "/", "//", "a%b", "%", "%%", "%25", "%2F", "%41", "a%2Fb",
    ".hidden", ".", "..", "...", "%2E", "a.", "a..b", "..a", "a.json", ".archive-sync", ".archive-sync-tmp.1.2.3",
    "tab\there", "line\nbreak", "bell\u{07}", "esc\u{1B}", "del\u{7F}", "\u{01}", "\u{1F}", "c1\u{85}control",
    " ", "  leading and trailing  ", "a b", "😀", "👩‍👩‍👧‍👦 family", "日本語のキー", "中文/路径", "한국어",
    "e\u{301}", "\u{E9}", "%~", "a%~b", "~", "back\\slash", "colon:star*?\"<>|", "CON", "nul",
]

/// Long keys: plain, escaped, multi-byte, and two that share their first 300 bytes.
private let longKeys: [String] = [
    String(repeating: "a", count: 241),
    String(repeating: "a", count: 300),
    String(repeating: "/", count: 200),
    String(repeating: "%", count: 100) + "tail",
    String(repeating: "😀", count: 100),
    String(repeating: "日", count: 120),
    "." + String(repeating: "x", count: 400),
    String(repeating: "b", count: 300) + "-one",
    String(repeating: "b", count: 300) + "-two",
    String(repeating: "ab/", count: 1000),
]

struct FileNameTests {
    @Test(arguments: trickyKeys)
    func trickyKeyRoundTripsThroughEncodeAndDecode(key: String) {
        let stem = FileName.encode(key)
        #expect(FileName.decode(stem[...]) == key)
        #expect(Array(FileName.decode(stem[...])?.utf8 ?? "".utf8) == Array(key.utf8))
    }

    @Test(arguments: trickyKeys + longKeys)
    func encodedNameIsASafeSingleFileName(key: String) {
        let stem = FileName.encode(key)
        let bytes = Array(stem.utf8)
        #expect(!bytes.isEmpty)
        #expect(!bytes.contains(UInt8(ascii: "/")))
        #expect(!bytes.contains(0))
        #expect(!bytes.contains { $0 < 0x20 || $0 == 0x7F })
        #expect(bytes.first != UInt8(ascii: "."))
        #expect(!FileName.isReserved(stem))
        for codec in ArchiveCodec.allCases {
            #expect(FileName.join(stem: stem, extension: codec.fileExtension).utf8.count <= 255)
        }
    }

    @Test func encodeIsInjectiveOnTrickyKeys() {
        // Compare bytes, not Strings: "e\u{301}" and "\u{E9}" are equal Strings but different keys on disk.
        let keys = Set((trickyKeys + longKeys).map { Array($0.utf8) })
        let names = Set((trickyKeys + longKeys).map { Array(FileName.encode($0).utf8) })
        #expect(keys.count == trickyKeys.count + longKeys.count)
        #expect(names.count == keys.count)
    }

    @Test(arguments: longKeys)
    func longKeyBecomesPrefixMarkerAndHash(key: String) throws {
        let stem = FileName.encode(key)
        #expect(stem.utf8.count <= FileName.maximumStemBytes)
        #expect(FileName.join(stem: stem, extension: "plist").utf8.count <= 255)
        let marker = try #require(stem.range(of: FileName.longMarker))
        let prefix = stem[..<marker.lowerBound]
        let hash = stem[marker.upperBound...]
        #expect(hash.count == 32)
        #expect(hash.allSatisfy { $0.isHexDigit })
        // The prefix is whole: no split escape and no split UTF-8 character, so it reads back
        // as the start of the key.
        let readable = try #require(FileName.decode(prefix))
        #expect(key.utf8.starts(with: readable.utf8))
        #expect(!readable.isEmpty)
        // A long name is not reversible; the key lives in the manifest.
        #expect(FileName.decode(stem[...]) == nil)
    }

    @Test func keyOfExactlyTheLimitKeepsItsReadableName() {
        let key = String(repeating: "k", count: FileName.maximumStemBytes)
        #expect(FileName.encode(key) == key)
        #expect(FileName.encode(key + "k").contains(FileName.longMarker))
    }

    @Test(arguments: ["%41", "%zz", "%", "%2", "%2f", "%4g", "a%", ".hidden", "%2e", "", "abc%~0123456789abcdef0123456789abcdef", "%C3"])
    func decodeRejectsNamesTheStoreNeverWrites(stem: String) {
        #expect(FileName.decode(stem[...]) == nil)
    }

    @Test func longKeysSaveLoadAndListThroughTheStore() throws {
        try withStore { store, path throws in
            let longKeys = longKeys.filter { ObjectID.problem(with: $0, isCollection: false) == nil }
            #expect(longKeys.count >= 8)
            for (index, key) in longKeys.enumerated() {
                try store.save(Person(name: "n\(index)", age: index), forKey: key)
            }
            for (index, key) in longKeys.enumerated() {
                #expect(try store.load(Person.self, forKey: key) == Person(name: "n\(index)", age: index))
            }
            #expect(try store.keys(of: Person.self) == longKeys.sorted())
            let names = try FileManager.default.contentsOfDirectory(atPath: path + "/Person")
            #expect(names.count == longKeys.count)
            #expect(names.allSatisfy { $0.utf8.count <= 255 && $0.hasSuffix(".json") })
            // A scan maps the hashed names back to their keys through the manifest: no change, nothing ignored.
            let report = try store.scan()
            #expect(report.changes.isEmpty)
            #expect(report.ignored.isEmpty)
            #expect(try store.keys(of: Person.self) == longKeys.sorted())
        }
    }

    @Test func trickyKeysSaveLoadAndListThroughTheStore() throws {
        try withStore { store, path throws in
            let keys = trickyKeys.filter { ObjectID.problem(with: $0, isCollection: false) == nil }
            for (index, key) in keys.enumerated() {
                try store.save(Person(name: key, age: index), forKey: key)
            }
            for (index, key) in keys.enumerated() {
                #expect(try store.load(Person.self, forKey: key) == Person(name: key, age: index))
            }
            #expect(Set(try store.keys(of: Person.self).map { Array($0.utf8) }) == Set(keys.map { Array($0.utf8) }))
            // Every object is a visible file directly inside its collection directory.
            let names = try FileManager.default.contentsOfDirectory(atPath: path + "/Person")
            #expect(names.count == keys.count)
            #expect(names.allSatisfy { !$0.hasPrefix(".") })
            #expect(try store.scan().changes.isEmpty)
        }
    }

    /// `"\u{E9}"` and `"e\u{301}"` are equal Swift strings but different bytes: two files, two keys.
    @Test func canonicallyEquivalentKeysAreTwoObjects() throws {
        try withStore { store, path throws in
            let composed = "caf\u{E9}"
            let decomposed = "cafe\u{301}"
            try store.batch { tx in
                try tx.save(Person(name: "composed", age: 1), forKey: composed)
                try tx.save(Person(name: "decomposed", age: 2), forKey: decomposed)
            }
            #expect(try store.load(Person.self, forKey: composed) == Person(name: "composed", age: 1))
            #expect(try store.load(Person.self, forKey: decomposed) == Person(name: "decomposed", age: 2))
            #expect(try store.keys(of: Person.self).count == 2)
            #expect(try FileManager.default.contentsOfDirectory(atPath: path + "/Person").count == 2)
            #expect(try store.scan().changes.isEmpty)
            #expect(try store.verify().isClean)
            try store.remove(Person.self, forKey: composed)
            #expect(try store.load(Person.self, forKey: decomposed) == Person(name: "decomposed", age: 2))
        }
    }

    @Test func longCollectionNameWorksAndScanRecordsNothing() throws {
        try withStore { store, _ throws in
            let collection = String(repeating: "C", count: 300)
            try store.save(Person(name: "x", age: 1), forKey: "k", in: collection)
            #expect(try store.load(Person.self, forKey: "k", in: collection) == Person(name: "x", age: 1))
            let report = try store.scan()
            #expect(report.changes.isEmpty)
            #expect(report.ignored.isEmpty)
        }
    }

    @Test func scanFindsANewFileInALongNamedCollection() throws {
        try withStore { store, path throws in
            let collection = String(repeating: "C", count: 300)
            try store.save(Person(name: "x", age: 1), forKey: "k", in: collection)
            let directory = path + "/" + FileName.encode(collection)
            try overwrite(directory + "/external.json", with: Data(#"{"age":2,"name":"y"}"#.utf8))
            let report = try store.scan()
            #expect(report.created == 1)
            #expect(try store.keys(of: Person.self, in: collection) == ["external", "k"])
        }
    }
}
