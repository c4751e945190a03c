import Testing

@testable import ArchiveStore

struct NameListTests {
    private func list(_ names: [String]) -> NameList {
        var list = NameList()
        for name in names { name.utf8.withContiguousStorageIfAvailable { list.append($0) } }
        list.buildIndex()
        return list
    }

    private func index(of name: String, in list: NameList) -> Int? {
        var name = name
        return name.withUTF8 { list.index(of: $0) }
    }

    @Test func everyNameIsFoundAtItsPositionAndNoOtherIs() {
        let names = (0..<5_000).map { "p\($0).json" } + ["", "x", "a b.plist", "%2Ehidden.json"]
        let list = list(names)
        #expect(list.count == names.count)
        for (position, name) in names.enumerated() {
            #expect(index(of: name, in: list) == position)
            #expect(list.name(position) == name)
        }
        for absent in ["p5000.json", "p1.jso", "p1.json ", "X", "a b"] { #expect(index(of: absent, in: list) == nil) }
    }

    @Test func namesAreComparedByTheirBytes() {
        // The same text to Swift's ==, two different files to the file system.
        let precomposed = "caf\u{E9}.json"
        let decomposed = "cafe\u{301}.json"
        #expect(precomposed == decomposed)
        let list = list([precomposed])
        #expect(index(of: precomposed, in: list) == 0)
        #expect(index(of: decomposed, in: list) == nil)
    }

    @Test func anEmptyListFindsNothing() {
        #expect(index(of: "a.json", in: NameList()) == nil)
        #expect(index(of: "a.json", in: list([])) == nil)
    }
}
