import Foundation
import Testing

@testable import ArchiveStore

#if canImport(Glibc)
    import Glibc
#endif

/// The system-call layer: joining paths, lock files, and never following a symlink under a store.
@Suite("System-call layer")
struct SystemLayerTests {
    @Test func aPathComponentIsJoinedWithOneSlash() {
        #expect("/srv/store".appendingComponent("Person") == "/srv/store/Person")
        #expect("/srv/store/".appendingComponent("Person") == "/srv/store/Person")
        #expect("/".appendingComponent("srv") == "/srv")
        #expect("store".appendingComponent("Person/a.json") == "store/Person/a.json")
        #expect("/srv/store".appendingComponents(".archive-sync", "manifest.sqlite") == "/srv/store/.archive-sync/manifest.sqlite")
        #expect("".appendingComponent("a") == "a")
    }

    @Test func aSecondHolderOfALockFileIsRefusedUntilTheFirstReleasesIt() throws {
        try withStore { store, _ in
            let first = try #require(try store.lockFile(named: "test.lock"))
            let second = try #require(try store.lockFile(named: "test.lock"))
            #expect(try first.lockExclusively())
            #expect(try second.isHeldElsewhere())
            #expect(try !second.lockExclusively())
            first.release()
            #expect(try !second.isHeldElsewhere())
            #expect(try second.lockExclusively())
        }
    }

    @Test func aLockFileTellsTheHoldersPid() throws {
        try withStore { store, _ in
            let holder = try #require(try store.lockFile(named: "test.lock"))
            #expect(try holder.lockExclusively())
            try holder.recordHolder()
            let other = try #require(try store.lockFile(named: "test.lock", create: false))
            #expect(other.recordedHolder() == getpid())
            #expect(try store.lockFile(named: "absent.lock", create: false) == nil)
        }
    }

    /// The kernel drops an `flock` when its holder dies, however it dies: a lock left by a
    /// process killed with SIGKILL (no chance to clean up) can be taken at once.
    @Test func aLockHeldByAKilledProcessCanBeTaken() throws {
        try withStore { store, path in
            let lockPath = path + "/.archive-sync/test.lock"
            let child = Process()
            // One process holds it: the shell takes the lock on its descriptor 9, which `sleep`
            // inherits when the shell becomes it.
            child.executableURL = URL(fileURLWithPath: "/bin/sh")
            child.arguments = ["-c", "exec 9>>\"$0\" && flock --exclusive 9 && exec sleep 60", lockPath]
            try child.run()
            defer { if child.isRunning { kill(child.processIdentifier, SIGKILL) } }
            let lock = try #require(try store.lockFile(named: "test.lock"))
            let deadline = ContinuousClock.now + .seconds(30)
            while try !lock.isHeldElsewhere() {
                try #require(ContinuousClock.now < deadline, "the child never took the lock")
                usleep(10_000)
            }
            #expect(try !lock.lockExclusively())
            #expect(kill(child.processIdentifier, SIGKILL) == 0)
            child.waitUntilExit()
            #expect(child.terminationReason == .uncaughtSignal)
            #expect(try lock.lockExclusively())
        }
    }

    /// `fileStamp(atPath:)` (what the model cache checks a cached object against) does not
    /// follow a collection directory that was replaced by a symlink: the file behind it is not
    /// the store's.
    @Test func aFileStampIsNotTakenThroughASymlinkedCollection() throws {
        try withStore { store, path in
            try store.save(Person(name: "Ada", age: 36), forKey: "ada")
            let id = try ObjectID(collection: "Person", key: "ada")
            let relative = "Person/" + store.objectFileName(of: id)
            #expect(store.fileStamp(atPath: relative) != nil)
            #expect(rename(path + "/Person", path + "/Elsewhere") == 0)
            #expect(symlink("Elsewhere", path + "/Person") == 0)
            #expect(store.fileStamp(atPath: relative) == nil)
        }
    }
}
