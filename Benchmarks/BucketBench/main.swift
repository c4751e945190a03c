// bucket-bench: `archive-sync sync STORE s3://bucket/prefix` against awscli on the same files to
// the same server, a Ceph RADOS Gateway of its own on 127.0.0.1 (the tests' CephGateway), with
// the requests our side sends counted from the gateway's log. See Benchmarks/README.md.
// `bucket-bench --help` gives the options.

import ArgumentParser
import BenchCommandLine
import BenchSupport
import Foundation

BucketBench.runBenchmark()

/// The command line of `bucket-bench`.
struct BucketBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bucket-bench",
        abstract: "archive-sync's bucket replica against awscli, on a Ceph RADOS Gateway of its own on 127.0.0.1.",
        discussion: """
            Workloads (issue 23), in this order, on one store of N objects of 512 bytes: 3 first push (vs aws s3 sync), 1 no-op sync (vs one LIST of the log prefix with aws s3api list-objects-v2), 2 1,000 objects changed (vs aws s3 cp --recursive of the same files); then 4: twenty stores of M objects converging through one bucket after 1% changes each.

            Exit status: 0 when every workload ran (a missed target prints FAIL), 1 when one failed to run, 2 for bad usage. See Benchmarks/README.md.
            """
    )

    @Flag(help: "10,000 objects instead of 100,000, and 1,000 per store in workload 4 instead of 5,000.")
    var quick = false

    @Option(help: ArgumentHelp("Repetitions of the no-op sync and its LIST (medians).", valueName: "N"))
    var runs = 3

    @Flag(
        help:
            "Only start the gateway, print its AWS_* settings as shell exports, and stop it at end of standard input (for sessions by hand, such as docs/bucket.md's)."
    )
    var gatewayOnly = false

    @OptionGroup var scratch: ScratchOption

    @OptionGroup var archiveSync: ArchiveSyncOption

    func run() throws {
        if gatewayOnly {
            do {
                let gateway = try BenchGateway()
                defer { gateway.stop() }
                let names = [
                    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_CONFIG_FILE",
                    "AWS_SHARED_CREDENTIALS_FILE",
                ]
                let exports = names.map { "export \($0)='\(String(cString: getenv($0)))'\n" }.joined()
                FileHandle.standardOutput.write(Data(exports.utf8))
                _ = FileHandle.standardInput.readDataToEndOfFile()
            } catch {
                print("bucket-bench: ERROR: \(error)")
                Foundation.exit(1)
            }
            return
        }
        let cli = archiveSyncPath(archiveSync.cli)
        guard access(cli, X_OK) == 0 else {
            print("bucket-bench: ERROR: needs archive-sync at \(cli) (or --cli PATH); `make bench` builds it")
            Foundation.exit(1)
        }
        let scratch: ScratchDirectory
        do { scratch = try ScratchDirectory(under: self.scratch.directory, name: "run") } catch {
            print("bucket-bench: ERROR: \(error)")
            Foundation.exit(1)
        }
        defer { scratch.remove() }
        do {
            let gateway = try BenchGateway()
            defer { gateway.stop() }
            print(runHeading("bucket-bench", quick: quick, directory: self.scratch.directory))
            print("Ceph RADOS Gateway (memstore) on \(gateway.gateway.endpoint.absoluteString); requests counted from its access log")
            print()
            let bench = Bench(cli: cli, gateway: gateway, scratch: scratch)
            var rows = try bench.oneStore(count: quick ? 10_000 : 100_000, runs: max(1, runs))
            rows.append(try bench.twentyStores(count: quick ? 1_000 : 5_000))
            print()
            print("| workload | target | archive-sync | anchor | ratio | requests | verdict |")
            print("| --- | --- | --- | --- | --- | --- | --- |")
            for row in rows { print(row) }
        } catch {
            print("bucket-bench: ERROR: \(error)")
            Foundation.exit(1)
        }
    }
}

/// The workloads, run in one gateway.
struct Bench {
    let cli: String
    let gateway: BenchGateway
    let scratch: ScratchDirectory

    /// Runs `executable`, which must succeed; its time from spawn to exit.
    func timed(_ what: String, _ executable: String, _ arguments: [String]) throws -> Double {
        let result = try runTimed(executable, arguments)
        guard result.status == 0 else {
            let output = (try? runCapturing(executable, arguments).output) ?? ""
            throw BenchError("\(what) failed with status \(result.status): \(arguments.joined(separator: " "))\n\(output.suffix(2_000))")
        }
        return result.seconds
    }

    /// A sync of `store` with `bucket`: its time and the requests it sent.
    func sync(_ store: String, _ bucket: String) throws -> (seconds: Double, requests: Requests) {
        _ = try gateway.requestsSinceLast()
        let seconds = try timed("archive-sync sync", cli, ["sync", store, bucket])
        return (seconds, try gateway.requestsSinceLast())
    }

    /// An awscli command's time and requests.
    func aws(_ arguments: [String]) throws -> (seconds: Double, requests: Requests) {
        _ = try gateway.requestsSinceLast()
        let seconds = try timed("aws", gateway.aws, gateway.awsArguments(arguments))
        return (seconds, try gateway.requestsSinceLast())
    }

    func initialize(_ bucket: String) throws {
        let result = try runCapturing(cli, ["init", bucket])
        guard result.status == 0 else { throw BenchError("archive-sync init \(bucket) failed: \(result.output)") }
    }
}
