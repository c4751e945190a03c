"""The power-cut simulator's model: the recorder's log, and the states a power cut after any
prefix of it may leave on disk (docs/power-cut.md)."""

import json
import os

SECTOR = 512


# The log -------------------------------------------------------------------------------------


def parse_log(path):
    """The records of a recorder's log, as tuples whose first item is the op."""
    data = open(path, "rb").read()
    records = []
    at = 0
    while at < len(data):
        end = data.index(b"\n", at)
        fields = data[at:end].decode().split(" ")
        at = end + 1
        op = fields[0]
        if op == "W":
            length = int(fields[3])
            records.append(("W", int(fields[1]), int(fields[2]), data[at : at + length]))
            at += length
        elif op in ("C", "D"):
            records.append((op, int(fields[1]), unhex(fields[2])))
        elif op == "T":
            records.append(("T", int(fields[1]), int(fields[2])))
        elif op == "A":
            records.append(("A", int(fields[1]), int(fields[2]), int(fields[3]), int(fields[4])))
        elif op in ("S", "Q"):
            records.append((op, int(fields[1])))
        elif op == "F":
            records.append(("F",))
        elif op in ("R", "E", "U"):
            records.append((op,) + tuple(unhex(f) for f in fields[1:]))
        elif op == "K":
            records.append(("K", json.loads(bytes.fromhex(fields[1]))))
        elif op == "ROOT":
            records.append(("ROOT", int(fields[1])))
        elif op[:1].isdigit():
            # crash-writer's acknowledgement: `<counter> <key>[,<key>...]`.
            records.append(("K", {"writer": int(op), "keys": fields[1].split(",")}))
        else:
            raise SystemExit(f"power-cut: the recorder logged a call the model cannot replay: {' '.join(fields)}")
    return records


def unhex(text):
    return bytes.fromhex(text).decode("utf-8", "surrogateescape")


def parent(path):
    return path.rsplit("/", 1)[0] if "/" in path else "."


def remove_in(names, path):
    """Removes `path`, and all below it, from a namespace {path: inode}."""
    for p in [p for p in names if p == path or p.startswith(path + "/")]:
        del names[p]


def rename_in(names, source, target):
    """Renames `source` (and all below it) to `target`, replacing what was there."""
    moved = {p: n for p, n in names.items() if p == source or p.startswith(source + "/")}
    remove_in(names, target)
    for p in moved:
        del names[p]
    for p, n in moved.items():
        names[target + p[len(source) :]] = n


def exchange_in(names, first, second):
    """Swaps `first` and `second` (and all below each), as RENAME_EXCHANGE does."""
    a = {p[len(first) :]: n for p, n in names.items() if p == first or p.startswith(first + "/")}
    b = {p[len(second) :]: n for p, n in names.items() if p == second or p.startswith(second + "/")}
    remove_in(names, first)
    remove_in(names, second)
    for rest, n in a.items():
        names[second + rest] = n
    for rest, n in b.items():
        names[first + rest] = n


class Log:
    """A workload's records, each annotated once with the model inodes it touches."""

    def __init__(self, records):
        self.records = records
        self.targets = [()] * len(records)  # the inode (data op) or parent directories (namespace op)
        self.syncs = {}  # inode -> indices of its flushes
        self.full_syncs = []
        inode_of = {}
        names = {".": 0}
        kinds = {0: "dir"}
        fresh = 1
        for i, record in enumerate(records):
            op = record[0]
            if op == "ROOT":
                inode_of[record[1]] = 0
            elif op in ("C", "D"):
                inode_of[record[1]] = fresh
                kinds[fresh] = "dir" if op == "D" else "file"
                self.targets[i] = (fresh, names.get(parent(record[2])))
                names[record[2]] = fresh
                fresh += 1
            elif op in ("W", "T", "A", "S", "Q"):
                if record[1] not in inode_of:
                    raise SystemExit(f"power-cut: record {i} ({op}) names an inode the log never created")
                self.targets[i] = (inode_of[record[1]],)
                if op == "S":
                    self.syncs.setdefault(inode_of[record[1]], []).append(i)
            elif op == "F":
                self.full_syncs.append(i)
            elif op in ("R", "E"):
                source, target = record[1], record[2]
                self.targets[i] = (names.get(parent(source)), names.get(parent(target)))
                (rename_in if op == "R" else exchange_in)(names, source, target)
            elif op == "U":
                self.targets[i] = (names.get(parent(record[1])),)
                remove_in(names, record[1])
        self.kinds = kinds

    def flushed_before(self, inode, cut):
        """The index of the last flush of `inode` (or of everything) before `cut`; -1 if none."""
        last = -1
        for i in self.syncs.get(inode, ()):
            if i < cut:
                last = max(last, i)
        for i in self.full_syncs:
            if i < cut:
                last = max(last, i)
        return last


# States --------------------------------------------------------------------------------------


def build_state(log, cut, rng, keep, sabotage=None):
    """The files a power cut after the first `cut` records may leave, as {path: bytes or None
    (a directory)}. What was flushed before the cut stays; every other write is kept, lost or
    torn at 512-byte boundaries, and every other create, rename or unlink kept or lost, each
    with probability `keep` of being kept whole."""
    names = {".": 0}
    contents = {}
    flushed = {}

    def durable(i, inodes):
        for inode in inodes:
            if inode is None:
                continue
            if inode not in flushed:
                flushed[inode] = log.flushed_before(inode, cut)
            if i < flushed[inode]:
                return True
        return False

    dropped = None
    if sabotage == "drop-flushed":
        # The checker must catch a disk that loses what it said was flushed: drop the last
        # flushed write before the cut.
        for i in range(cut - 1, -1, -1):
            if log.records[i][0] == "W" and durable(i, log.targets[i][:1]):
                dropped = i
                break

    for i in range(cut):
        record = log.records[i]
        op = record[0]
        if op in ("C", "D", "R", "E", "U"):
            if not durable(i, log.targets[i][1:] if op in ("C", "D") else log.targets[i]) and rng.random() >= keep:
                continue
            if op in ("C", "D"):
                if parent(record[2]) in names:
                    names[record[2]] = log.targets[i][0]
                    contents.setdefault(log.targets[i][0], bytearray())
            elif op == "R":
                source, target = record[1], record[2]
                if source in names and parent(target) in names:
                    rename_in(names, source, target)
            elif op == "E":
                # Both names must stand, as for the call (each one's creation may have been lost).
                if record[1] in names and record[2] in names:
                    exchange_in(names, record[1], record[2])
            else:
                remove_in(names, record[1])
        elif op in ("W", "T", "A"):
            inode = log.targets[i][0]
            data = contents.setdefault(inode, bytearray())
            whole = durable(i, (inode,))
            if i == dropped:
                continue
            if not whole:
                choice = rng.random()
                if choice >= keep:
                    # Lost, or torn: a random subset of its 512-byte sectors.
                    if op != "W" or choice < keep + (1 - keep) / 2:
                        continue
                    offset, payload = record[2], record[3]
                    start = offset
                    while start < offset + len(payload):
                        end = min(offset + len(payload), (start // SECTOR + 1) * SECTOR)
                        if rng.random() < 0.5:
                            write_at(data, start, payload[start - offset : end - offset])
                        start = end
                    continue
            if op == "W":
                write_at(data, record[2], record[3])
            elif op == "T":
                del data[record[2] :]
                data.extend(bytes(max(0, record[2] - len(data))))
            elif record[2] == 0 and record[3] + record[4] > len(data):
                data.extend(bytes(record[3] + record[4] - len(data)))
    state = {}
    for path, inode in names.items():
        if path == "." or path.endswith("-shm"):
            # SQLite rebuilds the -shm index from the WAL when the first connection opens
            # after a reboot; its bytes carry nothing durable.
            continue
        state[path] = None if log.kinds[inode] == "dir" else bytes(contents.get(inode, b""))
    return state


def write_at(data, offset, payload):
    if len(data) < offset:
        data.extend(bytes(offset - len(data)))
    data[offset : offset + len(payload)] = payload


def write_state(state, directory):
    os.makedirs(directory, exist_ok=True)
    for path in sorted(state):
        full = os.path.join(directory, path)
        if state[path] is None:
            os.makedirs(full, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "wb") as f:
                f.write(state[path])


def read_tree(directory):
    state = {}
    for base, dirs, files in os.walk(directory):
        for name in dirs:
            state[os.path.relpath(os.path.join(base, name), directory)] = None
        for name in files:
            path = os.path.relpath(os.path.join(base, name), directory)
            if not path.endswith("-shm"):
                state[path] = open(os.path.join(base, name), "rb").read()
    return state
