import Foundation
import Testing

@testable import ArchiveSync

#if canImport(Glibc)
    import Glibc
#endif

/// The library leaves process-wide settings to the program that links it.
@Suite("The library leaves the process alone")
struct ProcessSettingsTests {
    /// A far side that stopped reading is an error, not the end of the host process: with
    /// SIGPIPE at its default action (which kills), a frame sent into a pipe with no reader throws.
    @Test func aFrameSentToAGoneReaderThrowsEvenWithSIGPIPEAtItsDefault() async {
        await #expect(processExitsWith: .exitCode(0)) {
            signal(SIGPIPE, SIG_DFL)
            var fds: [Int32] = [-1, -1]
            guard pipe(&fds) == 0 else { exit(4) }
            close(fds[0])
            do {
                try FrameChannel(input: -1, output: fds[1]).send(.begin, [])
                exit(3)
            } catch {
                // No SIGPIPE is left pending either, to kill the process once unblocked.
                var pending = sigset_t()
                sigpending(&pending)
                exit(sigismember(&pending, SIGPIPE) == 1 ? 5 : 0)
            }
        }
    }

    /// The same when the reader goes away in the middle of a large frame: the kernel raises
    /// SIGPIPE for that write too, though it returns the bytes it wrote (a sync whose ssh was
    /// cut off while it sent megabytes died of it, silently).
    @Test func aFrameTheReaderLeavesMidwayThrowsEvenWithSIGPIPEAtItsDefault() async {
        await #expect(processExitsWith: .exitCode(0)) {
            signal(SIGPIPE, SIG_DFL)
            var fds: [Int32] = [-1, -1]
            guard pipe(&fds) == 0 else { exit(4) }
            let reader = fds[0]
            // Reads some of the frame, then goes: the writer is blocked on a full pipe by then.
            Thread {
                var buffer = [UInt8](repeating: 0, count: 4_096)
                var total = 0
                while total < 200_000 {
                    let count = read(reader, &buffer, buffer.count)
                    if count <= 0 { break }
                    total += count
                }
                close(reader)
            }.start()
            do {
                try FrameChannel(input: -1, output: fds[1]).send(.begin, [UInt8](repeating: 7, count: 4 << 20))
                exit(3)
            } catch {
                var pending = sigset_t()
                sigpending(&pending)
                exit(sigismember(&pending, SIGPIPE) == 1 ? 5 : 0)
            }
        }
    }
}
