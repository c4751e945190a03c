import ArchiveStore
import ArgumentParser
import Foundation

/// The store argument every command but `init` takes: an existing store.
struct StoreArgument: ParsableArguments {
    @Argument(help: ArgumentHelp("The store's directory.", valueName: "store"))
    var store: String

    /// Opens the store, refusing a directory that is not one.
    func open() throws -> ArchiveStore {
        try ArchiveStore(directory: store, options: .init(create: false)).notingPendingRecovery()
    }
}

extension ArchiveStore {
    /// Says on stderr what a recovery that could not finish waits for (a full disk, or a
    /// read-only store holding interrupted writes): the command goes on, and reads the store
    /// as it was before the interrupted writes.
    func notingPendingRecovery() -> ArchiveStore {
        if let pending = pendingRecovery { printError(pending.description) }
        if interruptedWrites > 0 {
            printError(
                "note: \(path) is read-only and holds \(interruptedWrites) interrupted write(s) that only a process that can write it can finish; what is read here is the last recorded state"
            )
        }
        return self
    }
}

/// `--json`: print one JSON document instead of text.
struct OutputOptions: ParsableArguments {
    @Flag(help: "Print one JSON document instead of text.")
    var json = false

    /// Prints `value` as pretty JSON with sorted keys and ISO 8601 dates.
    func printJSON(_ value: some Encodable) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        FileHandle.standardOutput.write(try encoder.encode(value) + Data("\n".utf8))
    }
}

extension Date {
    /// `2026-11-21 11:16:24`, in UTC.
    var shortDescription: String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd HH:mm:ss"
        return formatter.string(from: self)
    }
}

/// Lays out rows in left-aligned columns separated by two spaces, each cell made
/// ``terminalSafe(_:)`` and padded by its ``displayWidth(_:)`` (Foundation's
/// `padding(toLength:)` counts UTF-16 units, and cut `cafe` + U+0301 to `cafe`).
func table(_ rows: [[String]]) -> String {
    let rows = rows.map { $0.map(terminalSafe) }
    guard let width = rows.map(\.count).max() else { return "" }
    var widths = Array(repeating: 0, count: width)
    for row in rows { for (i, cell) in row.enumerated() { widths[i] = max(widths[i], displayWidth(cell)) } }
    return rows.map { row in
        row.enumerated().map { i, cell in i == row.count - 1 ? cell : cell + String(repeating: " ", count: widths[i] - displayWidth(cell)) }
            .joined(separator: "  ").trimmingSuffix(" ")
    }.joined(separator: "\n")
}

extension String {
    fileprivate func trimmingSuffix(_ character: Character) -> String {
        var result = self
        while result.last == character { result.removeLast() }
        return result
    }
}

/// Prints `verb done/total` over itself on stderr while a long command runs, when stderr is a terminal.
struct ProgressLine {
    let verb: String
    private let enabled = isatty(2) != 0

    init(_ verb: String) { self.verb = verb }

    func update(_ done: Int, _ total: Int) {
        guard enabled, total > 0 else { return }
        FileHandle.standardError.write(Data("\r\(verb) \(done)/\(total)".utf8))
    }

    /// Clears the line.
    func finish() {
        guard enabled else { return }
        FileHandle.standardError.write(Data("\r\u{1B}[K".utf8))
    }
}

/// Reads a regular file named on the command line, or refuses it in one sentence that says
/// why: missing, unreadable, a directory, a FIFO (opened without blocking, never read).
func readInputFile(_ path: String) throws -> Data {
    func refuse(_ reason: String) -> ArchiveError { .invalidInput("cannot read \(path): \(reason)") }
    let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
    guard fd >= 0 else { throw refuse(String(cString: strerror(errno)).lowercased()) }
    let handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
    var info = stat()
    guard fstat(fd, &info) == 0 else { throw refuse(String(cString: strerror(errno)).lowercased()) }
    guard info.st_mode & S_IFMT == S_IFREG else {
        throw refuse("it is \(ArchiveStore.fileKindName(info.st_mode)), not a regular file")
    }
    do {
        return try handle.readToEnd() ?? Data()
    } catch {
        throw refuse(KeyedImportPlan.reason(error))
    }
}
