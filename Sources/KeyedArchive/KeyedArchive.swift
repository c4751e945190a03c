import Foundation

/// Reads archives written by `NSKeyedArchiver` (binary or XML property lists) into a
/// ``KeyedValue`` tree, without Foundation's `NSKeyedUnarchiver` and without ever trapping.
///
/// ```swift
/// let value = try KeyedArchive.decode(Data(contentsOf: url))
/// if case .object(let person) = value {
///     print(person.classes)          // ["MalePerson", "Person", "NSObject"]
///     print(person.fields["name"])   // Optional(.string("Jason"))
/// }
/// ```
///
/// Objects are first read by UID into a table, with references kept as UIDs; the tree is then
/// built with an explicit stack. A reference back to an object still being built (a cycle)
/// becomes ``KeyedValue/reference(uid:)``, and nesting deeper than
/// ``Options/maximumDepth`` throws ``KeyedArchiveError/tooDeep(limit:)``, so no input can
/// overflow the stack or make the reader loop.
public enum KeyedArchive {
    /// Limits that keep a hostile archive from exhausting the stack or memory.
    public struct Options: Sendable {
        /// The deepest nesting of objects and collections accepted; deeper graphs throw
        /// ``KeyedArchiveError/tooDeep(limit:)``. The default, 500, is far beyond real models,
        /// shallow enough for code that walks the tree recursively, and keeps every tree
        /// (with a cycle marker at the bottom) within the 512 levels of nesting that
        /// Foundation's `JSONEncoder` accepts, so a decoded archive can always be saved as JSON.
        public var maximumDepth: Int
        /// The most values the tree may hold, counting a shared object once per place it
        /// appears; beyond it, ``KeyedArchiveError/tooLarge(limit:)``. Guards against small
        /// archives whose shared references multiply into huge trees.
        public var maximumValues: Int

        /// Makes options; the defaults suit any archive an app wrote.
        public init(maximumDepth: Int = 500, maximumValues: Int = 10_000_000) {
            self.maximumDepth = maximumDepth
            self.maximumValues = maximumValues
        }
    }

    /// Decodes the archive's root object (`$top.root`; an archive with other top-level keys
    /// gives a dictionary of them) into a value tree.
    ///
    /// - Throws: ``KeyedArchiveError`` when the bytes are not a well-formed keyed archive.
    public static func decode(_ data: Data, options: Options = Options()) throws(KeyedArchiveError) -> KeyedValue {
        let table = try PropertyListTable.parse(data)
        var graph = try ObjectGraph(table: table)
        let roots = graph.roots
        if let root = roots.first(where: { $0.key == "root" }) ?? (roots.count == 1 ? roots.first : nil) {
            return try graph.tree(from: root.vertex, options: options)
        }
        var result: [String: KeyedValue] = [:]
        for root in roots { result[root.key] = try graph.tree(from: root.vertex, options: options) }
        return .dictionary(result)
    }
}

/// An archive's objects, read on demand by vertex: `plist index * 2 + 1` for an object reached
/// through a UID (read with keyed-archive meaning: `$class`, `$null`), `plist index * 2` for a
/// value stored inline in another object (read as a plain property list value).
struct ObjectGraph {
    /// What one vertex is, with its children as vertices.
    enum Shape {
        case leaf(KeyedValue)
        case array([Int])
        /// Keys first, then values: `children[0..<count]` and `children[count...]`.
        case dictionary([Int], count: Int)
        case object(classes: [String], names: [String], values: [Int], extra: [String: KeyedValue])
        /// `[relative]` or `[base, relative]`.
        case url([Int])

        var children: [Int] {
            switch self {
            case .leaf: return []
            case .array(let children), .dictionary(let children, _), .url(let children): return children
            case .object(_, _, let values, _): return values
            }
        }
    }

    let table: PropertyListTable
    /// `$objects`: the plist index of each archive UID.
    let objects: [Int]
    /// The `$top` entries, by key, sorted.
    private(set) var roots: [(key: String, vertex: Int)] = []
    private var shapes: [Int: Shape] = [:]
    /// The archive UID of each vertex reached through one.
    private var uids: [Int: Int] = [:]

    init(table: PropertyListTable) throws(KeyedArchiveError) {
        self.table = table
        guard let top = table.stringKeyedDictionary(at: table.top) else {
            throw .notAKeyedArchive("the top object is not a dictionary with string keys")
        }
        if let archiver = top["$archiver"].flatMap(table.string(at:)), archiver != "NSKeyedArchiver" {
            throw .notAKeyedArchive("$archiver is '\(archiver)', not NSKeyedArchiver")
        }
        guard let objectsIndex = top["$objects"] else { throw .notAKeyedArchive("there is no $objects") }
        guard case .array(let objects) = table.nodes[objectsIndex] else { throw .notAKeyedArchive("$objects is not an array") }
        self.objects = objects
        guard let topIndex = top["$top"] else { throw .notAKeyedArchive("there is no $top") }
        guard let entries = table.stringKeyedDictionary(at: topIndex) else {
            throw .notAKeyedArchive("$top is not a dictionary with string keys")
        }
        guard !entries.isEmpty else { throw .notAKeyedArchive("$top is empty") }
        for (key, reference) in entries.sorted(by: { $0.key < $1.key }) {
            roots.append((key, try edge(reference)))
        }
    }

    /// The vertex a plist reference leads to: through a UID to an archived object, or else inline.
    private mutating func edge(_ reference: Int) throws(KeyedArchiveError) -> Int {
        guard case .uid(let uid) = table.nodes[reference] else { return reference * 2 }
        guard uid < objects.count else { throw .uidOutOfRange(uid: uid, objectCount: objects.count) }
        let vertex = objects[uid] * 2 + 1
        uids[vertex] = uid
        return vertex
    }

    /// The node a field refers to, following at most one UID (for fields such as `NS.string`
    /// that archivers write either inline or as a reference).
    private func resolved(_ reference: Int) throws(KeyedArchiveError) -> PropertyListNode {
        let node = table.nodes[reference]
        guard case .uid(let uid) = node else { return node }
        guard uid < objects.count else { throw .uidOutOfRange(uid: uid, objectCount: objects.count) }
        return table.nodes[objects[uid]]
    }

    private func name(_ vertex: Int) -> String {
        uids[vertex].map { "object \($0)" } ?? "an inline value"
    }

    mutating func shape(_ vertex: Int) throws(KeyedArchiveError) -> Shape {
        if let known = shapes[vertex] { return known }
        let made = try makeShape(vertex)
        shapes[vertex] = made
        return made
    }

    private mutating func makeShape(_ vertex: Int) throws(KeyedArchiveError) -> Shape {
        let archived = vertex & 1 == 1
        switch table.nodes[vertex >> 1] {
        case .null: return .leaf(.null)
        case .bool(let value): return .leaf(.bool(value))
        case .integer(let value): return .leaf(.integer(value))
        case .real(let value): return .leaf(.real(value))
        case .date(let seconds): return .leaf(.date(Date(timeIntervalSinceReferenceDate: seconds)))
        case .data(let value): return .leaf(.data(value))
        case .string(let value): return .leaf(archived && value == "$null" ? .null : .string(value))
        case .uid: throw .malformed("\(name(vertex)) is a bare reference to another object")
        case .array(let elements), .set(let elements):
            var children: [Int] = []
            children.reserveCapacity(elements.count)
            for element in elements { children.append(try edge(element)) }
            return .array(children)
        case .dictionary(let keys, let values):
            if archived, let fields = table.stringKeyedDictionary(at: vertex >> 1), let classReference = fields["$class"] {
                return try instance(vertex, fields: fields, classReference: classReference)
            }
            var children: [Int] = []
            children.reserveCapacity(keys.count * 2)
            for key in keys { children.append(try edge(key)) }
            for value in values { children.append(try edge(value)) }
            return .dictionary(children, count: keys.count)
        }
    }

    /// The class chain `$class` points to.
    private func classes(of vertex: Int, _ reference: Int) throws(KeyedArchiveError) -> [String] {
        guard case .uid(let uid) = table.nodes[reference] else {
            throw .malformed("the $class of \(name(vertex)) is not a reference to a class dictionary")
        }
        guard uid < objects.count else { throw .uidOutOfRange(uid: uid, objectCount: objects.count) }
        guard let description = table.stringKeyedDictionary(at: objects[uid]),
            let className = description["$classname"].flatMap(table.string(at:))
        else { throw .malformed("the $class of \(name(vertex)) (object \(uid)) is not a class dictionary with a $classname") }
        guard let chainIndex = description["$classes"] else { return [className] }
        guard case .array(let names) = table.nodes[chainIndex] else { throw .malformed("the $classes of object \(uid) is not an array") }
        var chain: [String] = []
        for index in names {
            guard let text = table.string(at: index) else { throw .malformed("the $classes of object \(uid) holds a non-string") }
            chain.append(text)
        }
        if chain.first != className { chain.insert(className, at: 0) }
        return chain
    }

    private static let valueClasses: Set<String> = [
        "NSString", "NSMutableString", "NSArray", "NSMutableArray", "NSSet", "NSMutableSet", "NSOrderedSet",
        "NSMutableOrderedSet", "NSDictionary", "NSMutableDictionary", "NSData", "NSMutableData", "NSDate", "NSNull", "NSUUID",
        "NSURL", "NSColor",
    ]

    private mutating func instance(_ vertex: Int, fields: [String: Int], classReference: Int) throws(KeyedArchiveError) -> Shape {
        let chain = try classes(of: vertex, classReference)
        switch chain.first(where: Self.valueClasses.contains) {
        case "NSString", "NSMutableString":
            if let reference = fields["NS.string"] {
                guard case .string(let text) = try resolved(reference) else { throw .malformed("NS.string of \(name(vertex)) is not a string") }
                return .leaf(.string(text))
            }
            if let reference = fields["NS.bytes"], case .data(let bytes) = try resolved(reference) {
                return .leaf(.string(String(decoding: bytes, as: UTF8.self)))
            }
            throw .malformed("the \(chain[0]) \(name(vertex)) has no NS.string")
        case "NSArray", "NSMutableArray", "NSSet", "NSMutableSet", "NSOrderedSet", "NSMutableOrderedSet":
            return .array(try sequence(vertex, fields, "NS.objects", single: "NS.object."))
        case "NSDictionary", "NSMutableDictionary":
            let keys = try sequence(vertex, fields, "NS.keys", single: "NS.key.")
            let values = try sequence(vertex, fields, "NS.objects", single: "NS.object.")
            guard keys.count == values.count else {
                throw .malformed("NS.keys and NS.objects of \(name(vertex)) have different lengths (\(keys.count) and \(values.count))")
            }
            return .dictionary(keys + values, count: keys.count)
        case "NSData", "NSMutableData":
            guard let reference = fields["NS.data"] ?? fields["NS.bytes"], case .data(let bytes) = try resolved(reference) else {
                throw .malformed("the \(chain[0]) \(name(vertex)) has no NS.data")
            }
            return .leaf(.data(bytes))
        case "NSDate":
            switch fields["NS.time"].map({ table.nodes[$0] }) {
            case .real(let seconds): return .leaf(.date(Date(timeIntervalSinceReferenceDate: seconds)))
            case .integer(let seconds): return .leaf(.date(Date(timeIntervalSinceReferenceDate: Double(seconds))))
            default: throw .malformed("the NSDate \(name(vertex)) has no NS.time")
            }
        case "NSNull":
            return .leaf(.null)
        case "NSUUID":
            guard let reference = fields["NS.uuidbytes"], case .data(let bytes) = try resolved(reference), bytes.count == 16 else {
                throw .malformed("the NSUUID \(name(vertex)) has no 16-byte NS.uuidbytes")
            }
            let b = [UInt8](bytes)
            let uuid = UUID(uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]))
            return .leaf(.string(uuid.uuidString))
        case "NSURL":
            guard let relative = fields["NS.relative"] else { throw .malformed("the NSURL \(name(vertex)) has no NS.relative") }
            var children: [Int] = []
            if let base = fields["NS.base"] { children.append(try edge(base)) }
            children.append(try edge(relative))
            return .url(children)
        default:
            return try customObject(vertex, chain: chain, fields: fields)
        }
    }

    /// The elements of `NS.objects` (or `NS.keys`), or of the numbered `NS.object.0`, `NS.object.1`... fields.
    private mutating func sequence(_ vertex: Int, _ fields: [String: Int], _ key: String, single: String) throws(KeyedArchiveError) -> [Int] {
        var children: [Int] = []
        if let reference = fields[key] {
            switch try resolved(reference) {
            case .array(let elements), .set(let elements):
                children.reserveCapacity(elements.count)
                for element in elements { children.append(try edge(element)) }
                return children
            default: throw .malformed("\(key) of \(name(vertex)) is not an array")
            }
        }
        while let reference = fields[single + String(children.count)] { children.append(try edge(reference)) }
        return children
    }

    private mutating func customObject(_ vertex: Int, chain: [String], fields: [String: Int]) throws(KeyedArchiveError) -> Shape {
        var names: [String] = []
        var values: [Int] = []
        names.reserveCapacity(fields.count)
        values.reserveCapacity(fields.count)
        for (key, reference) in fields.sorted(by: { $0.key < $1.key }) where key != "$class" {
            names.append(key)
            values.append(try edge(reference))
        }
        var extra: [String: KeyedValue] = [:]
        if chain.contains("NSColor") { extra = colorComponents(fields) }
        return .object(classes: chain, names: names, values: values, extra: extra)
    }

    /// An `NSColor` keeps its components as ASCII text in `NSRGB`, `NSWhite` or `NSCMYK` data
    /// ("0.2 0.4 0.6 1"); they are added as a `components` array of reals.
    private func colorComponents(_ fields: [String: Int]) -> [String: KeyedValue] {
        for key in ["NSRGB", "NSWhite", "NSCMYK"] {
            guard let reference = fields[key], case .data(let bytes)? = try? resolved(reference) else { continue }
            let text = String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
            let numbers = text.split(whereSeparator: \.isWhitespace).compactMap { Double($0) }
            if !numbers.isEmpty { return ["components": .array(numbers.map(KeyedValue.real))] }
        }
        return [:]
    }

    // MARK: - The tree

    private struct Frame {
        let vertex: Int
        let shape: Shape
        let children: [Int]
        var next = 0
        var values: [KeyedValue] = []
        /// The vertices that cycle markers below this one point to, outside this subtree.
        var openReferences: Set<Int> = []
        /// Values below this one so far.
        var size = 0

        init(vertex: Int, shape: Shape) {
            self.vertex = vertex
            self.shape = shape
            self.children = shape.children
            values.reserveCapacity(children.count)
        }
    }

    /// Builds the value tree under `root` with an explicit stack.
    ///
    /// A finished subtree is kept by vertex and reused wherever the vertex appears again, so
    /// shared objects cost one build. A subtree holding cycle markers is reused only where
    /// every object its markers point to encloses the new place too, so each marker still
    /// points to an enclosing object.
    mutating func tree(from root: Int, options: KeyedArchive.Options) throws(KeyedArchiveError) -> KeyedValue {
        let rootShape = try shape(root)
        if case .leaf(let value) = rootShape { return value }
        var memo: [Int: (value: KeyedValue, size: Int, openReferences: Set<Int>)] = [:]
        var onPath: Set<Int> = [root]
        var stack = [Frame(vertex: root, shape: rootShape)]
        var total = 1
        let depthLimit = max(1, options.maximumDepth)
        while !stack.isEmpty {
            let top = stack.count - 1
            if stack[top].next < stack[top].children.count {
                let child = stack[top].children[stack[top].next]
                stack[top].next += 1
                if onPath.contains(child) {
                    guard let uid = uids[child] else { throw .malformed("property list containers contain themselves") }
                    stack[top].values.append(.reference(uid: uid))
                    stack[top].openReferences.insert(child)
                    stack[top].size += 1
                    total += 1
                } else if let known = memo[child], known.openReferences.isSubset(of: onPath) {
                    stack[top].values.append(known.value)
                    stack[top].openReferences.formUnion(known.openReferences)
                    stack[top].size += known.size
                    total += known.size
                } else {
                    let childShape = try shape(child)
                    if case .leaf(let value) = childShape {
                        stack[top].values.append(value)
                        stack[top].size += 1
                        total += 1
                    } else {
                        guard stack.count < depthLimit else { throw .tooDeep(limit: depthLimit) }
                        onPath.insert(child)
                        stack.append(Frame(vertex: child, shape: childShape))
                        total += 1
                    }
                }
                if total > options.maximumValues { throw .tooLarge(limit: options.maximumValues) }
                continue
            }
            var frame = stack.removeLast()
            onPath.remove(frame.vertex)
            let value = try assemble(frame)
            let size = frame.size + 1
            frame.openReferences.remove(frame.vertex)
            memo[frame.vertex] = (value, size, frame.openReferences)
            guard !stack.isEmpty else { return value }
            let parent = stack.count - 1
            stack[parent].values.append(value)
            stack[parent].size += size
            stack[parent].openReferences.formUnion(frame.openReferences)
        }
        throw .malformed("empty graph")  // not reached: the loop returns when the root is done
    }

    private func assemble(_ frame: Frame) throws(KeyedArchiveError) -> KeyedValue {
        let values = frame.values
        switch frame.shape {
        case .leaf(let value):
            return value
        case .array:
            return .array(values)
        case .dictionary(_, let count):
            var strings: [String: KeyedValue] = [:]
            strings.reserveCapacity(count)
            for i in 0..<count {
                guard case .string(let key) = values[i] else {
                    return .pairs((0..<count).map { KeyedPair(key: values[$0], value: values[count + $0]) })
                }
                strings[key] = values[count + i]
            }
            return .dictionary(strings)
        case .object(let classes, let names, _, let extra):
            var fields = extra
            fields.reserveCapacity(names.count + extra.count)
            for (name, value) in zip(names, values) { fields[name] = value }
            return .object(KeyedObject(classes: classes, fields: fields, uid: uids[frame.vertex]))
        case .url:
            guard case .string(let relative) = values[values.count - 1] else {
                throw .malformed("NS.relative of the NSURL \(name(frame.vertex)) is not a string")
            }
            guard values.count == 2 else { return .string(relative) }
            switch values[0] {
            case .null: return .string(relative)
            case .string(let base):
                return .string(URL(string: relative, relativeTo: URL(string: base))?.absoluteString ?? base + relative)
            default: throw .malformed("NS.base of the NSURL \(name(frame.vertex)) is not a URL")
            }
        }
    }
}
