import ArchiveStore
import Foundation
import KeyedArchive

/// What `archive-sync import` makes of a set of archive files, before anything is written:
/// each readable archive becomes one object, WZXArchiver "son" files are folded into their
/// parent, and each file that cannot be used is listed with the reason.
struct KeyedImportPlan {
    /// One store object to write.
    struct Object {
        var id: ObjectID
        var value: KeyedValue
        /// The file the object came from, then its folded son files.
        var files: [String]
        /// The fields son files were folded in as, in the order of `files.dropFirst()`.
        var foldedFields: [String]
    }

    /// A file left out, and why.
    struct Skipped: Error {
        var file: String
        var reason: String
    }

    var objects: [Object] = []
    var skipped: [Skipped] = []

    /// The file extensions taken from directories (files named on the command line are always tried).
    static let archiveExtensions: Set<String> = ["archiver", "archive", "plist", "keyedarchive", "nskeyedarchive"]

    /// The prefix WZXArchiver gives its files: `WZX_<Class>_<name>.archiver`.
    static let wzxPrefix = "WZX_"

    /// One decoded file.
    private struct Decoded {
        let path: String
        let directory: String
        let stem: String
        let value: KeyedValue
    }

    /// Reads every file under `sources` and plans the objects. `collection` overrides the
    /// collection of every object.
    init(sources: [String], collection: String?) {
        var decoded: [Decoded] = []
        var failed: [String: String] = [:]  // path -> reason, for sons whose parent failed
        for path in Self.files(in: sources, skipped: &skipped) {
            let url = URL(fileURLWithPath: path)
            let stem = url.deletingPathExtension().lastPathComponent
            let directory = url.deletingLastPathComponent().path
            do {
                let data = try Data(contentsOf: url)
                decoded.append(Decoded(path: path, directory: directory, stem: stem, value: try KeyedArchive.decode(data)))
            } catch let error as KeyedArchiveError {
                skipped.append(Skipped(file: path, reason: error.description))
                failed[directory.appendingComponent(stem)] = path
            } catch {
                skipped.append(Skipped(file: path, reason: Self.reason(error)))
                failed[directory.appendingComponent(stem)] = path
            }
        }

        // Son files: `<parent stem>_<SonClass>_<property>`, where SonClass is the son's root class.
        // The longest matching parent wins, so a grandson folds into its son first.
        let byStem = Dictionary(
            decoded.enumerated().map { ($0.element.directory.appendingComponent($0.element.stem), $0.offset) }, uniquingKeysWith: { a, _ in a })
        var parentOf: [Int: (parent: Int, field: String)] = [:]
        var orphans: [Int: String] = [:]
        for (index, file) in decoded.enumerated() where file.stem.hasPrefix(Self.wzxPrefix) {
            let marker = "_" + file.value.className + "_"
            var searchEnd = file.stem.endIndex
            while let range = file.stem.range(of: marker, options: .backwards, range: file.stem.startIndex..<searchEnd) {
                let parentStem = String(file.stem[..<range.lowerBound])
                let field = String(file.stem[range.upperBound...])
                let key = file.directory.appendingComponent(parentStem)
                if !field.isEmpty, parentStem.count > Self.wzxPrefix.count {
                    if let parent = byStem[key], parent != index {
                        parentOf[index] = (parent, field)
                        break
                    }
                    if let failedParent = failed[key] {
                        orphans[index] = failedParent
                        break
                    }
                }
                searchEnd = range.lowerBound
            }
        }

        var values = decoded.map(\.value)
        var files = decoded.map { [$0.path] }
        var fields = decoded.map { _ in [String]() }
        // Fold the deepest sons first (a son's stem is longer than its parent's).
        for son in parentOf.keys.sorted(by: { decoded[$0].stem.count > decoded[$1].stem.count }) {
            guard let (parent, field) = parentOf[son] else { continue }
            switch values[parent] {
            case .object(var object):
                object.fields[field] = values[son]
                values[parent] = .object(object)
            case .dictionary(var dictionary):
                dictionary[field] = values[son]
                values[parent] = .dictionary(dictionary)
            default:
                parentOf[son] = nil  // nothing to fold into: imported on its own
                continue
            }
            files[parent] += files[son]
            fields[parent] += [field] + fields[son]
        }

        var seen: [ObjectID: String] = [:]
        for (index, file) in decoded.enumerated() {
            if parentOf[index] != nil { continue }
            if let parent = orphans[index] {
                skipped.append(Skipped(file: file.path, reason: "its parent archive \(parent) could not be read"))
                continue
            }
            let className = file.value.className
            do {
                let id = try ObjectID(collection: collection ?? className, key: Self.key(stem: file.stem, className: className))
                if let first = seen[id] {
                    skipped.append(Skipped(file: file.path, reason: "it would be \(id), which \(first) already is"))
                    continue
                }
                seen[id] = file.path
                objects.append(Object(id: id, value: values[index], files: files[index], foldedFields: fields[index]))
            } catch {
                skipped.append(Skipped(file: file.path, reason: Self.reason(error)))
            }
        }
        skipped.sort { $0.file < $1.file }
    }

    /// The key of a file: the name part of `WZX_<Class>_<name>`, or else the file's name without its extension.
    static func key(stem: String, className: String) -> String {
        let prefix = wzxPrefix + className + "_"
        if stem.hasPrefix(prefix), stem.count > prefix.count { return String(stem.dropFirst(prefix.count)) }
        return stem
    }

    /// The files to read: each file named, and the archive files under each directory named
    /// (recursively, in name order, hidden entries skipped, symlinked directories not entered,
    /// symlinks to files followed).
    static func files(in sources: [String], skipped: inout [Skipped]) -> [String] {
        let fileManager = FileManager.default
        var result: [String] = []
        for source in sources {
            var isDirectory: ObjCBool = false
            guard fileManager.fileExists(atPath: source, isDirectory: &isDirectory) else {
                skipped.append(Skipped(file: source, reason: "no such file or directory"))
                continue
            }
            guard isDirectory.boolValue else {
                result.append(source)
                continue
            }
            let root = URL(fileURLWithPath: source)
            let unreadable = UnreadableDirectories()
            guard
                let walker = fileManager.enumerator(
                    at: root, includingPropertiesForKeys: [.isRegularFileKey, .isSymbolicLinkKey, .isDirectoryKey], options: [.skipsHiddenFiles],
                    errorHandler: { url, error in
                        unreadable.add(Skipped(file: url.path, reason: reason(error)))
                        return true
                    })
            else {
                skipped.append(Skipped(file: source, reason: "the directory cannot be read"))
                continue
            }
            defer { skipped += unreadable.all }
            var found: [String] = []
            for case let url as URL in walker where archiveExtensions.contains(url.pathExtension.lowercased()) {
                let path = source.appendingComponent(relative(url, to: root))
                let values = try? url.resourceValues(forKeys: [.isRegularFileKey, .isSymbolicLinkKey, .isDirectoryKey])
                if values?.isDirectory == true, values?.isSymbolicLink != true { continue }  // walked into, not a file
                if values?.isSymbolicLink == true {
                    // A link to an archive is read (reading cannot harm the target); anything else is reported.
                    var targetIsDirectory: ObjCBool = false
                    if fileManager.fileExists(atPath: url.path, isDirectory: &targetIsDirectory), !targetIsDirectory.boolValue {
                        found.append(path)
                    } else {
                        skipped.append(Skipped(file: path, reason: "a symbolic link to a directory or to nothing"))
                    }
                } else if values?.isRegularFile == true {
                    found.append(path)
                } else {
                    skipped.append(Skipped(file: path, reason: "not a regular file"))
                }
            }
            result += found.sorted()
        }
        var unique = Set<String>()
        return result.filter { unique.insert(URL(fileURLWithPath: $0).standardizedFileURL.path).inserted }
    }

    /// `url`'s path below `root`, as the directory walk found it (symlinks not resolved).
    private static func relative(_ url: URL, to root: URL) -> String {
        let base = root.standardizedFileURL.pathComponents
        let full = url.standardizedFileURL.pathComponents
        if full.starts(with: base) { return full.dropFirst(base.count).joined(separator: "/") }
        let resolvedBase = root.standardizedFileURL.resolvingSymlinksInPath().pathComponents
        let parent = url.deletingLastPathComponent().standardizedFileURL.resolvingSymlinksInPath().pathComponents + [url.lastPathComponent]
        guard parent.starts(with: resolvedBase) else { return url.lastPathComponent }
        return parent.dropFirst(resolvedBase.count).joined(separator: "/")
    }

    /// What the directory walk could not enter, collected by its error handler.
    private final class UnreadableDirectories: @unchecked Sendable {
        private let lock = NSLock()
        private var found: [Skipped] = []

        func add(_ skipped: Skipped) { lock.withLock { found.append(skipped) } }
        var all: [Skipped] { lock.withLock { found } }
    }

    static func reason(_ error: any Error) -> String {
        if let error = error as? ArchiveError { return error.description }
        if let error = error as? KeyedArchiveError { return error.description }
        let error = error as NSError
        if error.domain == NSCocoaErrorDomain, let underlying = error.userInfo[NSUnderlyingErrorKey] as? NSError,
            underlying.domain == NSPOSIXErrorDomain, let code = POSIXErrorCode(rawValue: Int32(underlying.code))
        {
            return String(cString: strerror(code.rawValue)).lowercased()
        }
        return error.localizedDescription
    }
}
