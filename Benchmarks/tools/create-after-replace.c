// What creating files costs right after a store's objects were replaced, by the directory the
// new files are made in: ext4 without a journal skips, for each new inode, every free inode of
// the group that was freed recently (`recently_deleted` in fs/ext4/ialloc.c: 60 s, 300 s while
// its inode-table block is dirty), so where the freed inodes are decides the price.
//   cc -O2 -o /tmp/create-after-replace Benchmarks/tools/create-after-replace.c -lpthread
//   /tmp/create-after-replace S setup              100,000 files made in S/staging and renamed into
//                                                  S/big, as a store's first sync makes its objects
//   /tmp/create-after-replace S replace OFFSET     every 100th file of S/big (from OFFSET) replaced
//                                                  through S/staging: 1,000 inodes freed
//   /tmp/create-after-replace S create DIR TAG     1,000 new files made in DIR (S/staging, S/big, ...)
//   /tmp/create-after-replace S rename SRC THREADS OFFSET
//                                                  1,000 files made in S/SRC (timed apart), then
//                                                  renamed over every 100th file of S/big on THREADS
// Files are 512 bytes, nothing is flushed. Use a directory on the file system to measure; remove
// S afterwards (the removal itself puts ext4 in that state for minutes).
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *store, *source;
static int threads, offset;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void make(const char *path) {
    char bytes[512];
    memset(bytes, 'x', sizeof bytes);
    int fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0644);
    if (fd < 0 || write(fd, bytes, sizeof bytes) != sizeof bytes || close(fd) != 0) { perror(path); exit(1); }
}

static void move(const char *from, const char *to) {
    if (rename(from, to) != 0) { perror(from); exit(1); }
}

static void *renames(void *lane) {
    char from[4096], to[4096];
    for (int j = (int)(long)lane; j < 1000; j += threads) {
        int i = j * 100 + offset;
        snprintf(from, sizeof from, "%s/%s/.rn%d", store, source, i);
        snprintf(to, sizeof to, "%s/big/item%d.json", store, i);
        move(from, to);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: see the comment at the top\n"); return 2; }
    store = argv[1];
    const char *command = argv[2];
    char a[4096], b[4096];
    if (!strcmp(command, "setup")) {
        mkdir(store, 0755);
        snprintf(a, sizeof a, "%s/staging", store);
        mkdir(a, 0755);
        snprintf(a, sizeof a, "%s/big", store);
        mkdir(a, 0755);
        for (int i = 0; i < 100000; i++) {
            snprintf(a, sizeof a, "%s/staging/t%d", store, i);
            snprintf(b, sizeof b, "%s/big/item%d.json", store, i);
            make(a);
            move(a, b);
        }
    } else if (!strcmp(command, "replace") && argc == 4) {
        int off = atoi(argv[3]);
        double start = now();
        for (int j = 0; j < 1000; j++) {
            int i = j * 100 + off;
            snprintf(a, sizeof a, "%s/staging/r%d", store, i);
            snprintf(b, sizeof b, "%s/big/item%d.json", store, i);
            make(a);
            move(a, b);
        }
        printf("1,000 replaced through staging: %.1f ms\n", (now() - start) * 1e3);
    } else if (!strcmp(command, "create") && argc == 5) {
        struct stat status;
        if (stat(argv[3], &status) != 0) { perror(argv[3]); return 1; }
        double start = now();
        for (int j = 0; j < 1000; j++) {
            snprintf(a, sizeof a, "%s/c%s.%d", argv[3], argv[4], j);
            make(a);
        }
        printf("1,000 creates in %s (inode %lu): %.1f ms\n", argv[3], (unsigned long)status.st_ino, (now() - start) * 1e3);
    } else if (!strcmp(command, "rename") && argc == 6) {
        source = argv[3];
        threads = atoi(argv[4]);
        offset = atoi(argv[5]);
        if (threads < 1 || threads > 16) { fprintf(stderr, "THREADS: 1 to 16\n"); return 2; }
        double start = now();
        for (int j = 0; j < 1000; j++) {
            snprintf(a, sizeof a, "%s/%s/.rn%d", store, source, j * 100 + offset);
            make(a);
        }
        double made = now();
        pthread_t lanes[16];
        for (long k = 0; k < threads; k++) pthread_create(&lanes[k], 0, renames, (void *)k);
        for (int k = 0; k < threads; k++) pthread_join(lanes[k], 0);
        printf("from %s on %d thread(s): creates %.1f ms, renames %.1f ms\n", source, threads, (made - start) * 1e3,
               (now() - made) * 1e3);
    } else {
        fprintf(stderr, "usage: see the comment at the top\n");
        return 2;
    }
    return 0;
}
