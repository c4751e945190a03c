import ArchiveStore
import ArchiveSync
import ArgumentParser
import Foundation

/// The two stores of `diff` and `sync`.
struct StorePairArguments: ParsableArguments {
    @Argument(help: ArgumentHelp("The first store: a directory, [user@]host:path on another host, or s3://BUCKET/PREFIX.", valueName: "a"))
    var a: String

    @Argument(help: ArgumentHelp("The second store: a directory, [user@]host:path on another host, or s3://BUCKET/PREFIX.", valueName: "b"))
    var b: String
}

struct Diff: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show what a sync of two stores would do, changing nothing.",
        discussion: """
            Makes both manifests current (a scan, unless a watcher keeps a store current), then compares them: only what changed since the two last synced, or everything when they never met. Lists each copy, delete and conflict; `--json` gives the plan as one document.

            Either store may be on another host, as [user@]host:path (see `sync`).

            Examples:
              archive-sync diff ./a ./b --json
              archive-sync diff ./store backup.example.com:/srv/store
            """
    )

    @OptionGroup var stores: StorePairArguments
    @OptionGroup var remote: RemoteOptions
    @OptionGroup var output: OutputOptions

    func run() throws {
        let report = try stores.sync(options: SyncOptions(dryRun: true), create: false, remote: remote).runNow()
        if output.json { return try output.printJSON(report) }
        printPlan(report)
        printLine(report.summary)
    }
}

struct SyncCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Make two stores equal, two-way, losing nothing either side wrote.",
        discussion: """
            Per object: the same contents on both sides need nothing; a version that has seen the other's changes (its version vector dominates) is copied over it; two versions made apart are merged field by field when the object is JSON or a property list and the version both last shared is still in either history (the merged version is written on both sides; `--merge none` turns this off). Otherwise, or where the same field changed both ways, they are a conflict. A conflict keeps both: the newer version stays at the id on both sides and the other is saved beside it on both sides as KEY.conflict-REPLICA-TIME-HASH (the first 8 characters of the replica that made it, when in UTC, and 8 hex digits of its contents' hash; see `archive-sync conflicts`), unless --prefer decides (it decides only what a merge leaves). Deletes travel too, but an edit beats a delete. The loser of any overwrite stays in history (`archive-sync history`).

            The first sync of two stores compares everything; later ones only what changed since (each store keeps a checkpoint per peer). A sync killed at any moment leaves every object old or new; run it again to finish. A sync that would delete more than half of a side's objects, or a side that is not a store, stops unless --force.

            Either store may be on another host, named [user@]host:path (a ':' before any '/', as rsync reads it). ssh runs `archive-sync serve --stdio PATH` there and the two speak the sync protocol over its stdin and stdout; --rsh replaces ssh and --remote-cmd names the program on the far host.

            Either store may be a bucket replica, s3://BUCKET/PREFIX (made by `archive-sync init s3://BUCKET/PREFIX`), synced with a store in a directory here: the store pushes its changes into its own log in the bucket and reads the other stores' logs, so many hosts converge through one bucket and nobody runs a hub (docs/bucket.md). Each sync first checks that the server still enforces conditional writes. Credentials as for the AWS tools (see `init`).

            Exit status: 0 when synced, 1 when something failed, 2 for bad usage or input, 3 when another sync holds one of the stores (run it again later).

            Examples:
              archive-sync sync ./a ./b
              archive-sync sync ./store user@host:/srv/store --rsh "ssh -p 2222 -i key"
              archive-sync sync ./a /mnt/backup/store --dry-run
              archive-sync sync ./a ./b --prefer newer --json
              archive-sync sync ./store s3://team-data/archive

            Live (--watch): both stores are watched (the far one by `serve --stdio` in its watch mode, over one connection for the session's life); a change on either side starts an incremental sync after --debounce (default 20 ms), a full compare runs at the start, after each reconnection and hourly. A cycle's own writes are never sent back, and nothing runs while neither side changes. A far side that goes away (noticed within 25 s by the keepalive) is retried after 1 s, doubling to 60 s; writes here keep working. A safety valve that trips stops the session with a message and deletes nothing (exit 1). SIGINT or SIGTERM stop it within 2 s (exit 0). `archive-sync status STORE` shows the session.
              archive-sync sync ./store user@host:/srv/store --watch --json
            """
    )

    @OptionGroup var stores: StorePairArguments

    @Flag(help: "Show what would be done and change nothing (as `diff`).")
    var dryRun = false

    @Option(help: ArgumentHelp("Decide conflicts instead of keeping both versions: a, b, newer or older.", valueName: "side"))
    var prefer: SyncPreference?

    @Option(
        help: ArgumentHelp(
            "How concurrent edits of a JSON or property-list object are treated: fields (merged field by field; a conflict only where the same field changed both ways) or none (always a conflict).",
            valueName: "mode"))
    var merge: SyncMerge = .fields

    @Flag(help: "Sync even when more than half of a side's objects would be deleted, and make a directory that is not a store one.")
    var force = false

    @Flag(help: "Compare every object, not only what changed since the last sync (after restoring a store from a backup).")
    var full = false

    @Flag(
        help:
            "Keep the two stores in step until SIGINT or SIGTERM: both sides watched (a far one over one ssh connection), each change synced within a fraction of a second, one line per object carried (--json: one JSON object per line); reconnects on its own."
    )
    var watch = false

    @OptionGroup var live: LiveArguments
    @OptionGroup var remote: RemoteOptions
    @OptionGroup var output: OutputOptions

    func validate() throws {
        if !watch && live.isSet { throw ValidationError("--debounce and --keepalive go with --watch") }
        if watch && dryRun { throw ValidationError("--dry-run cannot go with --watch: a live session syncs; `diff` shows the plan") }
        if watch && (isBucketURL(stores.a) || isBucketURL(stores.b)) {
            throw ValidationError("a live session with a bucket is `archive-sync watch STORE --sync-with s3://BUCKET/PREFIX`")
        }
    }

    func run() throws {
        if watch {
            let options = live.options(sync: SyncOptions(preference: prefer, merge: merge, force: force, full: full), create: force)
            return try runLive([LiveSession(remote.location(stores.a), remote.location(stores.b), options: options)], json: output.json)
        }
        let progress = ProgressLine("synced")
        let options = SyncOptions(dryRun: dryRun, preference: prefer, merge: merge, force: force, full: full, progress: { progress.update($0, $1) })
        let report = try stores.sync(options: options, create: force, remote: remote).runNow()
        progress.finish()
        if output.json { return try output.printJSON(report) }
        if dryRun { printPlan(report) }
        if !dryRun {
            for merge in report.merges { printLine("merged \(merge.id): \(merge.paths.joined(separator: ", "))") }
        }
        for conflict in report.conflicts {
            let kept = conflict.winner == .a ? stores.a : stores.b
            printLine(
                "conflict \(conflict.id)\(describe(conflict.paths)): kept the version from \(kept)"
                    + (conflict.copy.map { ", saved the other as \($0)" } ?? ""))
        }
        for skipped in report.skipped {
            printLine("skipped \(skipped.id): it changed in \(skipped.side == .a ? stores.a : stores.b) during the sync; the next sync takes it")
        }
        printLine("\(dryRun ? "would sync" : "synced") \(stores.a) and \(stores.b): \(report.summary)")
    }
}

extension SyncPreference: ExpressibleByArgument {}
extension SyncMerge: ExpressibleByArgument {}

/// ` (name, address.city both changed)` for a conflict a field merge found; nothing when no merge was tried.
private func describe(_ paths: [String]?) -> String {
    guard let paths, !paths.isEmpty else { return "" }
    return " (\(paths.joined(separator: ", ")) changed on both sides)"
}

struct Conflicts: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the conflict copies in a store, waiting for a person.",
        discussion: """
            A sync that finds an object changed on both sides (the same field, when it merges field by field) keeps both versions: one at the id, the other beside it as KEY.conflict-REPLICA-TIME-HASH. --diff shows, per copy, where it differs from the current version: each path, both values, and the base's value when history still holds the version both edits started from. Resolve one with `archive-sync resolve`; the next sync carries the resolution to the other store.

            Examples:
              archive-sync conflicts ./store --json
              archive-sync conflicts ./store --diff
            """
    )

    @OptionGroup var store: StoreArgument

    @Flag(help: "Show where each copy differs from the current version, field by field.")
    var diff = false

    @OptionGroup var output: OutputOptions

    /// A copy and where it differs, for `--diff --json`; `error` when it cannot be compared.
    private struct Compared: Encodable {
        var copy: ConflictCopy
        var differences: [ConflictDifference]?
        var error: String?
    }

    func run() throws {
        let opened = try store.open()
        let copies = try opened.conflictCopies()
        if diff {
            let compared = copies.map { copy in
                do {
                    return Compared(copy: copy, differences: try opened.conflictDifferences(copy))
                } catch {
                    return Compared(copy: copy, error: "\(error)")
                }
            }
            if output.json { return try output.printJSON(compared) }
            if copies.isEmpty { return print("no conflicts") }
            for entry in compared {
                printLine("\(entry.copy.id) (a conflict copy of \(entry.copy.original))")
                if let error = entry.error { printLine("  \(error)") }
                for difference in entry.differences ?? [] {
                    let base = difference.base.map { " (base: \($0))" } ?? ""
                    printLine("  \(difference.path): current \(difference.current ?? "absent"), copy \(difference.copy ?? "absent")\(base)")
                }
            }
            return
        }
        if output.json { return try output.printJSON(copies) }
        if copies.isEmpty { return print("no conflicts") }
        print(
            table(
                [["copy", "of", "bytes", "saved"]]
                    + copies.map { [$0.id.description, $0.original.description, String($0.size), $0.saved.shortDescription] }))
    }
}

struct Resolve: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Settle a conflict: keep one version at the id and remove the conflict copy.",
        discussion: """
            ID is the conflict copy, or the object when it has one copy. --keep current leaves the version at the id; --keep copy makes the copy's version the next version at the id; --keep merged --file F makes F (a JSON document, such as one edited from both; written in the object's codec) the next version. The copy is then removed. The next sync carries both changes to the other store.

            Examples:
              archive-sync resolve ./store Person/ada --keep copy
              archive-sync resolve ./store Person/ada --keep merged --file ada.json
            """
    )

    enum Keep: String, ExpressibleByArgument, CaseIterable { case current, copy, merged }

    @OptionGroup var store: StoreArgument

    @Argument(help: ArgumentHelp("The conflict copy, or the object it is a copy of, as COLLECTION/KEY.", valueName: "id"))
    var id: String

    @Option(help: ArgumentHelp("Which version to keep: current, copy or merged.", valueName: "version"))
    var keep: Keep

    @Option(help: "With --keep merged: the file holding the merged version.")
    var file: String?

    func run() throws {
        let objectID = try ObjectID(parsing: id)
        let resolution: ConflictResolution
        switch (keep, file) {
        case (.merged, let file?): resolution = .merged(try readInputFile(file))
        case (.merged, nil): throw ArchiveError.invalidInput("--keep merged needs --file with the merged version")
        case (_, _?): throw ArchiveError.invalidInput("--file goes only with --keep merged")
        case (.current, nil): resolution = .current
        case (.copy, nil): resolution = .copy
        }
        let opened = try store.open()
        let copy = try opened.conflictCopy(for: objectID)
        let version = try opened.resolveConflict(copy, keeping: resolution)
        let kept = version.map { "kept the \(keep.rawValue) version as version \($0)" } ?? "kept the current version"
        printLine("resolved \(copy.original): \(kept), removed \(copy.id)")
    }
}

/// Prints a plan, one step a line.
private func printPlan(_ report: SyncReport) {
    for action in report.actions ?? [] {
        let side = action.to == .a ? "A" : "B"
        switch action.kind {
        case .copy: printLine("copy     \(action.id) to \(side)")
        case .delete: printLine("delete   \(action.id) on \(side)")
        case .conflict:
            let winner = action.to == .a ? "B" : "A"
            printLine(
                "conflict \(action.id)\(describe(action.paths)): keep \(winner)'s, "
                    + (action.copy.map { "save \(side)'s as \($0)" } ?? "\(side)'s stays in history"))
        case .merge: printLine("merge    \(action.id): \((action.paths ?? []).joined(separator: ", "))")
        }
    }
}
