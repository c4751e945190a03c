// The shims are header-only (include/archive_shims.h), but for the ones that need a header
// Swift's Glibc module does not see with _GNU_SOURCE.
#define _GNU_SOURCE
#include <spawn.h>

int archive_spawn_addchdir(void *actions, const char *path) {
    return posix_spawn_file_actions_addchdir_np((posix_spawn_file_actions_t *)actions, path);
}

int archive_spawn_addclosefrom(void *actions, int lowest) {
    return posix_spawn_file_actions_addclosefrom_np((posix_spawn_file_actions_t *)actions, lowest);
}
