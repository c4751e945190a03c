/// Entries in least-recently-used order, limited by count and by total cost.
///
/// A doubly linked list threaded through an array by index (no object per entry, no
/// reference counting on the hit path), and a dictionary from key to slot. Not thread-safe:
/// ``ModelCache`` keeps it behind its mutex.
struct MemoryLRU<Entry> {
    private struct Node {
        var key: String
        var entry: Entry?
        var cost: Int
        /// Read or stored since access times were last written to the manifest.
        var dirty: Bool
        var accessed: Int64
        var previous: Int
        var next: Int
    }

    private var nodes: [Node] = []
    private var freeSlots: [Int] = []
    private var slots: [String: Int] = [:]
    /// Most recently used.
    private var head = -1
    /// Least recently used.
    private var tail = -1

    let countLimit: Int
    let costLimit: Int
    private(set) var totalCost = 0

    init(countLimit: Int, costLimit: Int) {
        self.countLimit = max(countLimit, 0)
        self.costLimit = max(costLimit, 0)
    }

    var count: Int { slots.count }

    /// The slot of `key`, without changing the order.
    func slot(of key: String) -> Int? { slots[key] }

    func entry(at slot: Int) -> Entry { nodes[slot].entry! }

    mutating func update(at slot: Int, _ body: (inout Entry) -> Void) {
        body(&nodes[slot].entry!)
    }

    /// Marks the entry at `slot` used at `time`: it becomes the most recently used.
    mutating func touch(_ slot: Int, at time: Int64) {
        nodes[slot].accessed = time
        nodes[slot].dirty = true
        guard slot != head else { return }
        unlink(slot)
        pushFront(slot)
    }

    /// Inserts or replaces `key` as the most recently used, then evicts least recently used
    /// entries (never this one) until both limits hold.
    /// - Returns: the keys evicted, with when each was last used if that is not yet recorded.
    mutating func insert(_ key: String, _ entry: Entry, cost: Int, at time: Int64) -> [(key: String, unrecordedAccess: Int64?)] {
        remove(key)
        let node = Node(key: key, entry: entry, cost: cost, dirty: true, accessed: time, previous: -1, next: -1)
        let slot: Int
        if let free = freeSlots.popLast() {
            nodes[free] = node
            slot = free
        } else {
            nodes.append(node)
            slot = nodes.count - 1
        }
        slots[key] = slot
        totalCost += cost
        pushFront(slot)
        var evicted: [(key: String, unrecordedAccess: Int64?)] = []
        while (slots.count > countLimit || totalCost > costLimit), tail != -1, tail != slot {
            let victim = nodes[tail]
            evicted.append((victim.key, victim.dirty ? victim.accessed : nil))
            remove(victim.key)
        }
        if slots.count > countLimit || cost > costLimit {
            // Alone it breaks a limit (a count limit of zero, or a cost above the limit): not kept.
            evicted.append((key, time))
            remove(key)
        }
        return evicted
    }

    /// Removes `key`; returns true when it was there.
    @discardableResult
    mutating func remove(_ key: String) -> Bool {
        guard let slot = slots.removeValue(forKey: key) else { return false }
        unlink(slot)
        totalCost -= nodes[slot].cost
        nodes[slot].entry = nil
        freeSlots.append(slot)
        return true
    }

    mutating func removeAll() {
        nodes = []
        freeSlots = []
        slots = [:]
        head = -1
        tail = -1
        totalCost = 0
    }

    /// The keys used since the last call, most recent first, with when each was last used;
    /// marks them recorded. They are a prefix of the order, since every use moves to the front.
    mutating func takeUnrecordedAccesses() -> [(key: String, time: Int64)] {
        var result: [(key: String, time: Int64)] = []
        var slot = head
        while slot != -1, nodes[slot].dirty {
            nodes[slot].dirty = false
            result.append((nodes[slot].key, nodes[slot].accessed))
            slot = nodes[slot].next
        }
        return result
    }

    /// Keys from least to most recently used (for tests and inspection).
    var keysByRecency: [String] {
        var keys: [String] = []
        var slot = tail
        while slot != -1 {
            keys.append(nodes[slot].key)
            slot = nodes[slot].previous
        }
        return keys
    }

    private mutating func unlink(_ slot: Int) {
        let previous = nodes[slot].previous
        let next = nodes[slot].next
        if previous != -1 { nodes[previous].next = next } else if head == slot { head = next }
        if next != -1 { nodes[next].previous = previous } else if tail == slot { tail = previous }
        nodes[slot].previous = -1
        nodes[slot].next = -1
    }

    private mutating func pushFront(_ slot: Int) {
        nodes[slot].previous = -1
        nodes[slot].next = head
        if head != -1 { nodes[head].previous = slot }
        head = slot
        if tail == -1 { tail = slot }
    }
}
