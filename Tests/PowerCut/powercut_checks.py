"""The power-cut simulator's checks: what each state must hold, asked of the real CLI
(docs/power-cut.md)."""

import hashlib
import json
import os
import re
import subprocess

TEMP_PREFIX = ".archive-sync-tmp."
# The versions a store keeps by default (Manifest.defaultHistoryLimit), current one included.
HISTORY_LIMIT = 10


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
            elif value["done"] == "abandoned":
                pass  # a killed command that recovery rolled back: nothing was acknowledged
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
            if in_flight.get("external"):
                # Another program's change, recorded by the watcher before that program
                # flushed its directory: a cut can lose the change after the manifest kept
                # it, and the next open records the file as it finds it, the last bytes again.
                allowed[last[0] + 2] = last[1]
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
    # The bulk batch's objects (`b0`...) are saved once: each must be at its one acknowledged
    # version, which `verify` (above) found in its file. One `ls` for all of them.
    bulk = {key: counters for key, counters in newest.items() if key.startswith("b")}
    if bulk:
        code, out, err = cli(options, "ls", store, "Record", "--json")
        listed = {o["id"]: o["hash"] for o in json.loads(out)} if code == 0 else {}
        for key, counters in sorted(bulk.items()):
            if listed.get("Record/" + key) != hashlib.sha256(writer_record(key, counters[-1])).hexdigest():
                problems.append(f"Record/{key}: acknowledged bulk save {counters[-1]} is not its current version (ls exited {code})")
    for key, counters in sorted(newest.items()):
        if key in bulk:
            continue
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


def check_sync(options, root, log, cut, limit=HISTORY_LIMIT):
    """Both stores open and verify clean; each store's acknowledged changes within the
    retention of `limit` versions are in its history, and what an acknowledged sync left on
    both sides in both histories (only the last sync's, when history is pruned: the later
    syncs' own writes pruned the earlier); no side holds bytes no workload wrote; and a sync
    run now succeeds and leaves both sides equal."""
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
                if version <= max(kept, default=0) - limit:
                    continue  # pruned: past the retention
                if data is None:
                    if not any(h["isDeleted"] for h in kept.values()):
                        problems.append(f"{name} {key}: the acknowledged delete is not in history")
                elif kept.get(version, {}).get("hash") != hashlib.sha256(data).hexdigest():
                    problems.append(f"{name} {key}: acknowledged version {version} is not in history with its bytes")
    syncs = [r for r in log.records[:cut] if r[0] == "K" and r[1].get("done") == "sync"]
    for record in syncs if limit == HISTORY_LIMIT else syncs[-1:]:
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


def check_sync_retention(options, root, log, cut):
    return check_sync(options, root, log, cut, limit=3)


def check_watch(options, root, log, cut):
    """The watcher, started again after the cut, scans first: what other programs wrote
    durably and the watcher had not recorded yet is recorded then (as the operation in flight)."""
    store = os.path.join(root, "S")
    if any(r[0] == "K" and "init" in r[1] for r in log.records[:cut]):
        code, out, err = cli(options, "scan", store)
        if code != 0:
            return [f"scan after the cut exited {code}: {err.strip()[-600:]}"]
    return check_acknowledged(options, root, log, cut)


CHECKERS = {"writer": check_writer, "threads": check_writer, "window": check_writer, "bulk": check_writer, "sync": check_sync, "sync-retention": check_sync_retention, "watch": check_watch}
