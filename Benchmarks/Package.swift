// swift-tools-version:6.1
// The benchmarks of archive-sync: a package of their own, so that the product's manifest holds
// only the product, and the benchmarks reach the libraries through their public API only.
// `make bench` (in the repository's root) builds and runs them all; Benchmarks/README.md says how.
import PackageDescription

/// A library of the project.
func project(_ name: String) -> Target.Dependency { .product(name: name, package: "archive-sync") }

let argumentParser: Target.Dependency = .product(name: "ArgumentParser", package: "swift-argument-parser")

/// A benchmark program in the folder `path`, with `BenchSupport`, its command line and the
/// project's `libraries`.
func benchmark(_ name: String, path: String, _ libraries: [String]) -> Target {
    .executableTarget(name: name, dependencies: ["BenchSupport", "BenchCommandLine", argumentParser] + libraries.map(project), path: path)
}

let package = Package(
    name: "archive-sync-benchmarks",
    dependencies: [
        // The project itself. Its `archive-sync` product is built beside the benchmarks
        // (`swift build --package-path Benchmarks --product archive-sync`), where archive-bench,
        // watch-bench, sync-bench and remote-bench look for it.
        .package(name: "archive-sync", path: ".."),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
    ],
    targets: [
        // The benchmarks' command lines: ArgumentParser, with their exit statuses.
        .target(
            name: "BenchCommandLine",
            dependencies: [argumentParser],
            path: "BenchCommandLine"
        ),
        // What the benchmarks of the store, the watcher, the cache and sync share: the models,
        // timing, formatting, scratch directories and child processes.
        .target(name: "BenchSupport", dependencies: [project("ArchiveStore"), project("ArchiveProcess")], path: "BenchSupport"),
        benchmark("archive-bench", path: "ArchiveBench", ["ArchiveStore", "CSQLite"]),
        benchmark("watch-bench", path: "WatchBench", ["ArchiveStore", "ArchiveWatch", "ArchiveProcess"]),
        // The Swift runtime linked dynamically (the Makefile builds it apart): statically linked,
        // Foundation's NSKeyedArchiver cannot bridge Swift values (an array traps, a plist comes
        // out empty). It times no process, so the static runtime's smaller memory is not needed.
        .executableTarget(
            name: "keyed-bench",
            dependencies: ["BenchCommandLine", argumentParser, project("KeyedArchive")],
            path: "KeyedBench"
        ),
        benchmark("sync-bench", path: "SyncBench", ["ArchiveStore"]),
        benchmark("cache-bench", path: "CacheBench", ["ArchiveStore", "ArchiveCache", "ArchiveWatch"]),
        benchmark("remote-bench", path: "RemoteBench", ["ArchiveStore", "ArchiveProcess"]),
        // Live sessions over ssh (the issue of live sync's benchmarks 1-4).
        benchmark("live-bench", path: "LiveBench", ["ArchiveStore", "ArchiveSync", "ArchiveProcess"]),
        // The bucket replica against awscli on a Ceph gateway of its own (the tests' harness).
        benchmark("bucket-bench", path: "BucketBench", ["ArchiveStore", "ArchiveS3", "TestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)
