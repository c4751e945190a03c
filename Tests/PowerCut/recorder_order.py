#!/usr/bin/env python3
"""Checks that the recorder logs calls in the order they happened across processes: one
process renames `a` to `b` and is held between that call and its record; another waits until
`b` exists and then creates `c`. The log must hold the rename before the create (the state
builder replays the log in order: the other way round it would build a `c` without `b`, a
state no disk can be in). Prints one line and exits 0 when it does, 1 when it does not.

    recorder_order.py
"""

import os
import shutil
import subprocess
import sys
import tempfile

from powercut import build_recorder
from powercut_model import parse_log

WAIT_AND_CREATE = """
import os, sys, time
root = sys.argv[1]
while not os.path.exists(os.path.join(root, "b")):
    time.sleep(0.001)
with open(os.path.join(root, "c"), "wb") as f:
    f.write(b"c")
"""


def main():
    work = tempfile.mkdtemp(prefix="power-cut-order-")
    try:
        return check(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def check(work):
    root = os.path.realpath(os.path.join(work, "root"))
    os.mkdir(root)
    with open(os.path.join(root, "a"), "wb") as f:
        f.write(b"a")
    log = os.path.join(work, "log")
    env = dict(os.environ, POWER_CUT_ROOT=root, POWER_CUT_LOG=log, LD_PRELOAD=build_recorder(work))
    waiter = subprocess.Popen([sys.executable, "-c", WAIT_AND_CREATE, root], env=env)
    renamer = [sys.executable, "-c", "import os, sys; os.rename(sys.argv[1] + '/a', sys.argv[1] + '/b')", root]
    subprocess.run(renamer, env=dict(env, POWER_CUT_RECORD_DELAY_MS="300"), check=True)
    if waiter.wait(timeout=30) != 0:
        raise SystemExit("recorder order: the waiting process failed")
    ops = [(r[0], r[2] if r[0] in ("C", "R") else None) for r in parse_log(log)]
    renamed = next((i for i, (op, name) in enumerate(ops) if op == "R"), None)
    created = next((i for i, (op, name) in enumerate(ops) if op == "C" and name == "c"), None)
    if renamed is None or created is None:
        raise SystemExit(f"recorder order: the log lacks the rename or the create: {ops}")
    if created < renamed:
        print("recorder order: the create of c, made after the rename of a to b, was logged before it")
        return 1
    print("recorder order: the rename was logged before the create that followed it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
