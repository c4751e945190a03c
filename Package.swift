// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "archive-sync",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "ArchiveStore", targets: ["ArchiveStore"]),
        .library(name: "ArchiveWatch", targets: ["ArchiveWatch"]),
        .executable(name: "archive-sync", targets: ["archive-sync"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-crypto", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
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
        .target(
            name: "ArchiveStore",
            dependencies: [
                "CSQLite",
                "CArchiveShims",
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        .target(
            name: "ArchiveWatch",
            dependencies: [
                "ArchiveStore",
                "CInotifyTools",
                "CArchiveShims",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "archive-sync",
            dependencies: [
                "ArchiveStore",
                "CArchiveShims",
                "ArchiveWatch",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(
            name: "quickstart",
            dependencies: ["ArchiveStore"],
            path: "Samples/Quickstart"
        ),
        .target(
            name: "BenchSupport",
            dependencies: ["ArchiveStore"],
            path: "Benchmarks/BenchSupport"
        ),
        .executableTarget(
            name: "archive-bench",
            dependencies: ["ArchiveStore", "BenchSupport"],
            path: "Benchmarks/ArchiveBench"
        ),
        .executableTarget(
            name: "watch-bench",
            dependencies: ["ArchiveStore", "ArchiveWatch", "BenchSupport"],
            path: "Benchmarks/WatchBench"
        ),
        .testTarget(
            name: "ArchiveWatchTests",
            dependencies: ["ArchiveStore", "ArchiveWatch", "archive-sync"]
        ),
        .testTarget(
            name: "ArchiveStoreTests",
            dependencies: ["ArchiveStore"]
        ),
        .executableTarget(
            name: "crash-writer",
            dependencies: ["ArchiveStore"],
            path: "Tests/CrashWriter"
        ),
        .testTarget(
            name: "CrashTests",
            dependencies: ["ArchiveStore", "crash-writer"]
        ),
        .testTarget(
            name: "ArchiveSyncCommandTests",
            dependencies: ["ArchiveStore", "archive-sync"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
