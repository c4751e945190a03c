#!/usr/bin/env bash
# The demo that `make demo` runs: a store made by the library, inspected and changed with the
# command, edited behind its back, scanned, verified, repaired from history, watched, and its
# lost manifest rebuilt with `repair`.
#
#   Samples/demo.sh BIN_DIR [STORE]     (BIN_DIR holds archive-sync and quickstart)
set -euo pipefail
bin=${1:?usage: demo.sh BIN_DIR [STORE]}
store=${2:-./demo-store}
archive_sync() { "$bin/archive-sync" "$@"; }
step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }

rm -rf "$store"
step "archive-sync init $store"
archive_sync init "$store"

step "quickstart $store        # Samples/Quickstart/main.swift: the library API"
"$bin/quickstart" "$store"

step "find $store -type f -not -path '*/.archive-sync/*' | sort"
find "$store" -type f -not -path '*/.archive-sync/*' | sort

step "cat $store/Person/person1.json"
cat "$store/Person/person1.json"; echo

step "archive-sync ls $store"
archive_sync ls "$store"
step "archive-sync ls $store Person"
archive_sync ls "$store" Person

step "echo '{\"id\":\"person9\",...}' | archive-sync put $store Person/person9"
echo '{"id":"person9","name":"Grace","role":"member","address":{"street":"1 Navy Yard","city":"Arlington"},"tags":[],"links":{},"joined":0,"token":"0B7C6A4C-1F3E-4C8E-9E7A-2D0A8A0F9B11"}' |
    archive_sync put "$store" Person/person9

step "echo 'not json' | archive-sync put $store Person/person9     # refused, nothing lost"
echo 'not json' | archive_sync put "$store" Person/person9 || echo "(exit $?)"

step "archive-sync history $store Person/person1"
archive_sync history "$store" Person/person1
step "archive-sync get $store Person/person1 --version 2"
archive_sync get "$store" Person/person1 --version 2; echo
step "archive-sync restore $store Person/person1 --version 2"
archive_sync restore "$store" Person/person1 --version 2

step "# another program edits, adds and deletes files behind the store's back"
sed -i 's/Member 2/Member Two/' "$store/Person/person2.json"
cp "$store/Person/person3.json" "$store/Person/person8.json"
rm "$store/Person/person4.json"
step "archive-sync verify $store       # exit 1: the manifest has not seen them yet"
archive_sync verify "$store" || echo "(exit $?)"
step "archive-sync scan $store"
archive_sync scan "$store"

step "# bit rot: a byte flips, size and mtime stay the same"
file="$store/Person/person3.json"
cp -p "$file" "$store/.archive-sync/reference"
printf 'X' | dd of="$file" bs=1 seek=10 conv=notrunc status=none
touch -r "$store/.archive-sync/reference" "$file"
rm "$store/.archive-sync/reference"
step "archive-sync verify $store"
archive_sync verify "$store" || echo "(exit $?)"
step "archive-sync restore $store Person/person3 --version 1     # repair from history"
archive_sync restore "$store" Person/person3 --version 1
step "archive-sync verify $store"
archive_sync verify "$store"

step "archive-sync watch $store > watch.out 2> watch.log &      # a watcher in the background"
"$bin/archive-sync" watch "$store" > "$store.watch.out" 2> "$store.watch.log" &
watcher=$!
trap 'kill $watcher 2>/dev/null || true' EXIT
wait_for() {  # wait_for FILE TEXT: up to 10 s for TEXT to appear in FILE
    for _ in $(seq 100); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
    echo "timed out waiting for '$2' in $1" >&2; cat "$1" >&2; return 1
}
wait_for "$store.watch.log" "caught up"
cat "$store.watch.log"
step "sed -i 's/Member Two/Member 2/' $store/Person/person2.json     # another program edits a file"
sed -i 's/Member Two/Member 2/' "$store/Person/person2.json"
wait_for "$store.watch.out" "Person/person2"
step "cat watch.out      # what the watcher printed, within milliseconds"
cat "$store.watch.out"
step "archive-sync history $store Person/person2      # and recorded"
archive_sync history "$store" Person/person2

step "archive-sync status $store"
archive_sync status "$store"
step "kill -TERM \$watcher      # stops cleanly, exit 0"
kill -TERM "$watcher"
wait "$watcher" && echo "(watcher exited $?)"
trap - EXIT
cat "$store.watch.log" | tail -1
rm -f "$store.watch.out" "$store.watch.log"

step "rm $store/.archive-sync/manifest.sqlite*      # the manifest lost"
rm "$store"/.archive-sync/manifest.sqlite*
step "archive-sync ls $store      # refused, never silently replaced (exit 2)"
archive_sync ls "$store" || echo "(exit $?)"
step "archive-sync repair $store      # rebuilt from the object files, same replica id"
archive_sync repair "$store"
step "archive-sync verify $store"
archive_sync verify "$store"
printf '\nThe store is in %s; try `%s/archive-sync --help`.\n' "$store" "$bin"
