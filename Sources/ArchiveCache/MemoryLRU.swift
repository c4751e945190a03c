/// Entries in least-recently-used order, with their costs.
///
/// A doubly linked list threaded through an array by index (no object per entry, no
/// reference counting on the hit path), and a dictionary from key to slot. Not thread-safe:
/// ``ModelCache`` keeps it behind its mutex.
@usableFromInline
struct MemoryLRU<Entry: Sendable>: Sendable {
    @usableFromInline
    struct Node: Sendable {
        @usableFromInline var key: String
        @usableFromInline var entry: Entry?
        @usableFromInline var cost: Int
        /// Read or stored since access times were last written to the manifest.
        @usableFromInline var dirty: Bool
        @usableFromInline var accessed: Int64
        @usableFromInline var previous: Int
        @usableFromInline var next: Int

        @usableFromInline
        init(key: String, entry: Entry?, cost: Int, dirty: Bool, accessed: Int64, previous: Int, next: Int) {
            self.key = key
            self.entry = entry
            self.cost = cost
            self.dirty = dirty
            self.accessed = accessed
            self.previous = previous
            self.next = next
        }
    }

    @usableFromInline var nodes: [Node] = []
    @usableFromInline var freeSlots: [Int] = []
    @usableFromInline var slots: [String: Int] = [:]
    /// Most recently used.
    @usableFromInline var head = -1
    /// Least recently used.
    @usableFromInline var tail = -1

    @usableFromInline var totalCost = 0

    @usableFromInline init() {}

    @inlinable var count: Int { slots.count }

    /// The slot of `key`, without changing the order.
    @inlinable func slot(of key: String) -> Int? { slots[key] }

    @inlinable func entry(at slot: Int) -> Entry { nodes[slot].entry! }

    @inlinable mutating func update(at slot: Int, _ body: (inout Entry) -> Void) {
        body(&nodes[slot].entry!)
    }

    /// Marks the entry at `slot` used at `time`: it becomes the most recently used.
    @inlinable mutating func touch(_ slot: Int, at time: Int64) {
        nodes[slot].accessed = time
        nodes[slot].dirty = true
        guard slot != head else { return }
        unlink(slot)
        pushFront(slot)
    }

    /// Whether the entry at `slot` was marked used less than `window` nanoseconds before `time`.
    /// (A clock stepped back counts as not: the entry is then marked used again.)
    @inlinable func wasUsed(_ slot: Int, within window: Int64, of time: Int64) -> Bool {
        let age = time - nodes[slot].accessed
        return age >= 0 && age < window
    }

    /// As ``touch(_:at:)``, except that an entry used less than `window` nanoseconds before
    /// stays where it is. The order is then exact only to the window, and a key read again
    /// within it costs no write to the list (see ``ModelCache/recencyWindow``).
    @inlinable mutating func touch(_ slot: Int, at time: Int64, unlessUsedWithin window: Int64) {
        guard !wasUsed(slot, within: window, of: time) else { return }
        touch(slot, at: time)
    }

    /// Inserts or replaces `key` as the most recently used. The owner enforces the limits
    /// (with ``evictLeastRecentlyUsed(sparing:)``), since they may span several lists.
    /// - Returns: how the count and the total cost changed.
    @inlinable mutating func insert(_ key: String, _ entry: Entry, cost: Int, at time: Int64) -> (count: Int, cost: Int) {
        let replaced = remove(key)
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
        return (replaced == nil ? 1 : 0, cost - (replaced ?? 0))
    }

    /// When the least recently used entry other than `spared` was last used; nil when there is none.
    @inlinable func oldestUse(sparing spared: String) -> Int64? {
        var slot = tail
        if slot != -1, nodes[slot].key == spared { slot = nodes[slot].previous }
        return slot == -1 ? nil : nodes[slot].accessed
    }

    /// Removes the least recently used entry other than `spared`.
    /// - Returns: its key, its cost, and when it was last used if that is not yet recorded;
    ///   nil when there is no other entry.
    @inlinable mutating func evictLeastRecentlyUsed(sparing spared: String) -> (key: String, cost: Int, unrecordedAccess: Int64?)? {
        var slot = tail
        if slot != -1, nodes[slot].key == spared { slot = nodes[slot].previous }
        guard slot != -1 else { return nil }
        let victim = nodes[slot]
        remove(victim.key)
        return (victim.key, victim.cost, victim.dirty ? victim.accessed : nil)
    }

    /// Removes `key`; returns its cost when it was there.
    @discardableResult
    @inlinable mutating func remove(_ key: String) -> Int? {
        guard let slot = slots.removeValue(forKey: key) else { return nil }
        unlink(slot)
        let cost = nodes[slot].cost
        totalCost -= cost
        nodes[slot].entry = nil
        freeSlots.append(slot)
        return cost
    }

    mutating func removeAll() {
        nodes.removeAll(keepingCapacity: true)
        freeSlots.removeAll(keepingCapacity: true)
        slots.removeAll(keepingCapacity: true)
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

    @inlinable mutating func unlink(_ slot: Int) {
        let previous = nodes[slot].previous
        let next = nodes[slot].next
        if previous != -1 { nodes[previous].next = next } else if head == slot { head = next }
        if next != -1 { nodes[next].previous = previous } else if tail == slot { tail = previous }
        nodes[slot].previous = -1
        nodes[slot].next = -1
    }

    @inlinable mutating func pushFront(_ slot: Int) {
        nodes[slot].previous = -1
        nodes[slot].next = head
        if head != -1 { nodes[head].previous = slot }
        head = slot
        if tail == -1 { tail = slot }
    }
}
