// What putting 1,000 new files over existing ones costs, by how: `rename` over each (the
// replaced inode is freed in the call) or `renameat2` with RENAME_EXCHANGE (the replaced file
// stays at the staged name, to be removed later), as a store's saves put their files in place.
//   cc -O2 -o /tmp/exchange-vs-rename Benchmarks/tools/exchange-vs-rename.c
//   /tmp/exchange-vs-rename S rename|exchange ROUNDS
// S (made if missing) gets 100,000 files of 512 bytes in S/big, made through S/staging; then
// each round stages 1,000 new files in S/staging and puts them over S/big's first 1,000,
// printing the time of each phase. Nothing is flushed. Use a directory on the file system to
// measure, a fresh S for each kind; remove S afterwards.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { FILES = 100000, CHANGED = 1000, SIZE = 512 };

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int open_dir(const char *root, const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", root, name);
    mkdir(path, 0755);
    int fd = open(path, O_DIRECTORY | O_RDONLY);
    if (fd < 0) { perror(path); exit(1); }
    return fd;
}

static void stage(int staging, const char *name, const char *bytes) {
    int fd = openat(staging, name, O_CREAT | O_WRONLY | O_EXCL, 0644);
    if (fd < 0 || write(fd, bytes, SIZE) != SIZE) { perror(name); exit(1); }
    close(fd);
}

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: %s S rename|exchange ROUNDS\n", argv[0]); return 2; }
    int exchange = strcmp(argv[2], "exchange") == 0;
    int rounds = atoi(argv[3]);
    mkdir(argv[1], 0755);
    int staging = open_dir(argv[1], "staging"), big = open_dir(argv[1], "big");
    char bytes[SIZE], temp[64], name[64];
    memset(bytes, 'x', sizeof bytes);
    for (int i = 0; i < FILES; i++) {
        snprintf(temp, sizeof temp, "setup.%d", i);
        snprintf(name, sizeof name, "f%d.json", i);
        stage(staging, temp, bytes);
        if (renameat(staging, temp, big, name) != 0) { perror("setup"); return 1; }
    }
    for (int round = 0; round < rounds; round++) {
        double start = now_ms();
        for (int i = 0; i < CHANGED; i++) {
            snprintf(temp, sizeof temp, "r%d.%d", round, i);
            stage(staging, temp, bytes);
        }
        double staged = now_ms();
        for (int i = 0; i < CHANGED; i++) {
            snprintf(temp, sizeof temp, "r%d.%d", round, i);
            snprintf(name, sizeof name, "f%d.json", i);
            int rc = exchange ? renameat2(staging, temp, big, name, RENAME_EXCHANGE) : renameat(staging, temp, big, name);
            if (rc != 0) { perror("place"); return 1; }
        }
        double placed = now_ms();
        // The replaced files, left staged by the exchanges, go outside the timed phases.
        if (exchange)
            for (int i = 0; i < CHANGED; i++) {
                snprintf(temp, sizeof temp, "r%d.%d", round, i);
                unlinkat(staging, temp, 0);
            }
        printf("round %d, %s: stage %.1f ms, put in place %.1f ms\n", round, argv[2], staged - start, placed - staged);
        usleep(200000);
    }
    return 0;
}
