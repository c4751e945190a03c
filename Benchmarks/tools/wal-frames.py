#!/usr/bin/env python3
# WAL frames per commit of a store's manifest, by table: what each commit writes before its
# one flush. Read from a copy taken while a writer runs (its WAL is checkpointed and removed
# when it closes), e.g. with crash-writer from `swift build --build-tests`:
#   .build/debug/archive-sync init /tmp/s; .build/debug/crash-writer /tmp/s 0 >/dev/null & pid=$!
#   sleep 4; kill -STOP $pid; mkdir /tmp/c; cp /tmp/s/.archive-sync/manifest.sqlite* /tmp/c; kill -KILL $pid
#   python3 Benchmarks/tools/wal-frames.py /tmp/c/manifest.sqlite
# Only the frames of the WAL's current generation (its header's salt) count. Pages are named
# by the table or index that owns them now (SQLite's dbstat); "free/new" for the rest.
import sqlite3
import struct
import sys

path = sys.argv[1]
wal = open(path + "-wal", "rb").read()
page_size = struct.unpack(">I", wal[8:12])[0]
salt = wal[16:24]
# Read only: a connection that could write would checkpoint and remove the copy's WAL on closing.
readonly = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
owner = {page: name for name, page in readonly.execute("SELECT name, pageno FROM dbstat")}
frames = commits = 0
by_table = {}
offset = 32
while offset + 24 + page_size <= len(wal) and wal[offset + 8 : offset + 16] == salt:
    page, commit = struct.unpack(">II", wal[offset : offset + 8])
    frames += 1
    name = owner.get(page, "free/new")
    by_table[name] = by_table.get(name, 0) + 1
    commits += 1 if commit else 0
    offset += 24 + page_size
if commits == 0:
    sys.exit("no committed frames in " + path + "-wal")
print(f"{frames} frames, {commits} commits, {frames / commits:.2f} frames per commit")
for name, count in sorted(by_table.items(), key=lambda item: -item[1]):
    print(f"  {name}: {count / commits:.2f}")
