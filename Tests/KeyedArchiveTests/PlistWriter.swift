import Foundation

/// A property list value for building test archives. `uid` is a keyed-archive reference.
indirect enum Plist {
    case null
    case bool(Bool)
    case int(Int64)
    case real(Double)
    case date(Double)
    case data([UInt8])
    case string(String)
    case uid(Int)
    case array([Plist])
    case dict([(String, Plist)])
}

/// Writes binary property lists (bplist00) object by object, so tests can build what
/// Foundation cannot write: UIDs, cycles, graphs tens of thousands of levels deep, bad shapes.
struct BinaryPlistWriter {
    /// One object, with children as indices of objects added before or after it.
    enum Node {
        case null
        case bool(Bool)
        case int(Int64)
        case real(Double)
        case date(Double)
        case data([UInt8])
        case string(String)
        case uid(Int)
        case array([Int])
        case dict(keys: [Int], values: [Int])
    }

    private(set) var nodes: [Node] = []

    /// Adds one object and returns its index.
    @discardableResult
    mutating func addNode(_ node: Node) -> Int {
        nodes.append(node)
        return nodes.count - 1
    }

    /// Replaces an object (to close a cycle after its members exist).
    mutating func set(_ index: Int, _ node: Node) { nodes[index] = node }

    /// Adds a value and its children, returning the value's index.
    mutating func add(_ value: Plist) -> Int {
        switch value {
        case .null: return addNode(Node.null)
        case .bool(let flag): return addNode(Node.bool(flag))
        case .int(let number): return addNode(Node.int(number))
        case .real(let number): return addNode(Node.real(number))
        case .date(let seconds): return addNode(Node.date(seconds))
        case .data(let bytes): return addNode(Node.data(bytes))
        case .string(let text): return addNode(Node.string(text))
        case .uid(let uid): return addNode(Node.uid(uid))
        case .array(let elements): return addNode(Node.array(elements.map { add($0) }))
        case .dict(let entries):
            let keys = entries.map { addNode(Node.string($0.0)) }
            let values = entries.map { add($0.1) }
            return addNode(Node.dict(keys: keys, values: values))
        }
    }

    /// The file, with `top` as its top object.
    func data(top: Int) -> Data {
        var out: [UInt8] = Array("bplist00".utf8)
        var offsets: [Int] = []
        func be(_ value: UInt64, _ size: Int) { for i in (0..<size).reversed() { out.append(UInt8(truncatingIfNeeded: value >> (8 * UInt64(i)))) } }
        func marker(_ type: UInt8, _ count: Int) {
            if count < 15 {
                out.append(type << 4 | UInt8(count))
            } else {
                out.append(type << 4 | 0xF)
                out.append(0x13)
                be(UInt64(count), 8)
            }
        }
        for node in nodes {
            offsets.append(out.count)
            switch node {
            case .null: out.append(0x00)
            case .bool(let flag): out.append(flag ? 0x09 : 0x08)
            case .int(let number):
                out.append(0x13)
                be(UInt64(bitPattern: number), 8)
            case .real(let number):
                out.append(0x23)
                be(number.bitPattern, 8)
            case .date(let seconds):
                out.append(0x33)
                be(seconds.bitPattern, 8)
            case .data(let bytes):
                marker(0x4, bytes.count)
                out += bytes
            case .string(let text):
                if text.utf8.allSatisfy({ $0 < 0x80 }) {
                    marker(0x5, text.utf8.count)
                    out += Array(text.utf8)
                } else {
                    let units = Array(text.utf16)
                    marker(0x6, units.count)
                    for unit in units { be(UInt64(unit), 2) }
                }
            case .uid(let uid):
                out.append(0x83)
                be(UInt64(uid), 4)
            case .array(let elements):
                marker(0xA, elements.count)
                for element in elements { be(UInt64(element), 4) }
            case .dict(let keys, let values):
                marker(0xD, keys.count)
                for key in keys { be(UInt64(key), 4) }
                for value in values { be(UInt64(value), 4) }
            }
        }
        let tableOffset = out.count
        for offset in offsets { be(UInt64(offset), 8) }
        out += [0, 0, 0, 0, 0, 0, 8, 4]
        be(UInt64(nodes.count), 8)
        be(UInt64(top), 8)
        be(UInt64(tableOffset), 8)
        return Data(out)
    }
}

/// A class dictionary for `$objects`: `$classname` and the chain `$classes`.
func classDescription(_ chain: String...) -> Plist {
    .dict([("$classes", .array(chain.map { .string($0) })), ("$classname", .string(chain[0]))])
}

/// An object of the class described at `classUID`, with `fields`.
func instance(_ classUID: Int, _ fields: [(String, Plist)]) -> Plist {
    .dict([("$class", .uid(classUID))] + fields)
}

/// A keyed archive whose `$objects` are `objects` (index 0 should be `$null`) and whose root is `root`.
func keyedArchive(_ objects: [Plist], root: Int) -> Data {
    var writer = BinaryPlistWriter()
    let top = writer.add(
        Plist.dict([
            ("$archiver", .string("NSKeyedArchiver")), ("$objects", .array(objects)), ("$top", .dict([("root", .uid(root))])),
            ("$version", .int(100000)),
        ]))
    return writer.data(top: top)
}

/// The same archive as an XML property list, UIDs written the way NSKeyedArchiver writes them.
func keyedArchiveXML(_ objects: [Plist], root: Int) -> Data {
    func xml(_ value: Plist) -> String {
        switch value {
        case .null: return "<string>$null</string>"
        case .bool(let flag): return flag ? "<true/>" : "<false/>"
        case .int(let number): return "<integer>\(number)</integer>"
        case .real(let number): return "<real>\(number)</real>"
        case .date(let seconds):
            return "<date>\(Date(timeIntervalSinceReferenceDate: seconds).formatted(.iso8601))</date>"
        case .data(let bytes): return "<data>\(Data(bytes).base64EncodedString())</data>"
        case .string(let text):
            let escaped = text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            return "<string>\(escaped)</string>"
        case .uid(let uid): return "<dict><key>CF$UID</key><integer>\(uid)</integer></dict>"
        case .array(let elements): return "<array>" + elements.map(xml).joined() + "</array>"
        case .dict(let entries): return "<dict>" + entries.map { "<key>\($0.0)</key>" + xml($0.1) }.joined() + "</dict>"
        }
    }
    let top = Plist.dict([
        ("$archiver", .string("NSKeyedArchiver")), ("$objects", .array(objects)), ("$top", .dict([("root", .uid(root))])),
        ("$version", .int(100000)),
    ])
    return Data(
        ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" "
            + "\"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">\n<plist version=\"1.0\">" + xml(top) + "</plist>\n").utf8)
}

/// The fixtures directory (copied from /work/shared/fixtures/nskeyed).
let fixturesURL: URL = Bundle.module.url(forResource: "Fixtures", withExtension: nil)!

func fixture(_ name: String) throws -> Data {
    try Data(contentsOf: fixturesURL.appendingPathComponent(name))
}

/// The good fixtures, by file name.
let goodFixtures = [
    "HDFArchiveModel.archiver", "MalePerson.archiver", "MyArray.archiver", "PersonCache.archiver", "WZX_PersonModel_person1.archiver",
    "WZX_PersonModel_person1_ManModel_manModel.archiver",
]
