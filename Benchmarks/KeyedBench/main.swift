// keyed-bench: KeyedArchive.decode against Foundation's NSKeyedUnarchiver on the same bytes,
// in the same run: the valid fixtures, and a large archive of 10,000+ objects written here by
// Foundation's NSKeyedArchiver. Prints each side's throughput and the ratio (target >= 1.0x).
//
// `keyed-bench --help` gives the options.

import ArgumentParser
import BenchCommandLine
import Foundation
import KeyedArchive

// MARK: - Foundation's side: NSCoding classes for the fixtures' models, as an app registers them

/// Decodes every field of a fixture model the way its app's `initWithCoder:` did.
class FieldModel: NSObject, NSCoding {
    class var objectKeys: [String] { [] }
    class var integerKeys: [String] { [] }
    class var realKeys: [String] { [] }
    class var boolKeys: [String] { [] }
    var fields: [String: Any] = [:]

    func encode(with coder: NSCoder) {}

    required init?(coder: NSCoder) {
        // Person and its subclass MalePerson share this class here; a missing key would end
        // the process (Foundation on Linux fatalErrors), so each key is checked first.
        for key in Self.objectKeys where coder.containsValue(forKey: key) { fields[key] = coder.decodeObject(forKey: key) }
        for key in Self.integerKeys where coder.containsValue(forKey: key) { fields[key] = coder.decodeInteger(forKey: key) }
        for key in Self.realKeys where coder.containsValue(forKey: key) { fields[key] = coder.decodeDouble(forKey: key) }
        for key in Self.boolKeys where coder.containsValue(forKey: key) { fields[key] = coder.decodeBool(forKey: key) }
    }
}

final class PersonModelNS: FieldModel {
    override class var objectKeys: [String] { ["str", "muStr", "dic", "muDic", "arr", "muArr", "data", "muData", "set", "muSet"] }
    override class var integerKeys: [String] { ["w_int", "w_integer", "w_uinteger"] }
    override class var realKeys: [String] { ["w_float", "w_doule", "w_cgfloat"] }
    override class var boolKeys: [String] { ["w_bool"] }
}

final class ManModelNS: FieldModel {
    override class var objectKeys: [String] { ["name"] }
    override class var integerKeys: [String] { ["age"] }
}

final class PersonNS: FieldModel {
    override class var objectKeys: [String] { ["name", "labelArray", "car", "born", "facialHair"] }
    override class var integerKeys: [String] { ["age", "gender"] }
    override class var boolKeys: [String] { ["isAdult"] }
}

final class CarNS: FieldModel {
    override class var objectKeys: [String] { ["color"] }
}

final class ColorNS: FieldModel {
    override class var integerKeys: [String] { ["UIColorComponentCount"] }
    override class var realKeys: [String] { ["UIRed", "UIGreen", "UIBlue", "UIAlpha"] }
}

final class HDFArchiveModelNS: FieldModel {
    override class var objectKeys: [String] { ["archive", "session"] }
    override class var integerKeys: [String] { ["referenceCount", "totalCount"] }
    override class var realKeys: [String] { ["_floatValue"] }
}

/// The large archive's model.
final class ItemNS: NSObject, NSCoding {
    var name: String
    var count: Int
    var price: Double
    var added: Date
    var tags: [String]
    var owner: ItemOwnerNS

    init(index: Int, owner: ItemOwnerNS) {
        name = "item \(index)"
        count = index
        price = Double(index) * 1.25
        added = Date(timeIntervalSinceReferenceDate: Double(index) * 60)
        tags = ["tag \(index)", "group \(index % 13)"]
        self.owner = owner
    }

    func encode(with coder: NSCoder) {
        coder.encode(name, forKey: "name")
        coder.encode(count, forKey: "count")
        coder.encode(price, forKey: "price")
        coder.encode(added, forKey: "added")
        coder.encode(tags, forKey: "tags")
        coder.encode(owner, forKey: "owner")
    }

    required init?(coder: NSCoder) {
        guard let name = coder.decodeObject(forKey: "name") as? String, let added = coder.decodeObject(forKey: "added") as? Date,
            let tags = coder.decodeObject(forKey: "tags") as? [String], let owner = coder.decodeObject(forKey: "owner") as? ItemOwnerNS
        else { return nil }
        self.name = name
        self.added = added
        self.tags = tags
        self.owner = owner
        count = coder.decodeInteger(forKey: "count")
        price = coder.decodeDouble(forKey: "price")
    }
}

/// Shared by many items, as owners are in real object graphs.
final class ItemOwnerNS: NSObject, NSCoding {
    var name: String
    init(name: String) { self.name = name }
    func encode(with coder: NSCoder) { coder.encode(name, forKey: "name") }
    required init?(coder: NSCoder) {
        guard let name = coder.decodeObject(forKey: "name") as? String else { return nil }
        self.name = name
    }
}

/// The large archive's model, for KeyedArchiveDecoder.
struct Item: Decodable {
    struct Owner: Decodable { var name: String }
    var name: String
    var count: Int
    var price: Double
    var added: Date
    var tags: [String]
    var owner: Owner
}

func registerFoundationClasses() {
    let classes: [(AnyClass, String)] = [
        (PersonModelNS.self, "PersonModel"), (ManModelNS.self, "ManModel"), (PersonNS.self, "Person"), (PersonNS.self, "MalePerson"),
        (CarNS.self, "Car"), (ColorNS.self, "UIColor"), (HDFArchiveModelNS.self, "HDFArchiveModel"), (ItemNS.self, "Item"),
        (ItemOwnerNS.self, "ItemOwner"),
    ]
    for entry in classes { NSKeyedUnarchiver.setClass(entry.0, forClassName: entry.1) }
}

/// Foundation's decode of one archive: the root object, or nil.
func foundationDecode(_ data: Data) -> AnyObject? {
    guard let unarchiver = try? NSKeyedUnarchiver(forReadingFrom: data) else { return nil }
    unarchiver.requiresSecureCoding = false
    defer { unarchiver.finishDecoding() }
    return unarchiver.decodeObject(forKey: NSKeyedArchiveRootObjectKey) as AnyObject?
}

// MARK: - Measuring

/// Runs `body` over `inputs` repeatedly for about `seconds`, in `rounds` alternating slices
/// (with the other side run between), and returns the best round's bytes per second.
func throughput(_ inputs: [Data], rounds: Int, seconds: Double, _ body: (Data) -> Bool) -> (perRound: [Double], failures: Int) {
    let bytes = inputs.reduce(0) { $0 + $1.count }
    var failures = 0
    var rates: [Double] = []
    let clock = ContinuousClock()
    for _ in 0..<rounds {
        var done = 0
        let started = clock.now
        var elapsed = 0.0
        repeat {
            for input in inputs where !body(input) { failures += 1 }
            done += 1
            let duration = clock.now - started
            elapsed = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        } while elapsed < seconds / Double(rounds)
        rates.append(Double(done * bytes) / elapsed)
    }
    return (rates, failures)
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted[sorted.count / 2]
}

func mb(_ rate: Double) -> String { String(format: "%.2f MB/s", rate / 1_000_000) }

/// Times both decoders on the same bytes, alternating rounds so a slow spell hits both alike.
func compare(_ title: String, _ inputs: [Data], seconds: Double, extra: [(String, (Data) -> Bool)] = []) -> Double {
    var ours: [Double] = []
    var theirs: [Double] = []
    var others: [[Double]] = Array(repeating: [], count: extra.count)
    var failures = 0
    for _ in 0..<5 {
        let a = throughput(inputs, rounds: 1, seconds: seconds / 5) { data in (try? KeyedArchive.decode(data)) != nil }
        let b = throughput(inputs, rounds: 1, seconds: seconds / 5) { data in foundationDecode(data) != nil }
        ours += a.perRound
        theirs += b.perRound
        failures += a.failures + b.failures
        for (i, (_, body)) in extra.enumerated() {
            let c = throughput(inputs, rounds: 1, seconds: seconds / 5, body)
            others[i] += c.perRound
            failures += c.failures
        }
    }
    let ratio = median(ours) / median(theirs)
    print("\(title)")
    print("  KeyedArchive.decode            \(mb(median(ours)))")
    print("  NSKeyedUnarchiver              \(mb(median(theirs)))")
    for (i, (name, _)) in extra.enumerated() {
        print(
            "  \(name.padding(toLength: 30, withPad: " ", startingAt: 0)) \(mb(median(others[i])))  (\(String(format: "%.2f", median(others[i]) / median(theirs)))x)"
        )
    }
    print(
        "  ratio \(String(format: "%.2f", ratio))x  (target >= 1.0x)  \(ratio >= 1.0 ? "PASS" : "FAIL")\(failures > 0 ? "  \(failures) FAILED DECODES" : "")"
    )
    return ratio
}

// MARK: - Main

KeyedBench.runBenchmark()

/// The command line of `keyed-bench`.
struct KeyedBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keyed-bench",
        abstract: "KeyedArchive.decode against Foundation's NSKeyedUnarchiver on the same bytes, as a ratio of throughputs (target >= 1.0x).",
        discussion: """
            Workloads: 1 the valid fixtures of Tests/KeyedArchiveTests/Fixtures, 2 a large archive written by Foundation's NSKeyedArchiver. Each side runs 5 alternating rounds; medians are reported.

            Exit status: 0 when both workloads ran (a missed target prints FAIL), 1 when one failed to run, 2 for bad usage. See Benchmarks/README.md.
            """
    )

    @Flag(help: "1 s per side per workload instead of 5.")
    var quick = false

    @Option(
        help: ArgumentHelp("The directory of the fixture archives (default: Tests/KeyedArchiveTests/Fixtures of this repository).", valueName: "DIR"))
    var fixtures: String?

    func run() throws {
        let fixtureDirectory =
            fixtures
            ?? URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Tests/KeyedArchiveTests/Fixtures").path
        let fixtureNames = [
            "HDFArchiveModel.archiver", "MalePerson.archiver", "MyArray.archiver", "PersonCache.archiver", "WZX_PersonModel_person1.archiver",
            "WZX_PersonModel_person1_ManModel_manModel.archiver",
        ]
        let fixtureData = fixtureNames.compactMap { FileManager.default.contents(atPath: fixtureDirectory + "/" + $0) }
        guard fixtureData.count == fixtureNames.count else {
            FileHandle.standardError.write(Data("keyed-bench: cannot read the fixtures in \(fixtureDirectory) (use --fixtures DIR)\n".utf8))
            Foundation.exit(1)
        }
        registerFoundationClasses()

        // The large archive: items sharing 50 owners, written by Foundation's own archiver.
        let itemCount = 3_000
        let owners = (0..<50).map { ItemOwnerNS(name: "owner \($0)") }
        let items = NSArray(array: (0..<itemCount).map { ItemNS(index: $0, owner: owners[$0 % owners.count]) })
        let archiver = NSKeyedArchiver(requiringSecureCoding: false)
        archiver.setClassName("Item", for: ItemNS.self)
        archiver.setClassName("ItemOwner", for: ItemOwnerNS.self)
        archiver.encode(items, forKey: NSKeyedArchiveRootObjectKey)
        archiver.finishEncoding()
        let large = archiver.encodedData
        let check = try KeyedArchive.decode(large)
        guard case .array(let decodedItems) = check, decodedItems.count == itemCount,
            let theirs = foundationDecode(large) as? [ItemNS], theirs.count == itemCount
        else {
            FileHandle.standardError.write(Data("keyed-bench: the large archive does not decode on both sides\n".utf8))
            Foundation.exit(1)
        }
        let objectCount: Int = {
            guard let plist = try? PropertyListSerialization.propertyList(from: large, format: nil) as? [String: Any],
                let objects = plist["$objects"] as? [Any]
            else { return 0 }
            return objects.count
        }()

        let seconds = quick ? 1.0 : 5.0
        print(
            "keyed-bench: \(ProcessInfo.processInfo.activeProcessorCount) cores; \(quick ? "--quick, " : "")\(seconds) s per side per workload, 5 alternating rounds, medians"
        )
        let small = compare(
            "1. the \(fixtureData.count) valid fixtures (\(fixtureData.reduce(0) { $0 + $1.count }) bytes)", fixtureData, seconds: seconds)
        let big = compare(
            "2. a large archive: \(itemCount) items, \(objectCount) objects in $objects, \(large.count) bytes", [large], seconds: seconds,
            extra: [("KeyedArchiveDecoder → [Item]", { data in (try? KeyedArchiveDecoder().decode([Item].self, from: data)) != nil })])
        print("summary: fixtures \(String(format: "%.2f", small))x, large \(String(format: "%.2f", big))x NSKeyedUnarchiver's throughput")
    }
}
