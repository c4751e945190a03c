// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "archive-sync",
    products: [
        .library(name: "ArchiveStore", targets: ["ArchiveStore"]),
        .library(name: "ArchiveWatch", targets: ["ArchiveWatch"]),
        .library(name: "ArchiveSync", targets: ["ArchiveSync"]),
        .library(name: "ArchiveCache", targets: ["ArchiveCache"]),
        .library(name: "KeyedArchive", targets: ["KeyedArchive"]),
        .library(name: "ArchiveProcess", targets: ["ArchiveProcess"]),
        .library(name: "ArchiveS3", targets: ["ArchiveS3"]),
        .library(name: "ArchiveBucket", targets: ["ArchiveBucket"]),
        .executable(name: "archive-sync", targets: ["archive-sync"]),
        // The tests' harness (the throw-away Ceph gateway, the counting proxy) for the benchmarks'
        // package, so that the gateway's bring-up is defined once; no part of the product uses it.
        .library(name: "TestSupport", targets: ["TestSupport"]),
        // SQLite itself, for the benchmarks' floor of a save whose one flush is a SQLite commit.
        .library(name: "CSQLite", targets: ["CSQLite"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-crypto", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/async-http-client", exact: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
    ],
    targets: [
        .systemLibrary(
            name: "CSQLite",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        // libinotifytools is GPL-2: only ArchiveWatch links it, so an app that only persists
        // models (ArchiveStore) does not.
        .systemLibrary(
            name: "CInotifyTools",
            providers: [.apt(["libinotifytools0-dev"])]
        ),
        .target(name: "CArchiveShims"),
        // The manifest's SQLite VFS: the `unix` one, writing a commit's WAL frames in one call.
        .target(name: "CWALGather", dependencies: ["CSQLite"]),
        // A Mutex the thread sanitizer sees (TracedMutex.swift says why).
        .target(name: "ArchiveLocking", dependencies: ["CArchiveShims"]),
        // The child-process type: the sync transport's, the tests' and the benchmarks'.
        .target(name: "ArchiveProcess", dependencies: ["ArchiveLocking", "CArchiveShims"]),
        // The store's fast JSON decoder: JSONDecoder's values, or nil where it is not sure.
        .target(name: "ArchiveJSON"),
        .target(
            name: "ArchiveStore",
            dependencies: [
                "ArchiveJSON",
                "CSQLite",
                "CWALGather",
                "CArchiveShims",
                "ArchiveLocking",
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        .target(
            name: "ArchiveWatch",
            dependencies: [
                "ArchiveStore",
                "ArchiveLocking",
                "CInotifyTools",
                "CArchiveShims",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Sync of two stores: the planner, the executor and the transports.
        .target(
            name: "ArchiveSync",
            dependencies: ["ArchiveStore", "ArchiveLocking", "ArchiveMerge", "ArchiveProcess", "ArchiveWatch", "CArchiveShims"]
        ),
        // A bucket prefix of S3-compatible storage as a sync replica (issue 23): a module of its own
        // so that the sync and its fuzzers link no HTTP client.
        .target(
            name: "ArchiveBucket",
            dependencies: ["ArchiveStore", "ArchiveSync", "ArchiveS3", "ArchiveLocking", .product(name: "Crypto", package: "swift-crypto")]
        ),
        // A typed in-memory model cache over a store, invalidated by its change stream.
        .target(
            name: "ArchiveCache",
            dependencies: ["ArchiveStore", "ArchiveLocking"]
        ),
        // Field-level three-way merge of documents (issue 21): Foundation only, no store, so the
        // planner can call it as a pure function.
        .target(name: "ArchiveMerge"),
        // An S3 client (issue 23): Signature V4 over swift-crypto, requests over async-http-client,
        // no S3 SDK (none is among the package copies). The store only for ExitStatusError.
        .target(
            name: "ArchiveS3",
            dependencies: [
                "ArchiveStore",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // A safe reader of NSKeyedArchiver archives: Foundation only, never traps.
        .target(name: "KeyedArchive"),
        .executableTarget(
            name: "archive-sync",
            dependencies: [
                "ArchiveStore",
                "ArchiveBucket",
                "ArchiveS3",
                "ArchiveLocking",
                "CArchiveShims",
                "ArchiveWatch",
                "ArchiveSync",
                "KeyedArchive",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(
            name: "quickstart",
            dependencies: ["ArchiveStore"],
            path: "Samples/Quickstart"
        ),
        .executableTarget(
            name: "model-cache",
            dependencies: ["ArchiveStore", "ArchiveCache", "ArchiveWatch"],
            path: "Samples/ModelCache"
        ),
        // What the test targets share: finding and running the built programs, temp
        // directories, child processes, an sshd on 127.0.0.1, and a throw-away Ceph RADOS Gateway
        // with a fault-injecting proxy in front of it (the S3 tests).
        .target(
            name: "TestSupport",
            dependencies: [
                "ArchiveProcess",
                "ArchiveLocking",
                "ArchiveS3",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            path: "Tests/TestSupport"
        ),
        // Runs the client against a real Ceph RADOS Gateway on 127.0.0.1 (TestSupport's CephGateway).
        .testTarget(
            name: "ArchiveS3Tests",
            dependencies: ["ArchiveS3", "TestSupport"]
        ),
        // Runs `archive-sync serve --stdio` as the far side of its remote replicas and syncs
        // through the CLI over sshd (SSHTests).
        .testTarget(
            name: "ArchiveSyncTests",
            dependencies: ["ArchiveStore", "ArchiveSync", "ArchiveMerge", "TestSupport", "archive-sync"]
        ),
        // Runs `archive-sync put` as the other process that writes a cached store.
        // The bucket format's logic over an in-memory bucket; bucket replicas on a real Ceph RADOS
        // Gateway, through the library and the built command.
        .testTarget(
            name: "ArchiveBucketTests",
            dependencies: ["ArchiveBucket", "ArchiveS3", "ArchiveStore", "ArchiveSync", "ArchiveLocking", "TestSupport", "archive-sync"]
        ),
        .testTarget(
            name: "ArchiveCacheTests",
            dependencies: ["ArchiveStore", "ArchiveCache", "ArchiveWatch", "TestSupport", "archive-sync"]
        ),
        .testTarget(
            name: "ArchiveProcessTests",
            dependencies: ["ArchiveProcess"]
        ),
        .testTarget(
            name: "ArchiveLockingTests",
            dependencies: ["ArchiveLocking", "TestSupport"]
        ),
        .testTarget(
            name: "KeyedArchiveTests",
            dependencies: ["KeyedArchive", "TestSupport"],
            resources: [.copy("Fixtures")]
        ),
        // Runs `archive-sync put` as the other process whose writes a watcher reports.
        .testTarget(
            name: "ArchiveMergeTests",
            // The store only to check against its codec and VersionVector: the module has none.
            dependencies: ["ArchiveMerge", "ArchiveStore", "TestSupport"]
        ),
        .testTarget(
            name: "ArchiveWatchTests",
            dependencies: ["ArchiveStore", "ArchiveWatch", "ArchiveLocking", "TestSupport", "archive-sync"]
        ),
        .testTarget(
            name: "ArchiveStoreTests",
            dependencies: ["ArchiveStore", "ArchiveJSON", "ArchiveLocking", "TestSupport"]
        ),
        .executableTarget(
            name: "crash-writer",
            dependencies: ["ArchiveStore"],
            path: "Tests/CrashWriter"
        ),
        .testTarget(
            name: "CrashTests",
            dependencies: ["ArchiveStore", "ArchiveProcess", "TestSupport", "crash-writer"]
        ),
        // Simulated power cuts: Tests/PowerCut's recorder and state builder, run on the CLI.
        .testTarget(
            name: "PowerCutTests",
            dependencies: ["TestSupport", "archive-sync", "crash-writer"]
        ),
        .testTarget(
            name: "ArchiveSyncCommandTests",
            dependencies: ["ArchiveStore", "TestSupport", "archive-sync"]
        ),
    ],
    swiftLanguageModes: [.v6]
)

// libFuzzer targets, one per decoder of outside bytes (docs/fuzzing.md). `make fuzz` builds them
// with `-sanitize=fuzzer,address -DFUZZING`; a plain build makes each a program that replays the
// inputs named on its command line.
let fuzzTargets: [(name: String, dependencies: [Target.Dependency])] = [
    ("fuzz-wire-request", ["ArchiveSync"]),
    ("fuzz-wire-reply", ["ArchiveSync"]),
    ("fuzz-serve", ["ArchiveStore", "ArchiveSync"]),
    ("fuzz-keyed-archive", ["KeyedArchive"]),
    ("fuzz-plist-codec", ["ArchiveStore"]),
    ("fuzz-json", ["ArchiveJSON", "ArchiveStore"]),
    ("fuzz-manifest", ["ArchiveStore"]),
    ("fuzz-file-name", ["ArchiveStore"]),
]
package.targets += [
    .target(name: "CFuzzer", path: "Fuzz/CFuzzer"),
    .target(name: "FuzzSupport", dependencies: ["CFuzzer"], path: "Fuzz/FuzzSupport"),
]
package.targets += fuzzTargets.map { .executableTarget(name: $0.name, dependencies: $0.dependencies + ["FuzzSupport"], path: "Fuzz/\($0.name)") }
