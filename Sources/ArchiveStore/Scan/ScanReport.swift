/// Something in a store's directory that is not an object, and so was left alone.
public struct IgnoredEntry: Sendable, Codable, Equatable {
    /// The path, relative to the store. A name that is not valid UTF-8 is shown with each
    /// byte that is not part of a UTF-8 character as `\xff` (see ``reason``).
    public let path: String
    /// Why it is not an object.
    public let reason: String

    public init(path: String, reason: String) {
        self.path = path
        self.reason = reason
    }
}

/// What ``ArchiveStore/scan()`` found and recorded.
public struct ScanReport: Sendable, Codable {
    /// Each change recorded, in the order recorded.
    public var changes: [StoreChange] = []
    /// Files whose stamp matched the manifest, so were not read.
    public var unchanged = 0
    /// Files whose stamp changed but whose content did not (only the stamp was recorded).
    public var touched = 0
    /// Temp files of dead processes removed.
    public var removedTempFiles = 0
    /// Every entry that is not an object, with the reason: each is left alone.
    public var ignored: [IgnoredEntry] = []
    /// Collection directories whose entries were listed. The others had no entry added,
    /// removed or renamed since a scan listed them (their mtime and ctime say so), so only the
    /// files their objects name were looked at.
    public var listedDirectories = 0

    public init() {}

    public var created: Int { changes.count { $0.kind == .created } }
    public var modified: Int { changes.count { $0.kind == .modified } }
    public var deleted: Int { changes.count { $0.kind == .deleted } }

    /// The report's counts, without the lists.
    public var counts: ScanCounts {
        ScanCounts(created: created, modified: modified, deleted: deleted, unchanged: unchanged + touched, ignored: ignored.count)
    }

    private enum CodingKeys: String, CodingKey {
        case changes, unchanged, touched, removedTempFiles, ignored, listedDirectories, counts
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        changes = try container.decode([StoreChange].self, forKey: .changes)
        unchanged = try container.decode(Int.self, forKey: .unchanged)
        touched = try container.decode(Int.self, forKey: .touched)
        removedTempFiles = try container.decode(Int.self, forKey: .removedTempFiles)
        ignored = try container.decode([IgnoredEntry].self, forKey: .ignored)
        listedDirectories = try container.decode(Int.self, forKey: .listedDirectories)
    }

    /// The lists and, under `counts`, the numbers a text report's summary line prints, so that
    /// the two forms cannot disagree.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(changes, forKey: .changes)
        try container.encode(unchanged, forKey: .unchanged)
        try container.encode(touched, forKey: .touched)
        try container.encode(removedTempFiles, forKey: .removedTempFiles)
        try container.encode(ignored, forKey: .ignored)
        try container.encode(listedDirectories, forKey: .listedDirectories)
        try container.encode(counts, forKey: .counts)
    }
}

/// How many objects a scan found created, modified, deleted and unchanged, and how many
/// entries it ignored.
public struct ScanCounts: Sendable, Codable, Equatable {
    public var created: Int
    public var modified: Int
    public var deleted: Int
    /// Objects whose content had not changed (whether or not their stamp had).
    public var unchanged: Int
    public var ignored: Int
}
