import Foundation

#if FUZZING
    import CFuzzer
#endif

/// The running target's check: set once, by ``runFuzzTarget(_:seeds:)``, before libFuzzer starts.
nonisolated(unsafe) private var targetCheck: (([UInt8]) -> Void)?

/// libFuzzer's entry point, the same in every target: it hands the input to the target's check.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    // libFuzzer may pass a nil pointer for an empty input.
    targetCheck?(start.map { Array(UnsafeBufferPointer(start: $0, count: count)) } ?? [])
    return 0
}

/// A fuzz target's main. Built with `-sanitize=fuzzer -DFUZZING` (`make fuzz`), it hands the
/// command line to libFuzzer's driver, which calls `check` with each input; built plainly
/// (`swift build`), it runs `check` over the files named on the command line (files, or directories of them), so a saved
/// crash can be replayed and debugged from an ordinary build; `--write-seeds DIR` writes
/// `seeds` there (`make fuzz-seeds` makes the committed corpus so).
public func runFuzzTarget(_ check: @escaping ([UInt8]) -> Void, seeds: () throws -> [[UInt8]] = { [] }) -> Never {
    #if FUZZING
        var argc = CommandLine.argc
        var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
        targetCheck = check
        exit(LLVMFuzzerRunDriver(&argc, &argv, fuzzOneInput))
    #else
        let manager = FileManager.default
        let arguments = CommandLine.arguments
        if arguments.count == 3, arguments[1] == "--write-seeds" {
            do {
                for (index, seed) in try seeds().enumerated() {
                    try Data(seed).write(to: URL(fileURLWithPath: arguments[2]).appendingPathComponent("seed-\(index)"))
                }
                exit(0)
            } catch {
                FileHandle.standardError.write(Data("cannot write the seeds: \(error)\n".utf8))
                exit(1)
            }
        }
        var count = 0
        for argument in arguments.dropFirst() where !argument.hasPrefix("-") {
            var isDirectory: ObjCBool = false
            guard manager.fileExists(atPath: argument, isDirectory: &isDirectory) else {
                FileHandle.standardError.write(Data("no such input: \(argument)\n".utf8))
                exit(2)
            }
            let files =
                isDirectory.boolValue
                ? ((try? manager.contentsOfDirectory(atPath: argument)) ?? []).sorted().map { argument + "/" + $0 } : [argument]
            for file in files {
                guard let data = manager.contents(atPath: file) else { continue }
                check([UInt8](data))
                count += 1
            }
        }
        print("replayed \(count) inputs without a crash")
        exit(0)
    #endif
}
