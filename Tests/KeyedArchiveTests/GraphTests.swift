import Foundation
import KeyedArchive
import Testing

/// Archives built here, object by object: shapes, cycles and depths no model would produce.
@Suite("Object graphs: sharing, cycles, depth, bad shapes")
struct GraphTests {
    /// `$objects` of a linked list of `count` Node objects (uid 2 onwards), the last one's `next` $null.
    static func chain(_ count: Int) -> [Plist] {
        var objects: [Plist] = [.string("$null"), classDescription("Node", "NSObject")]
        for i in 0..<count {
            let next: Plist = i == count - 1 ? .uid(0) : .uid(3 + i)
            objects.append(instance(1, [("index", .int(Int64(i))), ("next", next)]))
        }
        return objects
    }

    @Test("an object whose field refers to itself decodes, with a reference marker where the cycle closes")
    func selfCycle() throws {
        let data = keyedArchive([.string("$null"), classDescription("Node", "NSObject"), instance(1, [("next", .uid(2))])], root: 2)
        let value = try KeyedArchive.decode(data)
        guard case .object(let node) = value else {
            Issue.record("not an object: \(value)")
            return
        }
        #expect(node.uid == 2)
        #expect(node.fields["next"] == .reference(uid: 2))
    }

    @Test("two objects referring to each other: each appears once on the path, then a marker")
    func mutualCycle() throws {
        let data = keyedArchive(
            [.string("$null"), classDescription("Node", "NSObject"), instance(1, [("other", .uid(3))]), instance(1, [("other", .uid(2))])],
            root: 2)
        let value = try KeyedArchive.decode(data)
        guard case .object(let inner)? = value["other"] else {
            Issue.record("no inner object: \(value)")
            return
        }
        #expect(inner.uid == 3)
        #expect(inner.fields["other"] == .reference(uid: 2))
    }

    @Test("an array that contains itself")
    func arrayCycle() throws {
        let data = keyedArchive(
            [
                .string("$null"), classDescription("NSMutableArray", "NSArray", "NSObject"),
                instance(1, [("NS.objects", .array([.uid(2), .uid(3)]))]), .string("x"),
            ],
            root: 2)
        #expect(try KeyedArchive.decode(data) == .array([.reference(uid: 2), .string("x")]))
    }

    @Test("an object shared by two fields (no cycle) appears whole in both places")
    func sharing() throws {
        let data = keyedArchive(
            [
                .string("$null"), classDescription("Pair", "NSObject"), instance(1, [("left", .uid(4)), ("right", .uid(4))]),
                classDescription("Leaf", "NSObject"), instance(3, [("name", .string("shared"))]),
            ], root: 2)
        let value = try KeyedArchive.decode(data)
        #expect(value["left"] != nil)
        #expect(value["left"] == value["right"])
        #expect(value["left"]?["name"] == .string("shared"))
    }

    @Test("an object reached inside a cycle and again outside it: every marker points to an enclosing object")
    func cycleReachedTwice() throws {
        // root(2) -> p: A(3), q: B(4); A -> x: C(5); C -> back: A; B -> y: C.
        let data = keyedArchive(
            [
                .string("$null"), classDescription("Node", "NSObject"), instance(1, [("p", .uid(3)), ("q", .uid(4))]),
                instance(1, [("x", .uid(5))]), instance(1, [("y", .uid(5))]), instance(1, [("back", .uid(3))]),
            ], root: 2)
        let value = try KeyedArchive.decode(data)
        #expect(value["p"]?["x"]?["back"] == .reference(uid: 3))
        // Under B, C is not inside A, so A is written out again below C (whole, as A was
        // built the first time), and the cycle closes at A.
        #expect(value["q"]?["y"]?["back"]?["x"]?["back"] == .reference(uid: 3))
        #expect(danglingReferences(value) == [])
    }

    @Test("a list 300 objects long decodes whole")
    func longChainWithinLimit() throws {
        var value = try KeyedArchive.decode(keyedArchive(Self.chain(300), root: 2))
        var length = 1
        while case .object(let node) = value, let next = node.fields["next"], next != .null {
            value = next
            length += 1
        }
        #expect(length == 300)
    }

    @Test("a tree at the depth limit can be walked recursively: encoded as JSON (JSONEncoder stops at 512), decoded into a recursive Codable type")
    func depthLimitIsSafeForRecursiveWalkers() throws {
        final class Node: Decodable {
            var index: Int
            var next: Node?
        }
        let data = keyedArchive(Self.chain(500), root: 2)
        let value = try KeyedArchive.decode(data)
        let json = try JSONEncoder().encode(value)
        #expect(json.count > 500 * 10)
        var node: Node? = try KeyedArchiveDecoder().decode(Node.self, from: data)
        var length = 0
        while let current = node {
            length += 1
            node = current.next
        }
        #expect(length == 500)
        #expect(throws: KeyedArchiveError.tooDeep(limit: 500)) { try KeyedArchive.decode(keyedArchive(Self.chain(501), root: 2)) }
    }

    @Test("a graph 50,000 levels deep throws tooDeep, quickly, without touching the stack")
    func deepChain() throws {
        let data = keyedArchive(Self.chain(50_000), root: 2)
        let clock = ContinuousClock()
        let started = clock.now
        #expect(throws: KeyedArchiveError.tooDeep(limit: 500)) { try KeyedArchive.decode(data) }
        #expect(clock.now - started < .seconds(10))
    }

    @Test("the depth limit is an option")
    func depthOption() throws {
        let data = keyedArchive(Self.chain(100), root: 2)
        #expect(throws: KeyedArchiveError.tooDeep(limit: 50)) { try KeyedArchive.decode(data, options: .init(maximumDepth: 50)) }
        #expect(throws: Never.self) { try KeyedArchive.decode(data, options: .init(maximumDepth: 100)) }
    }

    @Test("inline property-list arrays nested 50,000 deep throw tooDeep")
    func deepInlineArrays() throws {
        var writer = BinaryPlistWriter()
        var inner = writer.addNode(.int(1))
        for _ in 0..<50_000 { inner = writer.addNode(.array([inner])) }
        let null = writer.addNode(.string("$null"))
        let classDict = writer.add(classDescription("Box", "NSObject"))
        let uidClass = writer.addNode(.uid(1))
        let key = writer.addNode(.string("$class"))
        let field = writer.addNode(.string("contents"))
        let box = writer.addNode(.dict(keys: [key, field], values: [uidClass, inner]))
        let data = archive(writer: &writer, objects: [null, classDict, box], root: 2)
        #expect(throws: KeyedArchiveError.tooDeep(limit: 500)) { try KeyedArchive.decode(data) }
    }

    @Test("property-list containers that contain themselves are refused, not followed forever")
    func inlineCycle() throws {
        var writer = BinaryPlistWriter()
        let null = writer.addNode(.string("$null"))
        let loop = writer.addNode(.array([]))
        writer.set(loop, .array([loop]))
        let data = archive(writer: &writer, objects: [null, loop], root: 1)
        #expect(throws: KeyedArchiveError.self) { try KeyedArchive.decode(data) }
    }

    @Test("shared references that multiply into a huge tree throw tooLarge instead of exhausting memory")
    func exponentialSharing() throws {
        // Each level's object refers twice to the next: 2^40 values written out as a tree.
        var objects: [Plist] = [.string("$null"), classDescription("Pair", "NSObject")]
        for level in 0..<40 { objects.append(instance(1, [("a", .uid(3 + level)), ("b", .uid(3 + level))])) }
        objects.append(.string("leaf"))
        let clock = ContinuousClock()
        let started = clock.now
        #expect(throws: KeyedArchiveError.tooLarge(limit: 10_000_000)) { try KeyedArchive.decode(keyedArchive(objects, root: 2)) }
        #expect(clock.now - started < .seconds(10))
    }

    @Test("sharing that multiplies below a cycle stops at the value limit too, at once")
    func exponentialSharingWithCycle() throws {
        // As above, but the last level refers back to the root, so every subtree holds a cycle marker.
        var objects: [Plist] = [.string("$null"), classDescription("Pair", "NSObject")]
        for level in 0..<40 { objects.append(instance(1, [("a", .uid(3 + level)), ("b", .uid(3 + level))])) }
        objects.append(instance(1, [("back", .uid(2))]))
        let data = keyedArchive(objects, root: 2)
        let clock = ContinuousClock()
        let started = clock.now
        #expect(throws: KeyedArchiveError.tooLarge(limit: 10_000_000)) { try KeyedArchive.decode(data) }
        #expect(clock.now - started < .seconds(10))
        #expect(throws: KeyedArchiveError.tooLarge(limit: 1_000)) { try KeyedArchive.decode(data, options: .init(maximumValues: 1_000)) }
    }

    @Test("a $class that is not a class dictionary is a malformed archive")
    func badClass() throws {
        let notAClass = keyedArchive([.string("$null"), .string("Node"), instance(1, [("x", .int(1))])], root: 2)
        let error = #expect(throws: KeyedArchiveError.self) { try KeyedArchive.decode(notAClass) }
        #expect(error.map { "\($0)" }?.contains("not a class dictionary") == true)
        let inline = keyedArchive([.string("$null"), .dict([("$class", .string("NSObject"))])], root: 1)
        #expect(throws: KeyedArchiveError.self) { try KeyedArchive.decode(inline) }
    }

    @Test("NS.keys and NS.objects of different lengths are a malformed archive")
    func unevenDictionary() throws {
        let data = keyedArchive(
            [
                .string("$null"), classDescription("NSDictionary", "NSObject"),
                instance(1, [("NS.keys", .array([.uid(3), .uid(3)])), ("NS.objects", .array([.uid(3)]))]), .string("k"),
            ], root: 2)
        let error = #expect(throws: KeyedArchiveError.self) { try KeyedArchive.decode(data) }
        #expect(error.map { "\($0)" }?.contains("different lengths") == true)
    }

    @Test("a dictionary with non-string keys keeps its keys as values, in archive order")
    func nonStringKeys() throws {
        let data = keyedArchive(
            [
                .string("$null"), classDescription("NSDictionary", "NSObject"),
                instance(1, [("NS.keys", .array([.uid(3), .uid(4)])), ("NS.objects", .array([.uid(5), .uid(6)]))]), .int(1), .int(2),
                .string("one"), .string("two"),
            ], root: 2)
        let expected = KeyedValue.pairs([
            KeyedPair(key: .integer(1), value: .string("one")), KeyedPair(key: .integer(2), value: .string("two")),
        ])
        #expect(try KeyedArchive.decode(data) == expected)
        #expect(try KeyedArchiveDecoder().decode([Int: String].self, from: data) == [1: "one", 2: "two"])
    }

    @Test("NSNull, NSUUID, NSURL with a base, NSDate and $null references")
    func foundationValues() throws {
        let uuid = UUID()
        let u = uuid.uuid
        let bytes: [UInt8] = [u.0, u.1, u.2, u.3, u.4, u.5, u.6, u.7, u.8, u.9, u.10, u.11, u.12, u.13, u.14, u.15]
        let data = keyedArchive(
            [
                .string("$null"), classDescription("Thing", "NSObject"),
                instance(
                    1,
                    [("none", .uid(4)), ("id", .uid(6)), ("link", .uid(8)), ("when", .uid(11)), ("missing", .uid(0))]),
                classDescription("NSNull", "NSObject"), instance(3, []),
                classDescription("NSUUID", "NSObject"), instance(5, [("NS.uuidbytes", .data(bytes))]),
                classDescription("NSURL", "NSObject"), instance(7, [("NS.base", .uid(9)), ("NS.relative", .string("docs/a.txt"))]),
                instance(7, [("NS.base", .uid(0)), ("NS.relative", .string("https://example.com/root/"))]),
                classDescription("NSDate", "NSObject"), instance(10, [("NS.time", .real(86400))]),
            ], root: 2)
        let value = try KeyedArchive.decode(data)
        #expect(value["none"] == .null)
        #expect(value["missing"] == .null)
        #expect(value["id"] == .string(uuid.uuidString))
        #expect(value["link"] == .string("https://example.com/root/docs/a.txt"))
        #expect(value["when"] == .date(Date(timeIntervalSinceReferenceDate: 86400)))
    }

    @Test("an NSColor's components are read from its NSRGB text")
    func nsColor() throws {
        let data = keyedArchive(
            [
                .string("$null"), classDescription("NSColor", "NSObject"),
                instance(1, [("NSColorSpace", .int(1)), ("NSRGB", .data(Array("0.2 0.4 0.6 1\0".utf8)))]),
            ], root: 2)
        let value = try KeyedArchive.decode(data)
        #expect(value["components"] == .array([.real(0.2), .real(0.4), .real(0.6), .real(1)]))
        #expect(value["NSColorSpace"] == .integer(1))
    }

    @Test("XML archives decode exactly as their binary twins")
    func xmlMatchesBinary() throws {
        let objects: [Plist] = [
            .string("$null"), classDescription("Person", "NSObject"),
            instance(1, [("name", .uid(3)), ("age", .int(23)), ("height", .real(1.75)), ("adult", .bool(true)), ("tags", .uid(5)), ("me", .uid(2))]),
            .string("小明 & <co>"), classDescription("NSArray", "NSObject"), instance(4, [("NS.objects", .array([.uid(3), .uid(6)]))]),
            .data([1, 2, 3]),
        ]
        let binary = try KeyedArchive.decode(keyedArchive(objects, root: 2))
        let xml = try KeyedArchive.decode(keyedArchiveXML(objects, root: 2))
        #expect(xml == binary)
        #expect(xml["name"] == .string("小明 & <co>"))
        #expect(xml["me"] == .reference(uid: 2))
    }

    @Test("a broken XML property list is an error")
    func brokenXML() throws {
        var text = String(decoding: keyedArchiveXML([.string("$null"), .int(1)], root: 1), as: UTF8.self)
        text.removeLast(20)
        #expect(throws: KeyedArchiveError.self) { try KeyedArchive.decode(Data(text.utf8)) }
        let deep = "<?xml version=\"1.0\"?><plist>" + String(repeating: "<array>", count: 20_000) + "</plist>"
        #expect(throws: KeyedArchiveError.self) { try KeyedArchive.decode(Data(deep.utf8)) }
    }

    @Test("an archive whose $top has other keys than root gives them as a dictionary")
    func otherTopKeys() throws {
        var writer = BinaryPlistWriter()
        let top = writer.add(
            Plist.dict([
                ("$archiver", .string("NSKeyedArchiver")), ("$objects", .array([.string("$null"), .string("a"), .int(2)])),
                ("$top", .dict([("first", .uid(1)), ("second", .uid(2))])), ("$version", .int(100000)),
            ]))
        #expect(try KeyedArchive.decode(writer.data(top: top)) == .dictionary(["first": .string("a"), "second": .integer(2)]))
    }

    /// Finishes an archive whose `$objects` entries were added to `writer` by hand.
    private func archive(writer: inout BinaryPlistWriter, objects: [Int], root: Int) -> Data {
        let objectsArray = writer.addNode(.array(objects))
        let rootUID = writer.addNode(.uid(root))
        let rootKey = writer.addNode(.string("root"))
        let topDict = writer.addNode(.dict(keys: [rootKey], values: [rootUID]))
        let keys = ["$archiver", "$objects", "$top", "$version"].map { writer.addNode(.string($0)) }
        let archiver = writer.addNode(.string("NSKeyedArchiver"))
        let version = writer.addNode(.int(100000))
        let top = writer.addNode(.dict(keys: keys, values: [archiver, objectsArray, topDict, version]))
        return writer.data(top: top)
    }
}

/// The cycle markers in `value` that do not point to an object enclosing them (for graphs whose
/// cycles run through objects: a marker to a collection, which carries no UID, would be listed).
func danglingReferences(_ value: KeyedValue) -> [Int] {
    var dangling: [Int] = []
    // (value, uids of the objects enclosing it); iterative, as trees may be 500 deep.
    var work: [(KeyedValue, [Int])] = [(value, [])]
    while let (next, path) = work.popLast() {
        switch next {
        case .reference(let uid): if !path.contains(uid) { dangling.append(uid) }
        case .array(let elements): work += elements.map { ($0, path) }
        case .dictionary(let entries): work += entries.values.map { ($0, path) }
        case .pairs(let pairs): work += pairs.flatMap { [($0.key, path), ($0.value, path)] }
        case .object(let object):
            let inside = path + (object.uid.map { [$0] } ?? [])
            work += object.fields.values.map { ($0, inside) }
        default: break
        }
    }
    return dangling
}
