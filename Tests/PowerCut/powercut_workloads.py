"""The power-cut simulator's workloads beyond single commands (docs/power-cut.md): the
watcher recording other programs' writes, retention pruning by a sync, and an open that
recovers what a crashed command left."""

import hashlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading

# Another program's durable write, as an editor makes it: a temp file beside the target
# (ignored by the store: its name starts with a dot), flushed, renamed over the target, and
# the directory flushed (and a directory it made, in its parent). Run under the recorder like the store's own commands.
EXTERNAL_WRITE = """
import os, sys
path = sys.argv[1]
folder = os.path.dirname(path)
if not os.path.isdir(folder):
    os.mkdir(folder)
    parent = os.open(os.path.dirname(folder), os.O_RDONLY)
    os.fsync(parent)
    os.close(parent)
if sys.argv[2] == "write":
    temp = os.path.join(folder, "." + os.path.basename(path) + ".tmp")
    with open(temp, "wb") as f:
        f.write(sys.stdin.buffer.read())
        f.flush()
        os.fsync(f.fileno())
    os.rename(temp, path)
else:
    os.unlink(path)
directory = os.open(folder, os.O_RDONLY)
os.fsync(directory)
os.close(directory)
"""


def workload_watch(runner, document):
    """`watch` recording other programs' writes and deletes; each change it prints is an
    acknowledgement (each write waits for the previous one's)."""
    runner.init()
    store = runner.path("S")
    watcher = subprocess.Popen(
        [runner.cli, "watch", store, "--json", "--debounce", "0"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=runner.env
    )
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in watcher.stdout], daemon=True).start()

    def change(operation, key, data=b""):
        begin = {"begin": "put", "key": key, "data": data.hex()} if operation == "write" else {"begin": "rm", "key": key}
        begin["external"] = True
        runner.ack(begin)
        path = os.path.join(store, key + ".json")
        subprocess.run([sys.executable, "-c", EXTERNAL_WRITE, path, operation], input=data, env=runner.env, check=True)
        while True:
            try:
                printed = json.loads(lines.get(timeout=30))
            except queue.Empty:
                watcher.kill()
                raise SystemExit(f"power-cut: the watcher did not record {operation} {key} within 30 s")
            if printed.get("id") == key:
                break
        if operation == "write":
            runner.ack({"done": "put", "key": key, "version": printed["version"], "store": "S"})
        else:
            runner.ack({"done": "rm", "key": key, "store": "S"})

    # The first write waits for the first scan to end, and for the watch to start.
    change("write", "P/a", document("P/a", 1, 700))
    change("write", "P/b", document("P/b", 1, 3000))
    change("write", "P/a", document("P/a", 2, 1200))
    change("delete", "P/b")
    change("write", "Q/c", document("Q/c", 1, 400))
    change("write", "P/a", document("P/a", 3, 100))
    watcher.send_signal(signal.SIGTERM)
    try:
        watcher.wait(timeout=30)
    except subprocess.TimeoutExpired:
        watcher.kill()
        raise SystemExit("power-cut: the watcher did not stop within 30 s of SIGTERM")


def workload_sync_retention(runner, document):
    """Two stores keeping 3 versions, synced after each round of changes, so that the sync's
    own writes prune history on both sides."""
    keys = ["P/a", "P/b"]
    for store in ("A", "B"):
        runner.run("init", runner.path(store), "--history", "3")
        runner.ack({"init": store})
    runner.put("P/a", document("P/a", 1, 900), "A")
    runner.put("P/b", document("P/b", 1, 2000), "B")
    runner.sync(keys)
    for n in range(2, 5):
        runner.put("P/a", document("P/a", n, 300 + 600 * n), "A")
        runner.put("P/b", document("P/b", n, 1500 - 300 * n), "B")
        runner.sync(keys)


def workload_recovery(runner, document):
    """Puts killed at a chosen call (faults.c's KILL), each followed by an open that recovers
    what it left: cuts fall during the recovery itself."""
    runner.init()
    runner.put("P/a", document("P/a", 1, 1500))
    runner.put("P/b", document("P/b", 1, 600))
    counter = os.path.join(runner.work, "counter")
    for n, (key, size, fraction) in enumerate([("P/a", 4000, 0.3), ("P/b", 300, 0.6), ("P/a", 900, 0.85)], start=2):
        data = document(key, n, size)
        runner.ack({"begin": "put", "key": key, "data": data.hex(), "store": "S"})
        # Counted first: the calls this put makes, to kill it part of the way through.
        scratch = os.path.join(runner.work, "scratch")
        subprocess.run(["cp", "-a", runner.path("S"), scratch], check=True)
        env = dict(runner.env, POWER_CUT_ROOT=scratch, POWER_CUT_FAULT="COUNT", POWER_CUT_FAULT_COUNTER=counter)
        env.pop("POWER_CUT_LOG")
        subprocess.run([runner.cli, "put", scratch, key], input=data, env=env, capture_output=True, check=True)
        calls = int.from_bytes(open(counter, "rb").read(8), "little")
        subprocess.run(["rm", "-rf", scratch, counter], check=True)
        env = dict(runner.env, POWER_CUT_FAULT=f"KILL:{max(1, int(calls * fraction))}", POWER_CUT_FAULT_COUNTER=counter)
        killed = subprocess.run([runner.cli, "put", runner.path("S"), key], input=data, env=env, capture_output=True)
        os.unlink(counter)
        if killed.returncode != 137:
            raise SystemExit(f"power-cut: the put to be killed at call {int(calls * fraction)} of {calls} exited {killed.returncode}")
        runner.run("ls", runner.path("S"))  # opens, and recovers
        # Under the recorder, as every command on the store: its close may write (a checkpoint).
        history = json.loads(
            subprocess.run([runner.cli, "history", runner.path("S"), key, "--json"], env=runner.env, capture_output=True, check=True).stdout
        )
        runner.ack(recovered(history, key, data))


def recovered(history, key, data):
    """What recovery made of a killed put, as an acknowledgement: the put, if it rolled
    forward; otherwise nothing."""
    current = max(history, key=lambda h: h["version"])
    if not current["isDeleted"] and current.get("hash") == hashlib.sha256(data).hexdigest():
        return {"done": "put", "key": key, "version": current["version"], "store": "S"}
    return {"done": "abandoned", "key": key, "store": "S"}
