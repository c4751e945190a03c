#!/bin/bash
# A sync's page recorded on the far side, without ssh: store A of 100,000 objects of 512 bytes,
# B synced from it, then 1,000 of A's objects (every 100th) changed; each run syncs A into a fresh
# copy of B (`archive-sync sync A W`, incremental, one page of 1,000 writes) under
# `perf record --call-graph dwarf`, and record-page.py prints the CPU of the store's recording step
# (`record(_:directories:tx:)`, inside the write transaction) and of the whole transaction per row.
#   Benchmarks/tools/record-page.sh Benchmarks/.build/release/archive-sync /dev/shm/record-page [RUNS]
# Use tmpfs (/dev/shm) for CPU figures; the stores take about 1.1 GB. Remove DIR when done.
set -e
CLI=$(realpath "$1"); D=$2; RUNS=${3:-3}
TOOLS=$(dirname "$(realpath "$0")")
if [ ! -d "$D/B0" ]; then
    rm -rf "$D"; mkdir -p "$D/A/Item"
    python3 - "$D/A/Item" y <<'PY'
import sys
for i in range(100000):
    n = str(i)
    open("%s/item%d.json" % (sys.argv[1], i), "w").write('{"n":%d,"pad":"%s"}' % (i, "x" * (512 - 15 - len(n))))
PY
    find "$D/A/Item" -type f -exec touch -d '2 hours ago' {} +
    "$CLI" init "$D/A" >/dev/null; "$CLI" scan "$D/A" >/dev/null
    "$CLI" init "$D/B0" >/dev/null; "$CLI" sync "$D/A" "$D/B0" >/dev/null
    python3 - "$D/A/Item" <<'PY'
import sys
for i in range(0, 100000, 100):
    n = str(i)
    open("%s/item%d.json" % (sys.argv[1], i), "w").write('{"n":%d,"pad":"%s"}' % (i, "y" * (512 - 15 - len(n))))
PY
    touch -d '1 hour ago' "$D"/A/Item/item*00.json
    "$CLI" scan "$D/A" >/dev/null
    cp -a "$D/A/.archive-sync" "$D/A-manifest"
fi
for run in $(seq "$RUNS"); do
    # A's checkpoint of B moves with each sync: A's manifest goes back to the state B0 was synced from.
    rm -rf "$D/W" "$D/A/.archive-sync"; cp -a "$D/A-manifest" "$D/A/.archive-sync"; cp -a "$D/B0" "$D/W"
    # The copy's files have new inodes: a scan records their stamps first (and, with a binary of
    # another layout, upgrades W's manifest), untimed.
    "$CLI" scan "$D/W" >/dev/null
    perf record -q -F 4000 --call-graph dwarf,16384 -o "$D/perf.data" "$CLI" sync "$D/A" "$D/W" >/dev/null 2>&1
    perf script -i "$D/perf.data" 2>/dev/null | python3 "$TOOLS/record-page.py" 4000 1000
done
