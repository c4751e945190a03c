#!/usr/bin/env python3
# Reads `perf script` (samples with dwarf call chains) of one `archive-sync sync` and prints the
# CPU under the store's recording step and under the whole write transaction of its large
# commit, per row: `record-page.py FREQUENCY ROWS`. See record-page.sh.
import re
import sys

frequency, rows = int(sys.argv[1]), int(sys.argv[2])
record = re.compile(r"ArchiveStoreAAC6record33_\w*directories2tx")
commit = re.compile(r"ArchiveStoreAAC12commitStaged")
place = re.compile(r"ArchiveStoreAAC5place33_")
counts = {"record": 0, "commit": 0, "place": 0}
for sample in sys.stdin.read().split("\n\n"):
    if record.search(sample):
        counts["record"] += 1
    if commit.search(sample):
        counts["commit"] += 1
        if place.search(sample):
            counts["place"] += 1
per_row = {name: count / frequency / rows * 1e6 for name, count in counts.items()}
print(
    "recording %.1f us/row; commitStaged %.1f us/row (of which renames %.1f); %d samples in the commit"
    % (per_row["record"], per_row["commit"], per_row["place"], counts["commit"])
)
