#!/usr/bin/env python3
"""The power-cut simulator: runs workloads on a store under the recorder (recorder*.c), builds
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

from powercut_checks import CHECKERS, check_acknowledged
from powercut_faults import StepRecorder, fault_plan, run_trial
from powercut_workloads import workload_recovery, workload_sync_retention, workload_watch
from powercut_model import Log, build_state, parse_log, read_tree, write_state

HERE = os.path.dirname(os.path.abspath(__file__))


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
            # Under the recorder too: an open and its close may write (a checkpoint, a recovery).
            result = subprocess.run([self.cli, "get", self.path("A"), key], env=self.env, capture_output=True)
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


def workload_writer(runner, *options, saves=12):
    """crash-writer's library saves and batches of four, stopped after a dozen saves."""
    writer = os.path.join(os.path.dirname(runner.cli), "crash-writer")
    with open(runner.log, "ab") as log:
        process = subprocess.Popen([writer, runner.path("S"), "0", *options], stdout=log, env=runner.env)
    deadline = time.time() + 30
    # Its acknowledgements, roughly counted (a written byte could look like one): enough to stop.
    while time.time() < deadline and len(re.findall(rb"\n[0-9]+ k", open(runner.log, "rb").read())) < saves:
        time.sleep(0.2)
    process.send_signal(signal.SIGUSR2)  # the recorder's stop: between two recorded calls
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        raise SystemExit("power-cut: crash-writer did not stop within 60 s of SIGUSR2")


def workload_threads(runner):
    """crash-writer's saves from four threads at once, each its own keys: group commits."""
    workload_writer(runner, "4", saves=24)


def workload_window(runner):
    """crash-writer's saves with a pause of 1.5 s after every third: cuts before, inside and
    after the second within which the store's background `syncfs` settles them."""
    workload_writer(runner, "1", "3", saves=10)


def workload_bulk(runner):
    """crash-writer's batch of 260 saves into a new collection, which it stages as a directory
    and renames into place after its commit, then its saves and batches of four."""
    workload_writer(runner, "1", "0", "260", saves=8)


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


# Workloads whose work is not a sequence of CLI commands run to completion: no write faults.
NO_FAULTS = {"writer", "threads", "window", "bulk", "watch"}

WORKLOADS = {
    "saves": workload_saves,
    "removes": workload_removes,
    "restore": workload_restore,
    "retention": workload_retention,
    "writer": workload_writer,
    "threads": workload_threads,
    "window": workload_window,
    "bulk": workload_bulk,
    "sync": workload_sync,
    "watch": lambda runner: workload_watch(runner, document),
    "sync-retention": lambda runner: workload_sync_retention(runner, document),
    "recovery": lambda runner: workload_recovery(runner, document),
}

# Driver --------------------------------------------------------------------------------------


def build_library(work, name, sources):
    library = os.path.join(work, name)
    compiler = shutil.which("cc") or shutil.which("clang") or "cc"
    command = [compiler, "-O1", "-shared", "-fPIC", "-o", library, *(os.path.join(HERE, s) for s in sources), "-ldl"]
    subprocess.run(command, check=True)
    return library


def build_recorder(work):
    """The recorder, preloaded after the faults library (faults.c), which does nothing unless
    POWER_CUT_FAULT asks it to: each process runs with both."""
    recorder = build_library(work, "recorder.so", ("recorder.c", "recorder_data.c", "recorder_names.c"))
    return build_library(work, "faults.so", ("faults.c",)) + ":" + recorder


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
    parser.add_argument("--faults", type=int, default=0, help="write faults to inject, shared among the workloads of CLI commands (-1: at every call of every command, both kinds)")
    options = parser.parse_args()
    # The folder holding the products; given a test runner (inside `NAME.xctest` or not), its own.
    options.bin = os.path.abspath(options.bin)
    while not os.path.isfile(os.path.join(options.bin, "archive-sync")) and options.bin != "/":
        options.bin = os.path.dirname(options.bin)

    work = tempfile.mkdtemp(prefix="power-cut-")
    recorder = build_recorder(work)
    names = options.workloads.split(",")
    checked = broken = 0
    faulted = fault_broken = tolerated = 0
    fault_workloads = [n for n in names if n not in NO_FAULTS]
    for number, name in enumerate(names):
        runner = Runner(options, recorder, name)
        steps = StepRecorder(runner, recorder.split(":")[0]).steps if name in fault_workloads and options.faults else []
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
        if steps:
            share = options.faults // len(fault_workloads) + (1 if fault_workloads.index(name) < options.faults % len(fault_workloads) else 0)
            plan = fault_plan(steps, -1 if options.faults < 0 else share, random.Random(f"{options.seed}-{name}-faults"))
            library = recorder.split(":")[0]
            with concurrent.futures.ThreadPoolExecutor(max_workers=options.jobs) as pool:
                jobs = [pool.submit(run_trial, options, library, name, runner.log, steps, *trial) for trial in plan]
                for job in jobs:
                    outcome = job.result()
                    if outcome is None:
                        continue
                    label, problems = outcome
                    faulted += 1
                    tolerated += label.endswith("(tolerated)")
                    if problems:
                        fault_broken += 1
                        print(f"broke: {label}:", flush=True)
                        for problem in problems:
                            print(f"    {problem}", flush=True)
        shutil.rmtree(runner.work, ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)
    if options.faults:
        print(f"write faults: {faulted} states left by a fault checked ({tolerated} where the command succeeded all the same), {fault_broken} broke an invariant", flush=True)
    checked += faulted
    broken += fault_broken
    print(f"power-cut: {checked} states checked, {broken} broke an invariant", flush=True)
    if options.expect_broken:
        sys.exit(0 if broken > 0 else 1)
    sys.exit(1 if broken else 0)


if __name__ == "__main__":
    main()
