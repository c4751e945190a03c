"""Write faults (docs/power-cut.md): each command of a workload run again from the store as it
was before it, with ENOSPC or EIO at its Nth call that changes a file (faults.c), then checked.

Per fault: the command fails with exit status 1 and one line naming the store and the system's
reason; the store as left, reopened, verifies clean and holds every acknowledged change (the
command in flight either whole or not at all: the power-cut checks); and the command run again
without the fault succeeds and leaves a store that verifies clean.
"""

import os
import random
import shutil
import subprocess
import tempfile

from powercut_checks import CHECKERS, check_acknowledged
from powercut_checks import cli as cli_run
from powercut_model import Log, parse_log

# The kinds of fault: a disk that fills up at the Nth call and stays full (its write, if it
# is one, half lands), and one failed I/O.
KINDS = {"ENOSPC": ("ENOSPC", "sticky", "No space left on device"), "EIO": ("EIO", "once", "Input/output error")}
FLUSHES = ("fsync", "fdatasync", "syncfs")
# What SQLite says for the same causes when it reports them itself.
SQLITE_REASONS = {"ENOSPC": ("disk is full", "database or disk is full"), "EIO": ("disk I/O error",)}


class Step:
    """One command of a workload: its arguments and input, the store before it (a copy), how
    many calls it made that a fault can hit, and the log's length when it began."""

    def __init__(self, arguments, stdin, root, snapshot, log_length):
        self.arguments, self.stdin, self.root, self.snapshot, self.log_length = arguments, stdin, root, snapshot, log_length
        self.calls = 0


class StepRecorder:
    """Wraps a workload's Runner: before each command, keeps a copy of the stores and counts
    the calls the command makes (the faults library's COUNT mode)."""

    def __init__(self, runner, faults_library):
        self.runner = runner
        self.steps = []
        self.library = faults_library
        original = runner.run

        def run(*arguments, stdin=None):
            snapshot = os.path.join(runner.work, f"step-{len(self.steps)}")
            shutil.copytree(runner.root, snapshot, symlinks=True)
            step = Step(arguments, stdin, runner.root, snapshot, os.path.getsize(runner.log))
            self.steps.append(step)
            counter = snapshot + ".count"
            saved = runner.env
            runner.env = dict(saved, POWER_CUT_FAULT="COUNT", POWER_CUT_FAULT_COUNTER=counter)
            try:
                return original(*arguments, stdin=stdin)
            finally:
                runner.env = saved
                step.calls = read_counter(counter)

        runner.run = run


def read_counter(path):
    try:
        with open(path, "rb") as f:
            return int.from_bytes(f.read(8), "little")
    except OSError:
        return 0


def fault_plan(steps, count, rng):
    """(step, call, kind) for every call of every step and both kinds, or `count` of them
    drawn evenly (count < 0: all)."""
    plan = [(s, call, kind) for s, step in enumerate(steps) for call in range(1, step.calls + 1) for kind in KINDS]
    if 0 <= count < len(plan):
        plan = sorted(rng.sample(plan, count))
    return plan


def check_message(code, err, store_paths, kind):
    """The failure as reported: exit status 1, one line, naming the store and the reason."""
    problems = []
    lines = [line for line in err.strip().split("\n") if line]
    if code != 1:
        problems.append(f"exited {code}, not 1 (a system failure)")
    if len(lines) != 1:
        problems.append(f"printed {len(lines)} lines, not one sentence")
    text = err.strip()
    if not any(path in text for path in store_paths):
        problems.append("the error does not name the store")
    # SQLite says "disk I/O error" for any failed flush, and "unable to open database file"
    # for any failed create of its files, whatever the errno.
    reasons = (KINDS[kind][2],) + SQLITE_REASONS[kind] + ("disk I/O error", "unable to open database file")
    if not any(reason in text for reason in reasons):
        problems.append("the error does not say the system's reason")
    return [f"{p}: {text[-400:]!r}" for p in problems]


def run_trial(options, library, workload, log_path, steps, s, call, kind):
    """Runs step `s` with a fault of `kind` at `call`, checks, runs it again; returns (label,
    problems), or None when the command made fewer calls this time and no fault fired."""
    step = steps[s]
    trial = tempfile.mkdtemp(prefix="power-cut-fault-")
    try:
        return trial_in(options, library, workload, log_path, step, s, call, kind, trial)
    finally:
        shutil.rmtree(trial, ignore_errors=True)


def trial_in(options, library, workload, log_path, step, s, call, kind, trial):
    root = os.path.join(trial, "root")
    shutil.copytree(step.snapshot, root, symlinks=True)
    arguments = [a.replace(step.root, root) for a in step.arguments]
    counter = os.path.join(trial, "counter")
    errno_name, mode, _ = KINDS[kind]
    env = dict(os.environ, POWER_CUT_ROOT=root, POWER_CUT_FAULT=f"{errno_name}:{call}:{mode}", POWER_CUT_FAULT_COUNTER=counter, LD_PRELOAD=library)
    cli = os.path.join(options.bin, "archive-sync")
    result = subprocess.run([cli, *arguments], input=step.stdin, env=env, capture_output=True, timeout=120)
    try:
        fired = open(counter + ".fired").read().split("\n")[0]
    except OSError:
        return None
    command = step.arguments[0]
    label = f"{workload} command {s} ({command}) with {kind} at call {call} of {step.calls} ({fired.split(' ', 1)[1].replace(root, '')})"
    err = result.stderr.decode(errors="replace")
    stores = [a for a in arguments if isinstance(a, str) and a.startswith(root)]
    problems = [] if result.returncode == 0 else check_message(result.returncode, err, stores, kind)
    # On a disk that is still full, the store as left can be read: reads never need room. Out
    # of blocks; and out of inodes, when a `-wal` is left (with none, SQLite must make one to
    # read: docs/power-cut.md, not covered).
    if kind == "ENOSPC" and step.arguments[0] != "init":
        for store in stores:
            manifest = os.path.join(store, ".archive-sync", "manifest.sqlite")
            modes = ["full"] + (["no-inodes"] if os.path.exists(manifest + "-wal") else [])
            for mode in modes if os.path.exists(manifest) else []:
                full = dict(env, POWER_CUT_FAULT=f"ENOSPC:1:{mode}", POWER_CUT_FAULT_COUNTER=f"{counter}.{mode}")
                read = subprocess.run([cli, "ls", store], env=full, capture_output=True, timeout=120)
                if read.returncode != 0:
                    problems.append(f"on a disk out of {'blocks' if mode == 'full' else 'inodes'}, ls exited {read.returncode}: {read.stderr.decode(errors='replace').strip()[-400:]}")
    # The store as the failure left it, reopened: the power-cut invariants, with the command
    # in flight (whole, or not at all).
    log = Log(parse_log_prefix(log_path, step.log_length))
    checked = os.path.join(trial, "checked")
    shutil.copytree(root, checked, symlinks=True)
    checker = CHECKERS.get(workload, check_acknowledged)
    try:
        problems += [f"as left: {p}" for p in checker(options, checked, log, len(log.records))]
    except Exception as error:  # a crash of the checker is a broken state too
        problems.append(f"as left: checker failed: {error!r}")
    if result.returncode == 0:
        # The fault fell where the work did not need the call (SQLite's index in `-shm`, which
        # it retries, or a checkpoint after the commit): the checks above hold, and the work
        # is done. A flush of an object's file that failed must not be acknowledged (SQLite
        # flushes `.archive-sync` after making its `-wal`, and ignores a failure by design).
        # A failed `syncfs` may be followed by success: it settles writes whose manifest commit
        # was the flush that acknowledged them, and their intents stay for the next open.
        if fired.split(" ")[1] in FLUSHES and fired.split(" ")[1] != "syncfs" and "/.archive-sync" not in fired:
            problems.append(f"succeeded although its {fired.split(' ')[1]} failed")
        return label + " (tolerated)", problems
    # The work, run again without the fault, completes: a remove that recovery completed
    # (its intent rolled forward when the store was next opened) finds nothing to remove.
    again = subprocess.run([cli, *arguments], input=step.stdin, capture_output=True, timeout=120)
    done = again.returncode == 2 and arguments[0] == "rm" and "does not exist" in again.stderr.decode(errors="replace")
    if again.returncode != 0 and not done:
        problems.append(f"run again, it exited {again.returncode}: {again.stderr.decode(errors='replace').strip()[-400:]}")
    else:
        for store in stores:
            code, out, err = cli_run(options, "verify", store)
            if code != 0:
                problems.append(f"after running it again, verify exited {code}: {(out.decode(errors='replace') + err).strip()[-400:]}")
    return label, problems


def parse_log_prefix(path, length):
    """The log's records before `length` bytes (the acknowledgements before a step)."""
    with open(path, "rb") as f:
        data = f.read(length)
    with tempfile.NamedTemporaryFile(delete=False) as f:
        f.write(data)
    try:
        return parse_log(f.name)
    finally:
        os.unlink(f.name)
