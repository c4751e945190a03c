// watch-bench: the watcher's performance targets (Benchmarks/README.md). Work in progress.
print("watch-bench: not written yet")
