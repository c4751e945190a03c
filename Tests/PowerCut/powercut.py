#!/usr/bin/env python3
"""The power-cut simulator: runs workloads on a store under the recorder (recorder.c), builds
the states a power cut at any moment could leave on disk, and checks the store on each with
the real `archive-sync` CLI. docs/power-cut.md says why it is built this way and what the
model allows.

    powercut.py --bin .build/debug [--states 300] [--seed 1] [--workloads saves,removes]

Ends with one line, `power-cut: N states checked, M broke an invariant`, with what broke
above it; exit status 1 when M > 0 (0 with --expect-broken, which inverts that: the checker
must catch a state --sabotage broke).
"""

import argparse
import concurrent.futures
import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SECTOR = 512
TEMP_PREFIX = ".archive-sync-tmp."
# The versions a store keeps by default (Manifest.defaultHistoryLimit), current one included.
HISTORY_LIMIT = 10


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
        elif op in ("R", "U"):
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
            elif op == "R":
                source, target = record[1], record[2]
                self.targets[i] = (names.get(parent(source)), names.get(parent(target)))
                rename_in(names, source, target)
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
        if op in ("C", "D", "R", "U"):
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


# Workloads -----------------------------------------------------------------------------------


class Runner:
    """Runs a workload's commands on stores in one folder under the recorder, with
    acknowledgements in the log. A store is named by its folder in the root: S, or A and B."""

    def __init__(self, options, recorder, name):
        self.cli = os.path.join(options.bin, "archive-sync")
        self.work = tempfile.mkdtemp(prefix=f"power-cut-{name}-")
        self.root = os.path.realpath(os.path.join(self.work, "root"))
        os.mkdir(self.root)
        self.log = os.path.join(self.work, "log")
        self.env = dict(os.environ, POWER_CUT_ROOT=self.root, POWER_CUT_LOG=self.log, LD_PRELOAD=recorder)
        self.append(f"ROOT {os.stat(self.root).st_ino}\n".encode())

    def path(self, store):
        return os.path.join(self.root, store)

    def append(self, line):
        with open(self.log, "ab") as f:
            f.write(line)

    def ack(self, value):
        self.append(b"K " + json.dumps(value).encode().hex().encode() + b"\n")

    def run(self, *arguments, stdin=None):
        result = subprocess.run([self.cli, *arguments], input=stdin, env=self.env, capture_output=True)
        if result.returncode != 0:
            raise SystemExit(f"power-cut: the workload's `archive-sync {' '.join(arguments)}` failed: {result.stderr.decode()}")
        return result.stdout.decode()

    def init(self, store="S"):
        self.run("init", self.path(store))
        self.ack({"init": store})

    def put(self, key, data, store="S"):
        self.ack({"begin": "put", "key": key, "data": data.hex(), "store": store})
        out = self.run("put", self.path(store), key, stdin=data)
        self.ack({"done": "put", "key": key, "version": int(out.split()[-1]), "store": store})

    def remove(self, key, store="S"):
        self.ack({"begin": "rm", "key": key, "store": store})
        self.run("rm", self.path(store), key)
        self.ack({"done": "rm", "key": key, "store": store})

    def restore(self, key, version, store="S"):
        self.ack({"begin": "restore", "key": key, "from": version, "store": store})
        out = self.run("restore", self.path(store), key, "--version", str(version))
        self.ack({"done": "restore", "key": key, "version": int(out.split(" is now version ")[1].split(",")[0]), "store": store})

    def sync(self, keys):
        """Syncs A into B and back; acknowledges, with it, the contents both then hold."""
        self.ack({"begin": "sync", "key": None})
        self.run("sync", self.path("A"), self.path("B"))
        held = {}
        for key in keys:
            result = subprocess.run([self.cli, "get", self.path("A"), key], capture_output=True)
            held[key] = result.stdout.hex() if result.returncode == 0 else None
        self.ack({"done": "sync", "key": None, "held": held})


def document(key, n, size):
    """A JSON object of about `size` bytes whose every 512-byte sector says which (key, n) it is."""
    body = {"key": key, "n": n, "pad": ""}
    pad = f"{key}#{n};"
    text = json.dumps(body)
    body["pad"] = (pad * (size // len(pad) + 1))[: max(0, size - len(text))]
    return json.dumps(body, sort_keys=True).encode()


def workload_saves(runner):
    runner.init()
    runner.put("P/a", document("P/a", 1, 300))
    runner.put("P/b", document("P/b", 1, 5000))
    runner.put("P/a", document("P/a", 2, 1500))
    runner.put("Q/c", document("Q/c", 1, 9000))
    runner.put("P/a", document("P/a", 3, 200))


def workload_removes(runner):
    runner.init()
    runner.put("P/a", document("P/a", 1, 700))
    runner.put("P/b", document("P/b", 1, 700))
    runner.remove("P/a")
    runner.put("P/b", document("P/b", 2, 3000))
    runner.remove("P/b")
    runner.put("P/a", document("P/a", 3, 100))


def workload_restore(runner):
    runner.init()
    runner.put("P/a", document("P/a", 1, 2000))
    runner.put("P/a", document("P/a", 2, 600))
    runner.restore("P/a", 1)
    runner.remove("P/a")
    runner.restore("P/a", 2)


def workload_retention(runner):
    """Saves past the retention of 10 versions, so that each save also prunes history."""
    runner.init()
    runner.put("P/b", document("P/b", 1, 800))
    for n in range(1, 14):
        runner.put("P/a", document("P/a", n, 100 + 700 * (n % 4)))
    runner.restore("P/a", 9)


def workload_writer(runner):
    """crash-writer's library saves and batches of four, stopped after a dozen saves."""
    writer = os.path.join(os.path.dirname(runner.cli), "crash-writer")
    with open(runner.log, "ab") as log:
        process = subprocess.Popen([writer, runner.path("S"), "0"], stdout=log, env=runner.env)
    deadline = time.time() + 30
    # Its acknowledgements, roughly counted (a written byte could look like one): enough to stop.
    while time.time() < deadline and len(re.findall(rb"\n[0-9]+ k", open(runner.log, "rb").read())) < 12:
        time.sleep(0.2)
    process.send_signal(signal.SIGUSR2)  # the recorder's stop: between two recorded calls
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        raise SystemExit("power-cut: crash-writer did not stop within 60 s of SIGUSR2")


def workload_sync(runner):
    """Two stores changed apart and synced, three times."""
    keys = ["P/a", "P/b", "P/c"]
    runner.init("A")
    runner.init("B")
    runner.put("P/a", document("P/a", 1, 900), "A")
    runner.put("P/b", document("P/b", 1, 3000), "B")
    runner.sync(keys)
    runner.put("P/a", document("P/a", 2, 400), "A")
    runner.remove("P/b", "A")
    runner.put("P/c", document("P/c", 1, 5000), "B")
    runner.sync(keys)
    runner.put("P/c", document("P/c", 2, 700), "A")
    runner.sync(keys)


WORKLOADS = {
    "saves": workload_saves,
    "removes": workload_removes,
    "restore": workload_restore,
    "retention": workload_retention,
    "writer": workload_writer,
    "sync": workload_sync,
}


# Checks --------------------------------------------------------------------------------------


def expectations(log, cut, store="S"):
    """What the acknowledgements before `cut` promise of `store`, per key: the acknowledged
    versions [(version, bytes or None for a delete)], and the operation in flight, if any."""
    acked = {}
    in_flight = None
    for i in range(cut):
        record = log.records[i]
        if record[0] != "K" or record[1].get("store", "S") != store:
            continue
        value = record[1]
        if "begin" in value:
            in_flight = value
        elif "done" in value:
            key = value["key"]
            history = acked.setdefault(key, [])
            previous = history[-1][0] if history else 0
            if value["done"] == "put":
                history.append((value["version"], bytes.fromhex(in_flight["data"])))
            elif value["done"] == "rm":
                history.append((previous + 1, None))
            else:
                source = [d for v, d in history if v == in_flight["from"]]
                history.append((value["version"], source[0] if source else b"?"))
            in_flight = None
    return acked, in_flight


def cli(options, *arguments):
    result = subprocess.run([os.path.join(options.bin, "archive-sync"), *arguments], capture_output=True, timeout=120)
    return result.returncode, result.stdout, result.stderr.decode(errors="replace")


def check_common(options, root, log, cut, name="S"):
    """Opens (recovering) and verifies; returns the problems found and the number of objects
    verify counted. A cut before `init` had returned leaves no store yet: running `init` again
    must make one."""
    store = os.path.join(root, name)
    if not any(r[0] == "K" and r[1].get("init", name) == name and r[1].get("store", name) == name for r in log.records[:cut]):
        code, out, err = cli(options, "init", store)
        if code != 0:
            return [f"init, run again after a cut during init, exited {code}: {err.strip()[-600:]}"], 0
    code, out, err = cli(options, "verify", store)
    if code != 0:
        return [f"verify exited {code}: {(out.decode(errors='replace') + err).strip()[-600:]}"], 0
    problems = []
    for base, _, files in os.walk(store):
        problems += [f"temp file left after open: {os.path.join(base, f)}" for f in files if f.startswith(TEMP_PREFIX)]
    summary = re.search(rb"(\d+) objects and", out)
    return problems, int(summary.group(1)) if summary else -1


def history_of(options, store, key):
    code, out, err = cli(options, "history", store, key, "--json")
    if code != 0:
        return None, err.strip()
    return json.loads(out), None


def check_acknowledged(options, root, log, cut):
    store = os.path.join(root, "S")
    problems, objects = check_common(options, root, log, cut)
    if problems:
        return problems
    acked, in_flight = expectations(log, cut)
    live = 0
    keys = set(acked) | ({in_flight["key"]} if in_flight else set())
    for key in sorted(keys):
        versions = acked.get(key, [])
        history, error = history_of(options, store, key)
        if history is None:
            if versions:
                problems.append(f"{key}: acknowledged version {versions[-1][0]} but history fails: {error}")
            continue
        kept = {h["version"]: h for h in history}
        newest = max(kept, default=0)
        for version, data in versions:
            if version <= newest - HISTORY_LIMIT:
                continue  # pruned: past the retention
            h = kept.get(version)
            if h is None:
                problems.append(f"{key}: acknowledged version {version} is not in history (kept: {sorted(kept)})")
            elif (data is None) != h["isDeleted"] or (data is not None and h["hash"] != hashlib.sha256(data).hexdigest()):
                problems.append(f"{key}: version {version} in history is not what was acknowledged")
        if not history:
            continue
        current = max(history, key=lambda h: h["version"])
        last = versions[-1] if versions else (0, None)
        allowed = {last[0]: last[1]} if versions else {}
        if in_flight and in_flight["key"] == key:
            op = in_flight["begin"]
            upcoming = bytes.fromhex(in_flight["data"]) if op == "put" else None
            if op == "restore":
                upcoming = dict(versions).get(in_flight["from"])
            allowed[last[0] + 1] = upcoming
        if current["version"] not in allowed:
            problems.append(f"{key}: current version {current['version']}, acknowledged {last[0]} (allowed {sorted(allowed)})")
            continue
        expected = allowed[current["version"]]
        live += 0 if current["isDeleted"] else 1
        code, out, err = cli(options, "get", store, key)
        if expected is None:
            if code == 0 or not current["isDeleted"]:
                problems.append(f"{key}: version {current['version']} should be a delete, get exited {code}")
        elif code != 0:
            problems.append(f"{key}: get of version {current['version']} failed: {err.strip()}")
        elif out != expected:
            problems.append(f"{key}: get returned {len(out)} bytes that are not version {current['version']}'s {len(expected)}")
    if objects != live and not problems:
        problems.append(f"verify counted {objects} objects, but {live} were acknowledged or in flight")
    return problems


def writer_record(key, counter):
    payload = f"{key}:{counter};" * (1 + counter % 40)
    return json.dumps({"counter": counter, "key": key, "payload": payload}, sort_keys=True, separators=(",", ":")).encode()


def check_writer(options, root, log, cut):
    """crash-writer's promises: every acknowledged save is in history with its bytes, and each
    key holds its newest acknowledged save or a later, whole one."""
    store = os.path.join(root, "S")
    problems, _ = check_common(options, root, log, cut)
    if problems:
        return problems
    newest = {}
    for i in range(cut):
        if log.records[i][0] == "K":
            for key in log.records[i][1]["keys"]:
                newest.setdefault(key, []).append(log.records[i][1]["writer"])
    for key, counters in sorted(newest.items()):
        history, error = history_of(options, store, "Record/" + key)
        if history is None:
            problems.append(f"Record/{key}: acknowledged save {counters[-1]} but history fails: {error}")
            continue
        hashes = {h["hash"] for h in history}
        for counter in counters:  # the writer keeps every version
            if hashlib.sha256(writer_record(key, counter)).hexdigest() not in hashes:
                problems.append(f"Record/{key}: acknowledged save {counter} is not in history")
        code, out, err = cli(options, "get", store, "Record/" + key)
        try:
            value = json.loads(out) if code == 0 else None
        except ValueError:
            value = None
        if value is None or out != writer_record(key, value.get("counter", -1)):
            problems.append(f"Record/{key}: holds torn or missing contents (get exited {code})")
        elif value["counter"] < counters[-1]:
            problems.append(f"Record/{key}: went back from {counters[-1]} to {value['counter']}")
    return problems


def check_sync(options, root, log, cut):
    """Both stores open and verify clean; each store's acknowledged changes are in its
    history, and what an acknowledged sync left on both sides in both histories; no side holds
    bytes no workload wrote; and a sync run now succeeds and leaves both sides equal."""
    problems = []
    for name in ("A", "B"):
        found, _ = check_common(options, root, log, cut, name)
        problems += [f"{name}: {p}" for p in found]
    if problems:
        return problems
    stores = {name: os.path.join(root, name) for name in ("A", "B")}
    known = {None} | {bytes.fromhex(r[1]["data"]) for r in log.records if r[0] == "K" and r[1].get("begin") == "put"}
    keys = sorted({r[1]["key"] for r in log.records if r[0] == "K" and r[1].get("key")})
    histories = {(name, key): history_of(options, store, key)[0] or [] for name, store in stores.items() for key in keys}
    for name in stores:
        acked, _ = expectations(log, cut, name)
        for key, versions in acked.items():
            kept = {h["version"]: h for h in histories[(name, key)]}
            for version, data in versions:
                if data is None:
                    if not any(h["isDeleted"] for h in kept.values()):
                        problems.append(f"{name} {key}: the acknowledged delete is not in history")
                elif kept.get(version, {}).get("hash") != hashlib.sha256(data).hexdigest():
                    problems.append(f"{name} {key}: acknowledged version {version} is not in history with its bytes")
    for record in log.records[:cut]:
        if record[0] == "K" and record[1].get("done") == "sync":
            for key, held in record[1]["held"].items():
                digest = held and hashlib.sha256(bytes.fromhex(held)).hexdigest()
                for name in stores:
                    if digest and digest not in {h["hash"] for h in histories[(name, key)] if h.get("hash")}:
                        problems.append(f"{name} {key}: what an acknowledged sync left on both sides is not in history")

    def holdings():
        held = {}
        for name, store in stores.items():
            for key in keys:
                code, out, _ = cli(options, "get", store, key)
                held[(name, key)] = out if code == 0 else None
                if held[(name, key)] not in known:
                    problems.append(f"{name} {key}: holds {len(out)} bytes no workload wrote")
        return held

    holdings()
    code, out, err = cli(options, "sync", stores["A"], stores["B"])
    if code != 0:
        return problems + [f"sync after the cut exited {code}: {err.strip()[-600:]}"]
    held = holdings()
    for key in keys:
        if held[("A", key)] != held[("B", key)]:
            problems.append(f"{key}: A and B differ after a sync run after the cut")
    return problems


CHECKERS = {"writer": check_writer, "sync": check_sync}


# Driver --------------------------------------------------------------------------------------


def build_recorder(work):
    library = os.path.join(work, "recorder.so")
    compiler = shutil.which("cc") or shutil.which("clang") or "cc"
    command = [compiler, "-O1", "-shared", "-fPIC", "-o", library, os.path.join(HERE, "recorder.c"), "-ldl"]
    subprocess.run(command, check=True)
    return library


def describe_cut(log, cut):
    """The last acknowledgement before the cut, and the operation in flight."""
    acks = [r[1] for r in log.records[:cut] if r[0] == "K"]
    if not acks:
        return "before any acknowledgement"
    last = acks[-1]
    if "writer" in last:
        return f"after crash-writer's save {last['writer']}"
    if "begin" in last:
        return f"during {last['begin']} {last['key'] or ''}".rstrip()
    if "init" in last:
        return "after init"
    return f"after {last['done']} {last['key'] or ''}".rstrip()


def check_state(options, workload, log, index, cut, seed, sabotage):
    rng = random.Random(seed)
    keep = rng.choice([0.0, 0.25, 0.5, 0.75, 1.0])
    state = build_state(log, cut, rng, keep, sabotage)
    directory = tempfile.mkdtemp(prefix="power-cut-state-")
    root = os.path.join(directory, "root")
    write_state(state, root)
    checker = CHECKERS.get(workload, check_acknowledged)
    try:
        problems = checker(options, root, log, cut)
    except Exception as error:  # a crash of the checker is a broken state too, reported as such
        problems = [f"checker failed: {error!r}"]
    label = f"{workload} state {index} (seed {seed}, cut after {cut}/{len(log.records)} records, keep {keep}, {describe_cut(log, cut)})"
    if problems and options.keep_failures:
        kept = os.path.join(options.keep_failures, f"{workload}-{index}")
        shutil.rmtree(kept, ignore_errors=True)
        write_state(state, kept)
    shutil.rmtree(directory, ignore_errors=True)
    return label, problems


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", required=True, help="the folder holding archive-sync and crash-writer, or a file in it")
    parser.add_argument("--states", type=int, default=300, help="states to check, shared among the workloads")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--sabotage", choices=["drop-flushed"], help="break what the model promises, to show the checker catches it")
    parser.add_argument("--expect-broken", action="store_true", help="succeed only when some state broke an invariant")
    parser.add_argument("--keep-failures", help="write each state that broke an invariant into this folder")
    options = parser.parse_args()
    # The folder holding the products; given a test runner (inside `NAME.xctest` or not), its own.
    options.bin = os.path.abspath(options.bin)
    while not os.path.isfile(os.path.join(options.bin, "archive-sync")) and options.bin != "/":
        options.bin = os.path.dirname(options.bin)

    work = tempfile.mkdtemp(prefix="power-cut-")
    recorder = build_recorder(work)
    names = options.workloads.split(",")
    checked = broken = 0
    for number, name in enumerate(names):
        runner = Runner(options, recorder, name)
        WORKLOADS[name](runner)
        log = Log(parse_log(runner.log))
        # The recorder must have seen every change: replaying the whole log, keeping
        # everything, gives the store as it is on disk.
        replayed = build_state(log, len(log.records), random.Random(0), 1.0)
        actual = read_tree(runner.root)
        if replayed != actual:
            differ = sorted(p for p in set(replayed) | set(actual) if replayed.get(p, 0) != actual.get(p, 0))
            raise SystemExit(f"power-cut: the recorder missed a change in workload {name}: {differ}")
        count = options.states // len(names) + (1 if number < options.states % len(names) else 0)
        rng = random.Random(f"{options.seed}-{name}")
        jobs = []
        with concurrent.futures.ThreadPoolExecutor(max_workers=options.jobs) as pool:
            for index in range(count):
                cut = rng.randrange(1, len(log.records) + 1)
                jobs.append(pool.submit(check_state, options, name, log, index, cut, rng.randrange(1 << 30), options.sabotage))
            for job in jobs:
                label, problems = job.result()
                checked += 1
                if problems:
                    broken += 1
                    print(f"broke: {label}:", flush=True)
                    for problem in problems:
                        print(f"    {problem}", flush=True)
        shutil.rmtree(runner.work, ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)
    print(f"power-cut: {checked} states checked, {broken} broke an invariant", flush=True)
    if options.expect_broken:
        sys.exit(0 if broken > 0 else 1)
    sys.exit(1 if broken else 0)


if __name__ == "__main__":
    main()
