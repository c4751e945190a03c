import ArchiveStore
import Foundation
import TestSupport
import Testing

@testable import ArchiveSync

@Suite("Naming a store here or on another host")
struct StoreLocationTests {
    @Test(arguments: [
        ("./store", StoreLocation.directory("./store")),
        ("/srv/a:b", .directory("/srv/a:b")),  // a '/' before the ':' is a path
        (":store", .directory(":store")),
        ("host:/srv/store", .remote(RemoteStore(host: "host", path: "/srv/store"))),
        ("me@host:", .remote(RemoteStore(host: "me@host", path: "."))),
        ("[::1]:s", .remote(RemoteStore(host: "::1", path: "s"))),
    ])
    func aLocationIsReadAsRsyncReadsIt(text: String, expected: StoreLocation) {
        #expect(StoreLocation(text) == expected)
    }

    /// ssh hands the far shell one command line: a path with a quote or a space stays one word.
    @Test func theFarPathIsQuotedForTheFarShell() {
        let far = RemoteStore(host: "h", path: "it's a store", shell: ["ssh", "-p", "2222"], program: "/opt/archive-sync")
        #expect(
            far.serveCommand(create: false) == [
                "ssh", "-p", "2222", "-o", "ServerAliveInterval=10", "-o", "ServerAliveCountMax=2", "-o", "ConnectTimeout=30", "h",
                "/opt/archive-sync serve --stdio -- 'it'\\''s a store'",
            ])
    }

    /// A cut link closes nothing: without ssh's own keepalive a sync would wait for TCP to give
    /// up (15 minutes or more). ssh gets it, after the user's options (ssh keeps the first
    /// value, so a `-o` of the user's wins); another shell gets nothing it may not understand.
    @Test func sshIsToldToNoticeASilentFarSide() {
        let plain = StoreLocation("host:store", shell: ["/usr/bin/ssh", "-o", "ServerAliveInterval=60"])
        guard case .remote(let far) = plain else { return #expect(Bool(false), "\(plain)") }
        #expect(
            far.serveCommand(create: false) == [
                "/usr/bin/ssh", "-o", "ServerAliveInterval=60", "-o", "ServerAliveInterval=10", "-o", "ServerAliveCountMax=2", "-o",
                "ConnectTimeout=30", "host", "archive-sync serve --stdio -- 'store'",
            ])
        let other = RemoteStore(host: "h", path: "s", shell: ["rsh"])
        #expect(other.serveCommand(create: false) == ["rsh", "h", "archive-sync serve --stdio -- 's'"])
    }
}

extension RemoteSyncTests.SSHTests {
    /// A Swift program syncs with a host through the library alone, no command line involved.
    @Test func aSwiftProgramSyncsWithAStoreOnAHost() async throws {
        let server = try SSHServer.start()
        defer { server.stop() }
        try await withTemporaryDirectory { dir in
            let here = try ArchiveStore(directory: dir + "/a")
            let there = try ArchiveStore(directory: dir + "/b")
            try here.put(Data("{\"name\":\"ann\"}".utf8), as: ObjectID(collection: "Person", key: "p1"))
            try there.put(Data("{\"name\":\"bob\"}".utf8), as: ObjectID(collection: "Person", key: "p2"))
            let far = RemoteStore(
                host: "root@127.0.0.1", path: dir + "/b", shell: server.rsh.split(separator: " ").map(String.init), program: archiveSyncProgram)
            let report = try await Sync(.directory(dir + "/a"), .remote(far)).run()
            #expect(report.copiedToB == 1 && report.copiedToA == 1, "\(report.summary)")
            #expect(try here.liveHashes() == there.liveHashes())
        }
    }
}
