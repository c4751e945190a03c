import ArchiveProcess
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Writes all of `bytes` to `fd`.
private func writeAll(_ fd: Int32, _ bytes: [UInt8]) {
    var written = 0
    while written < bytes.count {
        let count = bytes[written...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard count > 0 else { return }
        written += count
    }
}

@Suite("ChildProcess: spawn, pipes, stderr, exit")
struct ChildProcessTests {
    @Test func anExitStatusAndASignalAreToldApart() throws {
        #expect(try ChildProcess("/bin/sh", ["-c", "exit 3"]).wait() == .exited(3))
        let killed = try ChildProcess("/bin/sh", ["-c", "kill -TERM $$"]).wait()
        #expect(killed == .signalled(SIGTERM))
        #expect(killed.status == 128 + SIGTERM)
    }

    @Test func aProgramIsLookedUpOnThePath() throws {
        #expect(try ChildProcess("true").wait() == .exited(0))
    }

    @Test func aMissingProgramThrowsWithItsErrno() {
        #expect(throws: ChildProcessError.self) { try ChildProcess("/nonexistent/program") }
        do {
            _ = try ChildProcess("/nonexistent/program")
        } catch {
            #expect(error.errno == ENOENT)
            #expect(error.description.contains("/nonexistent/program"))
        }
    }

    @Test func whatGoesInOnStdinComesOutOnStdout() throws {
        let child = try ChildProcess("/bin/cat", stdin: .pipe, stdout: .pipe)
        writeAll(try #require(child.standardInput), Array("hello\n".utf8))
        child.closeStandardInput()
        #expect(child.readStandardOutputToEnd() == Array("hello\n".utf8))
        #expect(child.wait() == .exited(0))
        #expect(child.standardInput == nil && child.standardOutput == nil)
    }

    @Test func stderrIsCollectedOnItsOwnThreadKeepingTheLastBytes() throws {
        // 200 KB: over a pipe's 64 KB, so a child nobody read for would block.
        let child = try ChildProcess(
            "/bin/sh", ["-c", "head -c 200000 /dev/zero | tr '\\0' x >&2; printf END >&2"], stdout: .null, stderr: .collect(lastBytes: 100))
        #expect(child.wait(timeout: .seconds(60)) == .exited(0))
        #expect(child.waitForErrorOutputEnd(timeout: .seconds(60)))
        let collected = child.collectedErrorOutput
        #expect(collected.count == 100)
        #expect(String(decoding: collected, as: UTF8.self).hasSuffix("xxEND"))
    }

    @Test func stderrJoinsStdoutAndFilesAreWritten() throws {
        let directory = NSTemporaryDirectory() + "/archive-process-tests-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let joined = try ChildProcess("/bin/sh", ["-c", "printf out; printf err >&2"], stdout: .pipe, stderr: .standardOutput)
        #expect(String(decoding: joined.readStandardOutputToEnd(), as: UTF8.self) == "outerr")
        joined.wait()
        let toFile = try ChildProcess(
            "/bin/sh", ["-c", "pwd; printf err >&2"], stdout: .file(directory + "/out"), stderr: .file(directory + "/err"), directory: directory)
        #expect(toFile.wait() == .exited(0))
        let resolved = URL(fileURLWithPath: directory).resolvingSymlinksInPath().path
        #expect(try String(contentsOfFile: directory + "/out", encoding: .utf8) == resolved + "\n")
        #expect(try String(contentsOfFile: directory + "/err", encoding: .utf8) == "err")
        #expect(toFile.errorDestination.isFile)
    }

    @Test func aDescriptorOpenedWithoutCloseOnExecDoesNotReachTheChild() throws {
        var ends: [Int32] = [-1, -1]
        try #require(pipe(&ends) == 0)  // no O_CLOEXEC
        defer { close(ends[0]) }
        let child = try ChildProcess("/bin/sleep", ["60"], stdout: .null)
        defer { child.kill() }
        close(ends[1])
        // Only the child could still hold the write end: end-of-file at once means it does not
        // (with it, none would come for 60 s).
        var descriptor = pollfd(fd: ends[0], events: Int16(POLLIN), revents: 0)
        #expect(poll(&descriptor, 1, 10_000) == 1)
        var byte: UInt8 = 0
        #expect(read(ends[0], &byte, 1) == 0)
    }

    @Test func waitWithATimeoutAndTerminateStopAChildThatRuns() throws {
        let child = try ChildProcess("/bin/sleep", ["60"])
        #expect(child.wait(timeout: .milliseconds(50)) == nil)
        #expect(child.isRunning)
        #expect(child.terminate(grace: .seconds(10)) == .signalled(SIGTERM))
        #expect(!child.isRunning)
        // Reaped: a later signal goes nowhere, and the answer stays.
        child.send(SIGKILL)
        #expect(child.wait() == .signalled(SIGTERM))
    }

    @Test func aChildThatIgnoresSIGTERMIsKilledAfterTheGrace() throws {
        let child = try ChildProcess("/bin/sh", ["-c", "trap '' TERM; printf ready; sleep 60"], stdout: .pipe)
        var byte: UInt8 = 0
        #expect(read(try #require(child.standardOutput), &byte, 1) == 1)  // the trap is set
        #expect(child.terminate(grace: .milliseconds(200)) == .signalled(SIGKILL))
    }
}

extension ChildProcess.Output {
    fileprivate var isFile: Bool {
        if case .file = self { true } else { false }
    }
}
