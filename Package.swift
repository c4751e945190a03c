// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "archive-sync",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "ArchiveStore", targets: ["ArchiveStore"]),
        .executable(name: "archive-sync", targets: ["archive-sync"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-crypto", "3.12.3"..<"5.0.0"),
    ],
    targets: [
        .systemLibrary(
            name: "CSQLite",
            providers: [.apt(["libsqlite3-dev"])]
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
        .executableTarget(
            name: "archive-sync",
            dependencies: [
                "ArchiveStore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(
            name: "quickstart",
            dependencies: ["ArchiveStore"],
            path: "Samples/Quickstart"
        ),
        .executableTarget(
            name: "archive-bench",
            dependencies: ["ArchiveStore"],
            path: "Benchmarks/ArchiveBench"
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
