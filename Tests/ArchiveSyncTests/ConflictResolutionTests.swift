import ArchiveStore
import Foundation
import TestSupport
import Testing

@testable import ArchiveSync

private let person = try! ObjectID(collection: "Person", key: "p1")
private let base = #"{"address":{"city":"Oslo","zip":"0150"},"age":30,"name":"Ann"}"#

/// Two stores whose edits of `person` conflict on `address.city` (B's edit, the later one,
/// stays at the id; A's is the copy); A also changed `name`.
private func conflicted(in dir: String) async throws -> (ArchiveStore, ArchiveStore) {
    let a = try ArchiveStore(directory: dir + "/a")
    let b = try ArchiveStore(directory: dir + "/b")
    try a.put(Data(base.utf8), as: person)
    _ = try await Sync(local: a, remote: b).run()
    try a.put(Data(base.replacingOccurrences(of: "Oslo", with: "Bergen").replacingOccurrences(of: "Ann", with: "Anna").utf8), as: person)
    try b.put(Data(base.replacingOccurrences(of: "Oslo", with: "Molde").utf8), as: person)
    let report = try await Sync(local: a, remote: b).run()
    #expect(report.conflicts.map(\.paths) == [["address.city"]] && report.conflicts.first?.winner == .b, "\(report)")
    return (a, b)
}

extension RemoteSyncTests {
    @Suite("Resolving conflicts: conflicts --diff and resolve")
    struct ConflictResolutionTests {
        @Test func theDiffNamesEachPathWithBothValuesAndTheBase() async throws {
            try await withTemporaryDirectory { dir in
                let (_, b) = try await conflicted(in: dir)
                let copy = try #require(try b.conflictCopies().first)
                let differences = try b.conflictDifferences(copy)
                #expect(
                    differences == [
                        ConflictDifference(path: "address.city", current: #""Molde""#, copy: #""Bergen""#, base: #""Oslo""#),
                        ConflictDifference(path: "name", current: #""Ann""#, copy: #""Anna""#, base: #""Ann""#),
                    ])
                let shown = try await runArchiveSyncOffPool(["conflicts", dir + "/b", "--diff"])
                #expect(
                    shown.status == 0 && shown.output.contains("(a conflict copy of Person/p1)")
                        && shown.output.contains(#"  address.city: current "Molde", copy "Bergen" (base: "Oslo")"#), "\(shown)")
                let json = try await runArchiveSyncOffPool(["conflicts", dir + "/a", "--diff", "--json"])
                #expect(json.status == 0 && json.output.contains(#""path" : "address.city""#), "\(json)")
            }
        }

        /// A merged version a person wrote replaces the one at the id, the copy goes, and the
        /// next sync carries both to the other store.
        @Test func resolveKeepMergedWritesTheFileAndTheNextSyncCarriesIt() async throws {
            try await withTemporaryDirectory { dir in
                let (a, b) = try await conflicted(in: dir)
                let merged = #"{"address":{"city":"Bergen","zip":"0150"},"age":30,"name":"Anna"}"#
                try Data(merged.utf8).write(to: URL(fileURLWithPath: dir + "/merged.json"))
                let resolved = try await runArchiveSyncOffPool([
                    "resolve", dir + "/b", "Person/p1", "--keep", "merged", "--file", dir + "/merged.json",
                ])
                #expect(resolved.status == 0 && resolved.output.hasPrefix("resolved Person/p1: kept the merged version as version"), "\(resolved)")
                #expect(try b.conflictCopies().isEmpty && String(decoding: b.data(for: person), as: UTF8.self) == merged)
                let report = try await Sync(local: a, remote: b).run()
                #expect(report.conflicts.isEmpty && report.copiedToA == 1 && report.deletedOnA == 1, "\(report)")
                #expect(try a.conflictCopies().isEmpty && a.liveHashes() == b.liveHashes())
            }
        }

        @Test func resolveKeepCopyOrCurrent() async throws {
            try await withTemporaryDirectory { dir in
                let (a, b) = try await conflicted(in: dir)
                let copy = try #require(try a.conflictCopies().first)
                let copied = try a.data(for: copy.id)
                let resolved = try await runArchiveSyncOffPool(["resolve", dir + "/a", copy.id.description, "--keep", "copy"])
                #expect(resolved.status == 0, "\(resolved)")
                #expect(try a.data(for: person) == copied && a.conflictCopies().isEmpty)
                let current = try b.data(for: person)
                try b.resolveConflict(try b.conflictCopy(for: person), keeping: .current)
                #expect(try b.data(for: person) == current && b.conflictCopies().isEmpty)
            }
        }

        @Test func badResolveRequestsExit2AndChangeNothing() async throws {
            try await withTemporaryDirectory { dir in
                let (a, _) = try await conflicted(in: dir)
                let before = try a.liveHashes()
                for arguments in [
                    ["Person/p1", "--keep", "merged"], ["Person/p1", "--keep", "copy", "--file", dir + "/x"], ["Person/nobody", "--keep", "copy"],
                    ["Person/p1", "--keep", "theirs"],
                ] {
                    let refused = try await runArchiveSyncOffPool(["resolve", dir + "/a"] + arguments)
                    #expect(refused.status == 2 && !refused.errorOutput.isEmpty, "\(arguments): \(refused)")
                }
                #expect(try a.liveHashes() == before)
            }
        }
    }
}
