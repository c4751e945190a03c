import Foundation

/// The two INI files of the AWS command line, `~/.aws/credentials` and `~/.aws/config`, read
/// as the AWS CLI reads them: sections of `key = value` lines, `#` and `;` comments, and one
/// level of nested keys (`s3 =` followed by indented `addressing_style = path`), stored as
/// `s3.addressing_style`.
///
/// Parsed here rather than with a library: the format is a dozen lines of rules, no INI
/// parser is among the package copies the build may use, and Foundation has none.
struct AWSConfigFiles {
    /// Sections by name (`default`, `profile work` in the config file, `work` in credentials).
    typealias Sections = [String: [String: String]]

    var credentials: Sections
    var config: Sections

    /// Reads the files that `environment` names (`AWS_SHARED_CREDENTIALS_FILE`,
    /// `AWS_CONFIG_FILE`) or those under `home`/.aws; a missing file is an empty one.
    init(environment: [String: String], home: String) throws {
        credentials = try Self.read(environment["AWS_SHARED_CREDENTIALS_FILE"] ?? "\(home)/.aws/credentials")
        config = try Self.read(environment["AWS_CONFIG_FILE"] ?? "\(home)/.aws/config")
    }

    /// The settings of `profile`: its config section (`[default]` or `[profile NAME]`), then its
    /// credentials section over it; nil when neither file has it.
    func settings(profile: String) -> [String: String]? {
        let fromConfig = config[profile == "default" ? "default" : "profile \(profile)"] ?? (profile == "default" ? config["profile default"] : nil)
        let fromCredentials = credentials[profile]
        if fromConfig == nil && fromCredentials == nil { return nil }
        return (fromConfig ?? [:]).merging(fromCredentials ?? [:]) { _, credential in credential }
    }

    private static func read(_ path: String) throws -> Sections {
        guard FileManager.default.fileExists(atPath: path) else { return [:] }
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw S3Error.configuration("cannot read the AWS settings file \(path): \(error.localizedDescription)")
        }
        return try parse(text, path: path)
    }

    /// Parses INI text; throws a sentence naming the file and line of a line it cannot read.
    static func parse(_ text: String, path: String) throws -> Sections {
        var sections: Sections = [:]
        var section: String?
        var parent: String?
        for (number, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let indented = rawLine.first == " " || rawLine.first == "\t"
            let line = rawLine.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("[") {
                guard line.hasSuffix("]") else {
                    throw S3Error.configuration("\(path), line \(number + 1): a section header ends with ]")
                }
                let name = line.dropFirst().dropLast().split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")
                section = name
                parent = nil
                if sections[name] == nil { sections[name] = [:] }
                continue
            }
            guard let current = section, let equals = line.firstIndex(of: "=") else {
                throw S3Error.configuration("\(path), line \(number + 1): expected [section] or key = value")
            }
            let key = line[..<equals].trimmingCharacters(in: .whitespaces).lowercased()
            let value = line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            if indented, let parent {
                sections[current]?["\(parent).\(key)"] = value
            } else if value.isEmpty {
                parent = key
            } else {
                parent = nil
                sections[current]?[key] = value
            }
        }
        return sections
    }
}
