import Foundation

/// The two codecs a store writes, named as `ArchiveCodec` names them (its raw values are the
/// files' extensions), so the planner can go from an object's file name to its format.
public enum DocumentFormat: String, Sendable, CaseIterable {
    /// JSON with sorted keys (`.json`).
    case json
    /// Binary property list (`.plist`).
    case propertyList = "plist"
}

extension Document {
    /// Reads `data` in `format`: ``init(json:limits:)`` or ``init(propertyList:limits:)``.
    public init(_ data: Data, format: DocumentFormat, limits: DocumentLimits = .standard) throws(DocumentError) {
        switch format {
        case .json: try self.init(json: data, limits: limits)
        case .propertyList: try self.init(propertyList: data, limits: limits)
        }
    }

    /// This document's bytes in `format`: ``jsonData()`` or ``propertyListData()``.
    public func data(in format: DocumentFormat) throws(DocumentError) -> Data {
        switch format {
        case .json: try jsonData()
        case .propertyList: try propertyListData()
        }
    }
}
