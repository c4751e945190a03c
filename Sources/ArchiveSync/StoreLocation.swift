import ArchiveStore

/// Where one side of a sync is: a directory on this machine, or a store on another host.
///
/// ```swift
/// let laptop = StoreLocation("./store")                              // .directory("./store")
/// let server = StoreLocation("backup@server:/srv/store")             // .remote(RemoteStore(...))
/// let report = try await Sync(laptop, server).run()
/// ```
public enum StoreLocation: Sendable, Equatable {
    case directory(String)
    case remote(RemoteStore)

    /// Reads a location as `rsync` does: on another host when a `:` comes before any `/`
    /// (`host:path`, `user@host:path`, `[::1]:path`), a directory otherwise. An empty path
    /// after the colon is the far account's home directory (`.`).
    public init(_ text: String, shell: [String] = RemoteStore.defaultShell, program: String = RemoteStore.defaultProgram) {
        func remote(_ host: String, _ path: Substring) -> StoreLocation {
            .remote(RemoteStore(host: host, path: path.isEmpty ? "." : String(path), shell: shell, program: program))
        }
        if text.hasPrefix("["), let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") {
            self = remote(String(text[text.index(after: text.startIndex)..<close]), text[text.index(close, offsetBy: 2)...])
            return
        }
        guard let colon = text.firstIndex(of: ":"), colon != text.startIndex, text.firstIndex(of: "/").map({ colon < $0 }) ?? true else {
            self = .directory(text)
            return
        }
        self = remote(String(text[..<colon]), text[text.index(after: colon)...])
    }
}

/// A store on another host, reached the way rsync and Unison reach theirs: `shell` (ssh by
/// default) runs `program serve --stdio PATH` there, and the two sides speak the sync
/// protocol over its standard input and output. ssh does the authentication.
public struct RemoteStore: Sendable, Equatable {
    /// `ssh`: the command that runs a program on the far host, followed by the host.
    public static let defaultShell = ["ssh"]
    /// `archive-sync`, looked up on the far host's `PATH`.
    public static let defaultProgram = "archive-sync"

    /// The host as the shell takes it: `server`, `user@server`, `::1`.
    public var host: String
    /// The store's directory on the far host.
    public var path: String
    /// The program and arguments that run a command on the far host, the host appended:
    /// `["ssh", "-p", "2222", "-i", "key"]`.
    public var shell: [String]
    /// The archive-sync program on the far host.
    public var program: String
    /// When the shell is ssh: how many seconds the far side may stay silent before ssh asks
    /// whether it is still there; three intervals without an answer (a cut or partitioned
    /// link, which closes nothing and which TCP would wait out for 15 minutes or more) end the
    /// connection, and with it the sync, with ssh's "Timeout, server not responding". 0: none.
    public var keepaliveInterval: Int
    /// When the shell is ssh: how many seconds ssh waits for a far host that does not answer
    /// at all (its `ConnectTimeout`); 0: the system's (about two minutes).
    public var connectTimeout: Int

    /// 10 seconds: a silent far side is given up within 30.
    public static let defaultKeepaliveInterval = 10
    /// 30 seconds.
    public static let defaultConnectTimeout = 30

    public init(
        host: String, path: String, shell: [String] = RemoteStore.defaultShell, program: String = RemoteStore.defaultProgram,
        keepaliveInterval: Int = RemoteStore.defaultKeepaliveInterval, connectTimeout: Int = RemoteStore.defaultConnectTimeout
    ) {
        self.host = host
        self.path = path
        self.shell = shell
        self.program = program
        self.keepaliveInterval = keepaliveInterval
        self.connectTimeout = connectTimeout
    }

    /// The command that starts the far side: the shell, the host, and `serve` with the path
    /// quoted for the far host's shell (ssh hands it a command line, not an argument list).
    func serveCommand(create: Bool) -> [String] {
        let quoted = "'" + path.replacingOccurrences(of: "'", with: "'\\''") + "'"
        return shell + keepaliveOptions + [host, "\(program) serve --stdio \(create ? "--create " : "")-- \(quoted)"]
    }

    /// ssh's own keepalive (`ServerAliveInterval`, `ServerAliveCountMax`) and `ConnectTimeout`,
    /// when the shell is ssh; another shell gets nothing it might not understand. Placed after
    /// the shell's own words: ssh keeps the first value it is given, so a `-o` of the user's
    /// wins (one in ~/.ssh/config does not: the command line comes first).
    var keepaliveOptions: [String] {
        guard let program = shell.first, program.split(separator: "/").last == "ssh" else { return [] }
        var options: [String] = []
        if keepaliveInterval > 0 {
            options += ["-o", "ServerAliveInterval=\(keepaliveInterval)", "-o", "ServerAliveCountMax=\(Self.keepaliveProbes)"]
        }
        if connectTimeout > 0 { options += ["-o", "ConnectTimeout=\(connectTimeout)"] }
        return options
    }

    /// Unanswered keepalives after which ssh gives up: the third interval of silence ends it.
    static let keepaliveProbes = 2
}

extension Sync {
    /// A sync of two stores, each in a directory here or on another host.
    ///
    /// Connecting to a far side (ssh's set-up and the far program's start) overlaps with
    /// making the side here current. A directory that is not a store (an unmounted disk looks
    /// empty) is refused, on either host, unless `create`, which makes it one.
    /// - Throws: ``SyncError/remote(_:)`` when a far side cannot be reached or does not speak
    ///   the protocol, and ``ArchiveError/notAStore(path:reason:)`` for a directory that is no store.
    public convenience init(_ a: StoreLocation, _ b: StoreLocation, options: SyncOptions = SyncOptions(), create: Bool = false) throws {
        let (first, second) = try Self.connect(a, b, create: create)
        self.init(a: first, b: second, options: options)
    }

    /// The stores on this machine that the sync opened.
    package var storesHere: [ArchiveStore] { [a, b].compactMap { ($0 as? LocalReplica)?.store } }

    private static func connect(_ a: StoreLocation, _ b: StoreLocation, create: Bool) throws -> (any SyncReplica, any SyncReplica) {
        let locations = [a, b]
        // The side here first: a wrong local path fails before anything is started.
        var here: [Int: LocalReplica] = [:]
        for (index, location) in locations.enumerated() {
            if case .directory(let path) = location { here[index] = LocalReplica(try openStore(path, create: create)) }
        }
        if here.count == 2 { return (here[0]!, here[1]!) }
        let peer = here.values.first?.replica
        var connecting: [Int: InBackground<RemoteReplica>] = [:]
        for (index, location) in locations.enumerated() {
            guard case .remote(let far) = location else { continue }
            let command = far.serveCommand(create: create)
            let name = "\(far.host):\(far.path)"
            connecting[index] = InBackground { try RemoteReplica(command: command, name: name, peer: peer) }
        }
        // The scan here runs on while the sync begins: the far side's part of making the
        // stores current starts as soon as it is connected.
        let local = here.values.first
        local?.startMakingCurrentAhead()
        let connected: [Int: RemoteReplica]
        do {
            connected = try connecting.mapValues { try $0.value() }
        } catch {
            local?.abandonMakingCurrentAhead()
            throw error
        }
        func side(_ index: Int) -> any SyncReplica { connected[index] ?? here[index]! }
        return (side(0), side(1))
    }

    /// Opens the store in `path`. A directory that is not a store is refused unless `create`.
    package static func openStore(_ path: String, create: Bool) throws -> ArchiveStore {
        do {
            return try ArchiveStore(directory: path, options: .init(create: false))
        } catch ArchiveError.notAStore(_, _) where create {
            return try ArchiveStore(directory: path, options: .init(create: true))
        } catch ArchiveError.notAStore(let path, let reason) {
            throw ArchiveError.notAStore(
                path: path,
                reason:
                    "\(reason); a store's marker missing can mean an unmounted disk, so nothing was synced (use --force to make it a store and sync into it)"
            )
        }
    }
}
