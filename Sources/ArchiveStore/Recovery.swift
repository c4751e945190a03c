import Foundation

extension ArchiveStore {
    /// What a scan records for a live row that is damaged (its file is not one the key gives,
    /// such as `../x`), and the entry that reports it: the key's own file, in a codec or with
    /// no extension, when one is in the directory (the row then names it again); else nil, and
    /// the row is recorded as deleted without its name being looked at.
    func damagedRowsFile(
        _ row: (file: String, key: String, problem: String), collection: String, directoryName: String, in directory: FileHandle
    ) throws -> (file: String?, report: IgnoredEntry) {
        let stem = FileName.encode(row.key)
        let found = try ([""] + ArchiveCodec.allCases.map(\.fileExtension)).map { FileName.join(stem: stem, extension: $0) }.first {
            try FileSystem.status($0, in: directory.fd, path: directory.path + "/" + $0)?.kind == .regular
        }
        let outcome = found.map { "recorded \(directoryName)/\($0) as its file" } ?? "recorded as deleted"
        let id = ObjectID(unchecked: collection, key: row.key)
        return (
            found,
            IgnoredEntry(
                path: directoryName + "/" + row.file,
                reason: "the manifest's row for \(id) named this as its file, which \(row.problem): not followed; \(outcome)")
        )
    }
}
