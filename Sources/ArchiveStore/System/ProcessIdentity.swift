import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// This process, named so that another process can tell whether it still runs.
///
/// A pid alone can be reused; the pid with the process's start time (field 22 of
/// `/proc/PID/stat`) cannot, within one boot.
struct ProcessIdentity: Equatable, Sendable {
    var pid: Int32
    var startTime: Int64

    static let current = ProcessIdentity(pid: getpid(), startTime: startTime(of: getpid()) ?? 0)

    /// True when this process is still running (or its liveness cannot be ruled out).
    var isRunning: Bool {
        guard kill(pid, 0) == 0 || errno == EPERM else { return false }
        guard let start = ProcessIdentity.startTime(of: pid) else { return true }
        return start == startTime
    }

    private static func startTime(of pid: Int32) -> Int64? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = text.lastIndex(of: ")")
        else { return nil }
        // Fields after the command name, which may itself contain spaces and parentheses.
        let fields = text[text.index(after: close)...].split(separator: " ")
        // Field 3 (state) is fields[0]; field 22 (starttime) is fields[19].
        return fields.count > 19 ? Int64(fields[19]) : nil
    }
}
