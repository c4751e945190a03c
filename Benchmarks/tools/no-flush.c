// What durability costs: preloaded into archive-sync, every flush returns at once without
// flushing (fsync, fdatasync, syncfs), so that a sync's time can be compared with and
// without them. An experiment only: a sync run so is not durable. Benchmarks/README.md uses it:
//   cc -O2 -shared -fPIC -o /tmp/no-flush.so Benchmarks/tools/no-flush.c
//   LD_PRELOAD=/tmp/no-flush.so archive-sync sync A B
int fsync(int fd) { (void)fd; return 0; }
int fdatasync(int fd) { (void)fd; return 0; }
int syncfs(int fd) { (void)fd; return 0; }
