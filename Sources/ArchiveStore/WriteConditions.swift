import Foundation

#if canImport(Glibc)
    import Glibc
#endif

// What a conditional write (``ArchiveStore/applyConditional(_:then:)``) checks before it goes
// ahead: in the manifest under the write lock, and on disk just before its rename.

/// What an object must hold for a conditional write to go ahead: these live contents, or
/// (nil) no live object.
struct WriteCondition: Sendable {
    var liveHash: ContentHash?
}

/// What a conditional write's target must still look like on disk, checked just before the
/// rename (or unlink) that replaces it: a file changed or created since the last scan, which
/// the manifest has not recorded yet, must not be overwritten either.
enum DiskExpectation: Sendable {
    /// Nothing may stand at this name.
    case absent(String)
    /// The file holds these bytes (its recorded stamp, or failing that its hash, says so).
    case holds(file: String, stamp: FileStamp?, hash: ContentHash?)
}

extension ArchiveStore {
    /// What a conditional write expects on disk, when the manifest still holds what its
    /// condition names; nil when it does not (the write is skipped). `record` is its object's
    /// row, read under the write lock.
    func diskExpectation(of write: PendingWrite, record: ObjectRecord?, directoryExists: Bool) -> DiskExpectation? {
        guard let condition = write.condition else { return nil }
        let live = record.flatMap { $0.isDeleted ? nil : $0 }
        guard live?.hash == condition.liveHash else { return nil }
        if let live { return directoryExists ? .holds(file: live.file, stamp: live.stamp, hash: live.hash) : nil }
        return .absent(write.file)
    }

    /// True when the disk still looks as `expectation` says.
    func diskMatches(_ expectation: DiskExpectation, in directory: Descriptor) throws -> Bool {
        switch expectation {
        case .absent(let file):
            return try file.isEmpty || FileSystem.status(file, in: directory, path: directory.path.appendingComponent(file)) == nil
        case .holds(let file, let stamp, let hash):
            let where_ = directory.path.appendingComponent(file)
            guard let status = try FileSystem.status(file, in: directory, path: where_), status.kind == .regular else { return false }
            if status.stamp == stamp { return true }
            // Touched since it was recorded: still as expected only if its bytes are.
            return try FileSystem.readFile(file, in: directory, path: where_).map(ContentHash.init(of:)) == hash
        }
    }
}
