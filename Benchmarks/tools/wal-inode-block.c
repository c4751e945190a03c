// Whether a save's other system calls make its WAL `fdatasync` write the WAL's inode table
// block too (a second request, waited for), on ext4 without a journal. Each save stages a file
// in S/meta/staging (create, write, close), commits 16 KiB over a preallocated S/meta/wal with
// `fdatasync`, renames the file into S/Person; the letters in FLAGS add what the store did
// before this release:
//   s  `fstat` the staged file and `fstatat` S/Person (reads their times: on Linux 6.13+ their
//      next change takes a fine-grained time, and the WAL's next write then changes its mtime)
//   u  `futimens` S/meta/writer.lock after each commit (its inode shares the WAL's block)
//   p  make S/Person and S/meta/staging before the WAL, with 32 files between, so that they
//      do not share the WAL's block (a store whose collection came after its manifest's
//      neighbours); without p they are made right after it, as in a new store's first save
//   cc -O2 -o /tmp/wal-inode-block Benchmarks/tools/wal-inode-block.c
//   perf stat -e block:block_rq_issue /tmp/wal-inode-block S COUNT FLAGS
// prints microseconds per save; the block requests per save are perf's count over COUNT
// (about 1 with flags p, 2 when an inode shares the block or the WAL's mtime moves). Use a
// fresh S each time, on the file system to measure; remove it afterwards.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int directory(int parent, const char *name) {
    mkdirat(parent, name, 0755);
    int fd = openat(parent, name, O_RDONLY | O_DIRECTORY);
    if (fd < 0) { perror(name); exit(1); }
    return fd;
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: %s S COUNT [FLAGS]\n", argv[0]); return 2; }
    const char *flags = argc > 3 ? argv[3] : "";
    int count = atoi(argv[2]);
    int stats = strchr(flags, 's') != NULL, touches = strchr(flags, 'u') != NULL, apart = strchr(flags, 'p') != NULL;
    mkdir(argv[1], 0755);
    int root = open(argv[1], O_RDONLY | O_DIRECTORY);
    int meta = directory(root, "meta");
    int person = -1, staging = -1;
    if (apart) {
        person = directory(root, "Person");
        staging = directory(meta, "staging");
        int pad = directory(meta, "pad");
        for (int i = 0; i < 32; i++) {
            char name[16];
            snprintf(name, sizeof name, "%d", i);
            close(openat(pad, name, O_WRONLY | O_CREAT, 0644));
        }
    }
    int wal = openat(meta, "wal", O_RDWR | O_CREAT, 0644);
    int lock = openat(meta, "writer.lock", O_RDWR | O_CREAT, 0644);
    if (!apart) {
        staging = directory(meta, "staging");
        person = directory(root, "Person");
    }
    static char page[65536];
    memset(page, 7, sizeof page);
    // A WAL that has grown once: commits overwrite it, and change neither its size nor its extents.
    for (int i = 0; i < 512; i++) pwrite(wal, page, sizeof page, (off_t)i * sizeof page);
    fsync(wal);
    syncfs(root);
    struct stat info;
    off_t offset = 32;
    double start = now_us();
    for (int i = 0; i < count; i++) {
        char temp[32], name[32];
        snprintf(temp, sizeof temp, "tmp.%d", i);
        snprintf(name, sizeof name, "p%d.json", i);
        int fd = openat(staging, temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        write(fd, page, 190);
        if (stats) fstat(fd, &info);
        close(fd);
        if (stats) fstatat(root, "Person", &info, AT_SYMLINK_NOFOLLOW);
        flock(lock, LOCK_EX);
        pwrite(wal, page, 16480, offset);
        offset = offset + 16480 > 30 << 20 ? 32 : offset + 16480;
        fdatasync(wal);
        renameat(staging, temp, person, name);
        if (touches) futimens(lock, NULL);
        flock(lock, LOCK_UN);
    }
    printf("%s: %.1f us a save\n", flags, (now_us() - start) / count);
    return 0;
}
