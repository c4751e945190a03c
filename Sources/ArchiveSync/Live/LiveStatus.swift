import ArchiveLocking
import ArchiveStore
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A live session's state as `archive-sync status STORE` shows it: each session publishes
/// one small file under the store's metadata directory (`.archive-sync/live/PID-N.json`),
/// replaced whole on each change and removed when the session ends. A file whose process is
/// gone (killed) is ignored.
public struct LiveSessionStatus: Sendable, Codable, Equatable {
    /// The process running the session.
    public var pid: Int32
    public var started: Date
    /// The session's peers, as seen from this store.
    public var peers: [LivePeerStatus]
}

/// One peer of a live session.
public struct LivePeerStatus: Sendable, Codable, Equatable {
    /// The other store, as named (`host:path` or a directory).
    public var peer: String
    public var connected: Bool
    /// When the last cycle ended; nil before the first.
    public var lastCycle: Date?
    /// Changes (by change sequence) either side has made that the other has not merged yet.
    public var behind: Int
    public var lastError: String?
}

extension ArchiveStore {
    /// The live sessions on this store whose processes still run.
    public func liveSessions() -> [LiveSessionStatus] {
        LiveStatusBoard.read(directory: LiveStatusBoard.directory(of: path))
    }
}

/// Where one session publishes its status, in each store here that it syncs.
final class LiveStatusBoard: Sendable {
    private static let counter = TracedMutex(0)
    private let files: [String]
    private let state: TracedMutex<LiveSessionStatus>

    /// The directory of the status files of the store at `storePath`: the one definition.
    static func directory(of storePath: String) -> String {
        (storePath as NSString).appendingPathComponent(ArchiveStore.metadataDirectoryName + "/live")
    }

    init(peer: String, sides: [LiveSide]) {
        let number = Self.counter.withLock { counter in
            counter += 1
            return counter
        }
        let name = "\(getpid())-\(number).json"
        files = sides.compactMap { side in
            guard case .directory(let path)? = side.location else { return nil }
            return (Self.directory(of: side.store?.path ?? path) as NSString).appendingPathComponent(name)
        }
        state = TracedMutex(
            LiveSessionStatus(
                pid: getpid(), started: Date(),
                peers: [LivePeerStatus(peer: peer, connected: false, lastCycle: nil, behind: 0, lastError: nil)]))
    }

    func update(_ change: (inout LivePeerStatus) -> Void) {
        state.withLock { change(&$0.peers[0]) }
        publish()
    }

    /// Writes the file (a temporary one renamed over it, so a reader never sees half of it).
    func publish() {
        let status = state.withLock { $0 }
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        guard let data = try? encoder.encode(status) else { return }
        for file in files {
            let directory = (file as NSString).deletingLastPathComponent
            try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let temporary = file + ".tmp"
            guard FileManager.default.createFile(atPath: temporary, contents: data) else { continue }
            rename(temporary, file)
        }
    }

    func remove() {
        for file in files { unlink(file) }
    }

    static func read(directory: String) -> [LiveSessionStatus] {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.filter { $0.hasSuffix(".json") }.sorted().compactMap { name in
            guard let data = FileManager.default.contents(atPath: (directory as NSString).appendingPathComponent(name)),
                let status = try? decoder.decode(LiveSessionStatus.self, from: data)
            else { return nil }
            // A session killed leaves its file behind: its process is gone (or is another's).
            guard kill(status.pid, 0) == 0 || errno == EPERM else { return nil }
            return status
        }
    }
}
