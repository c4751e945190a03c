// Does a flush's wait grow with the pages written before it? A store's commit writes 4 to 7
// WAL frames (wal-frames.py) and then one fdatasync; archive-bench's floor appends one 4 KiB
// page. This times N pages then fdatasync, for N = 1, 4 and 7, two ways: appended to a file
// that grows (the floor's way: each flush also writes the inode's new size), and written over
// a file's existing pages (SQLite's way once its WAL has been checkpointed and restarted: the
// file's size does not change). Rounds rotate the order; the median of the rounds is printed.
//   cc -O2 -o /tmp/fdatasync-pages Benchmarks/tools/fdatasync-pages.c
//   /tmp/fdatasync-pages /tmp 1000 5      # directory, flushes per case and round, rounds
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/// Microseconds per flush of `count` flushes of `pages` pages each, appended or overwritten.
static double run(const char *dir, int pages, int overwrite, int count) {
    static char page[4096 * 7];
    memset(page, 'x', sizeof page);
    char path[4096];
    snprintf(path, sizeof path, "%s/fdatasync-pages.%d", dir, getpid());
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) { perror(path); exit(1); }
    size_t size = 4096 * (size_t)pages;
    if (overwrite) {
        for (int i = 0; i < count; i++)
            if (write(fd, page, size) != (ssize_t)size) { perror("write"); exit(1); }
        fsync(fd);
    }
    double start = now();
    for (int i = 0; i < count; i++) {
        ssize_t n = overwrite ? pwrite(fd, page, size, (off_t)i * size) : write(fd, page, size);
        if (n != (ssize_t)size || fdatasync(fd) != 0) { perror("write or fdatasync"); exit(1); }
    }
    double elapsed = now() - start;
    close(fd);
    unlink(path);
    return elapsed / count * 1e6;
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    int count = argc > 2 ? atoi(argv[2]) : 1000;
    int rounds = argc > 3 ? atoi(argv[3]) : 5;
    if (count < 1 || rounds < 1 || rounds > 99) { fprintf(stderr, "usage: fdatasync-pages [DIR [FLUSHES [ROUNDS]]]\n"); return 2; }
    const int pages[] = {1, 4, 7};
    double results[6][99];
    for (int round = 0; round < rounds; round++)
        for (int step = 0; step < 6; step++) {
            int which = (round + step) % 6;
            results[which][round] = run(dir, pages[which % 3], which / 3, count);
        }
    for (int which = 0; which < 6; which++) {
        qsort(results[which], rounds, sizeof(double), compare);
        printf("%s %d page%s + fdatasync: %.0f us (median of %d rounds of %d)\n", which / 3 ? "overwrite" : "append   ",
               pages[which % 3], pages[which % 3] > 1 ? "s" : " ", results[which][rounds / 2], rounds, count);
    }
    return 0;
}
