import Testing
@testable import ArchiveStore
