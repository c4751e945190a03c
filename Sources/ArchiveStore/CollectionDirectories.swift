import ArchiveLocking
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The collection directories this store's writes have opened, kept open: a save then checks
/// its directory with one `statx` instead of opening and closing it (two calls, and a file
/// structure made and freed, about 3% of a single save's CPU).
///
/// A kept descriptor is used only while the name still leads to it: same device and inode,
/// looked up without following a symlink. A directory removed, renamed away or replaced
/// (even by a symlink) is opened again as it is now. No other directory can take a kept
/// one's inode number meanwhile: the open descriptor keeps the inode allocated.
final class CollectionDirectories: Sendable {
    private struct Kept: Sendable {
        var directory: Descriptor
        var identity: FileSystem.Identity
    }

    private let kept = TracedMutex<[ExactName: Kept]>([:])

    /// How many directories are kept at most: a store of many collections (a sync's pages
    /// span them all) must not hold a descriptor for each, which could use up the process's
    /// limit. Past it, the kept ones are let go and keeping starts over.
    static let limit = 32

    /// How many directories are kept now.
    var count: Int { kept.withLock { $0.count } }

    /// The kept descriptor of `name` (an entry of `root`), when that name still leads to it;
    /// nil when it does not (then forgotten) or none is kept.
    func current(_ name: String, in root: Descriptor) -> Descriptor? {
        guard let entry = kept.withLock({ $0[ExactName(name)] }) else { return nil }
        if FileSystem.identity(of: name, in: root)?.identity == entry.identity { return entry.directory }
        kept.withLock { kept in
            if kept[ExactName(name)]?.directory === entry.directory { kept[ExactName(name)] = nil }
        }
        return nil
    }

    /// Keeps `directory`, just opened as `name`.
    func keep(_ directory: Descriptor, as name: String) {
        guard let identity = FileSystem.identity(of: directory) else { return }
        kept.withLock { kept in
            if kept.count >= Self.limit && kept[ExactName(name)] == nil { kept.removeAll() }
            kept[ExactName(name)] = Kept(directory: directory, identity: identity)
        }
    }
}
