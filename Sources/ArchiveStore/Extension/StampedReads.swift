import ArchiveLocking
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

// Loads with the stamp their file had, and the change stream as a client follows it: what an
// in-memory cache of a store's objects needs (`ArchiveCache`). Its tables are its own (see
// Extension/StoreExtension.swift).

/// The stamp of an object's file: size, modification time and inode, as `fstatat` gives them.
@usableFromInline
package struct ObjectFileStamp: Equatable, Sendable {
    @usableFromInline package var size: Int64
    @usableFromInline package var mtimeNanoseconds: Int64
    @usableFromInline package var inode: UInt64

    init(_ stamp: FileStamp) {
        size = stamp.size
        mtimeNanoseconds = stamp.mtimeNanoseconds
        inode = stamp.inode
    }
}

/// A loaded object, with the name and stamp its file had *before* it was read: a later
/// change to the file can only make the stamp differ, never hide behind it.
@usableFromInline
package struct StampedObject<Value> {
    @usableFromInline package var value: Value
    @usableFromInline package var file: String
    /// The file's path relative to the store: `Person/person1.json`.
    @usableFromInline package var path: String
    /// nil when the object was found under a file other than its collection's codec's name.
    @usableFromInline package var stamp: ObjectFileStamp?
}

extension ArchiveStore {
    /// Calls `body` with every batch of changes this store publishes, synchronously, before the
    /// write that recorded them returns (and as the watcher records other processes' changes).
    /// `body` must not use the store. Returns a token for ``stopObservingChanges(_:)``.
    package func observeChanges(_ body: @escaping @Sendable ([StoreChange]) -> Void) -> Int {
        manifest.feed.observe(body)
    }

    package func stopObservingChanges(_ token: Int) {
        manifest.feed.stopObserving(token)
    }

    /// Odd while a watcher in this process follows other processes' changes; changes each time
    /// one starts or stops. One atomic load.
    package var followGeneration: Int { manifest.feed.followGeneration.load(ordering: .acquiring) }

    /// The name of `collection`'s directory in the store.
    package func directoryName(ofCollection collection: String) -> String {
        FileName.encode(collection)
    }

    /// The stamp of the file at `relativePath` in the store (`Person/person1.json`), or nil
    /// when it is not a regular file, a directory on the way is a symlink, or it cannot be
    /// stat'ed. The corresponding C function is `fstatat` (see ``FileSystem/regularFileStamp(atRelativePath:in:)``).
    @usableFromInline
    package func fileStamp(atPath relativePath: String) -> ObjectFileStamp? {
        FileSystem.regularFileStamp(atRelativePath: relativePath, in: root).map(ObjectFileStamp.init)
    }

    /// The name `id`'s file has in its collection's codec, such as `person1.json`.
    package func objectFileName(of id: ObjectID) -> String {
        FileName.join(stem: FileName.encode(id.key), extension: codec(for: id.collection).fileExtension)
    }

    /// Loads `id` as a `T` with the stamp its file had before the read (from the same open
    /// file: one `openat2`, `fstat` and `read`), or nil when absent. Reads only the file the
    /// manifest names, as ``load(_:forKey:in:)`` does.
    @usableFromInline
    package func loadStamped<T: Decodable>(_ type: T.Type, id: ObjectID) throws -> StampedObject<T>? {
        guard let file = try withManifest({ try $0.readOne { try $0.liveFile(of: id) } }) else {
            do { try refuseWhatIsThere(instead: id) } catch { throw ArchiveError.wrap(error) }
            return nil
        }
        let relative = FileName.encode(id.collection).appendingComponent(file)
        do {
            guard let (data, stamp) = try FileSystem.readStampedFile(relative, in: root, path: path.appendingComponent(relative)) else { return nil }
            let value = try decode(type, id: id, file: file, data: data, schemaVersion: { try self.recordedSchemaVersion(of: id) })
            return StampedObject(value: value, file: file, path: relative, stamp: ObjectFileStamp(stamp))
        } catch let error as SystemCallError where error.errno == ENOTDIR {
            return nil
        } catch {
            throw ArchiveError.wrap(error)
        }
    }

    /// Loads `id` from `file`, as ``loadStamped(_:id:)`` does, without asking the manifest
    /// which file is the object's: nil (nothing decoded) unless the file still has `stamp`, the
    /// stamp it had when a load found the object in it. The same file with the same stamp holds
    /// the same version; any write, the store's or another program's, changes the stamp.
    @usableFromInline
    package func loadStamped<T: Decodable>(_ type: T.Type, id: ObjectID, file: String, ifStamp stamp: ObjectFileStamp) throws -> StampedObject<T>? {
        let relative = FileName.encode(id.collection).appendingComponent(file)
        do {
            guard let (data, found) = try FileSystem.readStampedFile(relative, in: root, path: path.appendingComponent(relative)),
                ObjectFileStamp(found) == stamp
            else { return nil }
            let value = try decode(type, id: id, file: file, data: data, schemaVersion: { try self.recordedSchemaVersion(of: id) })
            return StampedObject(value: value, file: file, path: relative, stamp: stamp)
        } catch let error as SystemCallError where error.errno == ENOTDIR {
            return nil
        } catch {
            throw ArchiveError.wrap(error)
        }
    }
}
