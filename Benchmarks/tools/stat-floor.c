// The floor of a no-op sync with nothing watching: list and lstat every file of the given
// directories, one thread each, and nothing else (the least any tool that must look at every
// file can do). Benchmarks/README.md compares it with rsync and archive-sync:
//   cc -O2 -pthread -o /tmp/stat-floor Benchmarks/tools/stat-floor.c
//   /usr/bin/time -f "%e s wall, %U+%S s CPU" /tmp/stat-floor A/Item B/Item
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
struct linux_dirent64 { unsigned long long d_ino; long long d_off; unsigned short d_reclen; unsigned char d_type; char d_name[]; };
static void *walk(void *arg) {
    const char *path = arg;
    int fd = open(path, O_RDONLY | O_DIRECTORY);
    if (fd < 0) { perror(path); exit(1); }
    static __thread char buf[1 << 16];
    long n, count = 0;
    struct stat st;
    while ((n = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0) {
        for (long off = 0; off < n;) {
            struct linux_dirent64 *d = (void *)(buf + off);
            if (d->d_name[0] != '.') { if (fstatat(fd, d->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0) count++; }
            off += d->d_reclen;
        }
    }
    close(fd);
    return (void *)count;
}
int main(int argc, char **argv) {
    pthread_t t[8];
    for (int i = 1; i < argc; i++) pthread_create(&t[i], 0, walk, argv[i]);
    long total = 0; void *r;
    for (int i = 1; i < argc; i++) { pthread_join(t[i], &r); total += (long)r; }
    printf("%ld files\n", total);
    return 0;
}
