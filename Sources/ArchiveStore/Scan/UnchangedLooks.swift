import ArchiveLocking
import Dispatch

/// What a scan found at a row's file in a directory it did not list (unchanged since a scan
/// listed it: see `examineUnchanged` in Scan.swift).
enum Look: Sendable {
    case unchanged, changed, gone
    case notRegular(FileStatus.Kind)
}

/// The stats of an unchanged directory's files, taken chunk by chunk on other threads while
/// the scan's own thread still reads the manifest's rows: reading the rows (SQLite, one
/// thread) and stat'ing the files (the kernel, every core) overlap instead of following each
/// other, which is most of a no-op scan of a large store.
final class UnchangedLooks: Sendable {
    /// Rows per chunk: large enough that handing one over costs nothing next to its stats.
    static let chunk = 4_096

    private let directory: Descriptor
    /// Chunks being stat'ed at once, at most the lanes `parallelMap` would use here.
    private let slots: DispatchSemaphore
    private let group = DispatchGroup()
    private let found = TracedMutex<(unchanged: Int, others: [(index: Int, name: String, look: Look)], failure: (any Error)?)>((0, [], nil))

    init(in directory: Descriptor) {
        self.directory = directory
        slots = DispatchSemaphore(value: parallelLanes(Self.chunk, threshold: 0))
    }

    /// Stats a chunk of files, whose first is the `start`th row: on another thread, or on this
    /// one on every core when `last` (nothing is left to read meanwhile).
    func look(_ files: NameList, _ stamps: [FileStamp], start: Int, last: Bool) {
        guard !last else {
            record(Result { try parallelMap(files.count) { [directory] in try Self.look(files, stamps, $0, in: directory) } }, files, start: start)
            return
        }
        slots.wait()
        DispatchQueue.global().async(group: group) { [self] in
            defer { slots.signal() }
            record(Result { try files.indices.map { try Self.look(files, stamps, $0, in: directory) } }, files, start: start)
        }
    }

    /// Waits for every chunk: how many files were unchanged, and the others in row order.
    func results() throws -> (unchanged: Int, others: [(name: String, look: Look)]) {
        group.wait()
        let (unchanged, others, failure) = found.withLock { $0 }
        if let failure { throw failure }
        return (unchanged, others.sorted { $0.index < $1.index }.map { ($0.name, $0.look) })
    }

    private func record(_ looks: Result<[Look], any Error>, _ files: NameList, start: Int) {
        switch looks {
        case .success(let looks):
            var unchanged = 0
            var others: [(index: Int, name: String, look: Look)] = []
            for (index, look) in looks.enumerated() {
                if case .unchanged = look { unchanged += 1 } else { others.append((start + index, files.name(index), look)) }
            }
            found.withLock {
                $0.unchanged += unchanged
                $0.others += others
            }
        case .failure(let error):
            found.withLock { $0.failure = $0.failure ?? error }
        }
    }

    private static func look(_ files: NameList, _ stamps: [FileStamp], _ index: Int, in directory: Descriptor) throws -> Look {
        guard let status = try ArchiveStore.status(files, index, in: directory) else { return .gone }
        guard status.kind == .regular else { return .notRegular(status.kind) }
        return status.stamp == stamps[index] ? .unchanged : .changed
    }
}
