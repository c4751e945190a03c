import ArchiveStore
import Foundation
struct Person: Codable, Equatable { var id: String; var name: String; var age: Int; var tags: [String] }
let dir = "/tmp/smoke-\(getpid())"
let store = try ArchiveStore(directory: dir)
let p = Person(id: "p1", name: "Ada", age: 36, tags: ["x"])
print(try store.save(p, forKey: "p1"))
print(try store.save(Person(id: "p1", name: "Ada L", age: 37, tags: []), forKey: "p1"))
print(try store.save(Person(id: "p1", name: "Ada L", age: 37, tags: []), forKey: "p1"))
print(try store.load(Person.self, forKey: "p1") as Any)
print(try store.history(of: Person.self, forKey: "p1").map { "\($0.version) \($0.hash!) \($0.vector)" })
try store.restore(Person.self, forKey: "p1", version: 1)
print(try store.load(Person.self, forKey: "p1") as Any)
try store.batch { tx in for i in 0..<100 { try tx.save(Person(id: "b\(i)", name: "n", age: i, tags: []), forKey: "b\(i)") } }
print(try store.keys(of: Person.self).count)
try store.remove(Person.self, forKey: "b5")
print(try store.keys(of: Person.self).count, try store.load(Person.self, forKey: "b5") as Any)
do { _ = try store.load(Int.self, forKey: "p1", in: "Person") } catch { print("ERR", error) }
do { try store.save(p, forKey: "../x") } catch { print("ERR", error) }
print(try store.scan().changes.count, try store.verify().problems)
print(try store.status())
