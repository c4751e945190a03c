import ArchiveStore
import Foundation
import TestSupport
import Testing

@testable import ArchiveSync

/// A `serve --stdio` child of this process, over pipes: the protocol without ssh.
func pipeReplica(_ path: String, versions: ClosedRange<UInt32> = Wire.versions) throws -> RemoteReplica {
    try RemoteReplica(command: [archiveSyncProgram, "serve", "--stdio", path], name: "pipe:\(path)", versions: versions)
}

/// A small model for stores made in bulk.
struct Item: Codable {
    var n: Int
    var text: String
}

/// Fills `store` with `count` items of about `size` bytes, in one batch.
func fill(_ store: ArchiveStore, count: Int, size: Int, tag: String, collection: String = "Item") throws {
    try store.batch { tx in
        for n in 0..<count {
            try tx.save(Item(n: n, text: String(repeating: "x", count: size) + tag), forKey: "item\(n)", in: collection)
        }
    }
}
