import ArchiveStore
import ArgumentParser
import Foundation
import KeyedArchive

struct Dump: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the object graph of an NSKeyedArchiver archive.",
        discussion: """
            Reads a binary or XML keyed archive with archive-sync's own reader (never NSKeyedUnarchiver, so a hostile file gives an error, not a crash) and prints its root object: each object with its class chain and fields, Foundation's classes as plain values. A reference back to an enclosing object (a cycle) prints as <cycle to object #N>, or as {"$ref": N} with --json.

            With --json: one JSON document; objects carry their class chain under "$classes", dates are ISO 8601 and data base64.

            Examples:
              archive-sync dump WZX_PersonModel_person1.archiver
              archive-sync dump MalePerson.archiver --json
            """
    )

    @Argument(help: ArgumentHelp("The archive file.", valueName: "file"))
    var file: String

    @OptionGroup var output: OutputOptions

    func run() throws {
        let data: Data
        data = try readInputFile(file)
        let value: KeyedValue
        do {
            value = try KeyedArchive.decode(data)
        } catch {
            throw ArchiveError.invalidInput("\(file): \(error.description)")
        }
        if output.json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            encoder.dateEncodingStrategy = .iso8601
            encoder.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
            encoder.userInfo[.keyedArchiveClassChains] = true
            FileHandle.standardOutput.write(try encoder.encode(value) + Data("\n".utf8))
        } else {
            var lines: [String] = []
            outline(value, label: nil, indent: 0, into: &lines)
            print(lines.map(terminalSafe).joined(separator: "\n"))
        }
    }
}

/// Writes `value` as an indented outline: one line per value, children indented by two spaces.
/// The tree is at most ``KeyedArchive/Options/maximumDepth`` deep, so recursion is bounded.
func outline(_ value: KeyedValue, label: String?, indent: Int, into lines: inout [String]) {
    let prefix = String(repeating: "  ", count: indent) + (label.map { "\($0): " } ?? "")
    switch value {
    case .null: lines.append(prefix + "nil")
    case .bool(let flag): lines.append(prefix + (flag ? "true" : "false"))
    case .integer(let number): lines.append(prefix + String(number))
    case .real(let number): lines.append(prefix + String(number))
    case .string(let text): lines.append(prefix + text.debugDescription)
    case .date(let date): lines.append(prefix + date.formatted(.iso8601))
    case .data(let data):
        let shown = data.prefix(16).map { String(format: "%02x", $0) }.joined()
        lines.append(prefix + "<\(data.count) bytes\(data.isEmpty ? "" : ": " + shown)\(data.count > 16 ? "…" : "")>")
    case .array(let elements):
        lines.append(prefix + "[\(elements.count)]")
        for (index, element) in elements.enumerated() { outline(element, label: "[\(index)]", indent: indent + 1, into: &lines) }
    case .dictionary(let entries):
        lines.append(prefix + "{\(entries.count)}")
        for key in entries.keys.sorted() { outline(entries[key]!, label: key.debugDescription, indent: indent + 1, into: &lines) }
    case .pairs(let pairs):
        lines.append(prefix + "{\(pairs.count)}")
        for pair in pairs { outline(pair.value, label: pair.key.keyDescription, indent: indent + 1, into: &lines) }
    case .object(let object):
        let uid = object.uid.map { " #\($0)" } ?? ""
        lines.append(prefix + object.classes.joined(separator: " : ") + uid)
        for key in object.fields.keys.sorted() { outline(object.fields[key]!, label: key, indent: indent + 1, into: &lines) }
    case .reference(let uid):
        lines.append(prefix + "<cycle to object #\(uid)>")
    }
}

extension KeyedValue {
    /// A non-string dictionary key as the outline shows it.
    fileprivate var keyDescription: String {
        switch self {
        case .string(let text): return text.debugDescription
        case .integer(let number): return String(number)
        case .real(let number): return String(number)
        case .bool(let flag): return String(flag)
        default: return "<\(className)>"
        }
    }
}
