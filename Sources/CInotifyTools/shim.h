// libinotifytools (Debian: libinotifytools0-dev) ships no pkg-config file; this header is
// what the CInotifyTools module imports. Its header needs <sys/inotify.h> first.
#include <sys/inotify.h>
#include <inotifytools/inotifytools.h>

// The name that follows an event (empty for an event on the watched directory itself):
// Swift does not import a flexible array member.
static inline const char *cinotify_event_name(const struct inotify_event *event) {
    return event->len > 0 ? event->name : "";
}
