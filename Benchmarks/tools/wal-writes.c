// What SQLite's way of writing a commit's WAL frames costs on this file system: each frame as
// two pwrite(2)s (its 24-byte header, then its 4 KiB page), against the same frames in one
// pwritev(2); then one fdatasync(2), as a save's commit does. Six frames per commit (a single
// save writes 4-7: Benchmarks/LOG.md). Prints wall and CPU time per commit.
//   cc -O2 -o /tmp/wal-writes Benchmarks/tools/wal-writes.c
//   /tmp/wal-writes /tmp/wal-writes-file 0 3000     (two pwrites per frame, SQLite's way)
//   /tmp/wal-writes /tmp/wal-writes-file 1 3000     (one pwritev per commit)
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

enum { FRAMES = 6, FRAME = 24 + 4096 };

static double seconds(clockid_t clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: wal-writes FILE MODE(0: pwrite per part, 1: pwritev) COMMITS\n"); return 2; }
    int vectored = atoi(argv[2]), commits = atoi(argv[3]);
    int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) { perror(argv[1]); return 1; }
    char header[24], page[4096];
    memset(header, 1, sizeof header);
    memset(page, 2, sizeof page);
    off_t offset = 0;
    double wall = seconds(CLOCK_MONOTONIC), cpu = seconds(CLOCK_PROCESS_CPUTIME_ID);
    for (int i = 0; i < commits; i++) {
        if (!vectored) {
            for (int f = 0; f < FRAMES; f++, offset += FRAME) {
                if (pwrite(fd, header, sizeof header, offset) < 0 || pwrite(fd, page, sizeof page, offset + 24) < 0) { perror("pwrite"); return 1; }
            }
        } else {
            struct iovec parts[2 * FRAMES];
            for (int f = 0; f < FRAMES; f++) {
                parts[2 * f] = (struct iovec){header, sizeof header};
                parts[2 * f + 1] = (struct iovec){page, sizeof page};
            }
            if (pwritev(fd, parts, 2 * FRAMES, offset) < 0) { perror("pwritev"); return 1; }
            offset += FRAMES * FRAME;
        }
        if (fdatasync(fd) != 0) { perror("fdatasync"); return 1; }
        if (offset > (off_t)FRAME * FRAMES * 1000) offset = 0;  // a WAL restarted after a checkpoint
    }
    printf("%s: %.1f us wall, %.1f us CPU per commit\n", vectored ? "one pwritev" : "two pwrites per frame",
           (seconds(CLOCK_MONOTONIC) - wall) / commits * 1e6, (seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu) / commits * 1e6);
    return 0;
}
