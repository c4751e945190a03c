#!/usr/bin/env bash
# Two stores, edits on both sides, a conflict and a field merge: diff, sync, conflicts, and a sync that says 0.
#
#   Samples/two-dir-merge.sh BIN_DIR [DIR]     (BIN_DIR holds archive-sync; DIR gets laptop/ and server/)
set -euo pipefail
bin=${1:?usage: two-dir-merge.sh BIN_DIR [DIR]}
dir=${2:-./demo-merge}
archive_sync() { "$bin/archive-sync" "$@"; }
step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }
a="$dir/laptop"
b="$dir/server"

rm -rf "$dir"
mkdir -p "$dir"
step "archive-sync init $a; archive-sync init $b"
archive_sync init "$a"
archive_sync init "$b"

step "three people on the laptop, one on the server"
for n in 1 2 3; do
    echo "{\"id\":\"person$n\",\"name\":\"Person $n\"}" | archive_sync put "$a" "Person/person$n"
done
echo '{"id":"car1","model":"Zoe"}' | archive_sync put "$b" Car/car1

step "archive-sync sync $a $b      # first sync: everything, both ways"
archive_sync sync "$a" "$b"

step "edits on both sides: person1 on both (a conflict), person2 on the laptop, person3 deleted on the server"
echo '{"id":"person1","name":"Person One (laptop)"}' | archive_sync put "$a" Person/person1
sleep 1  # the server's edit is the newer one
echo '{"id":"person1","name":"Person One (server)"}' | archive_sync put "$b" Person/person1
sed -i 's/Person 2/Person Two/' "$a/Person/person2.json"      # another program edits a file
archive_sync rm "$b" Person/person3

step "archive-sync diff $a $b      # the plan, changing nothing"
archive_sync diff "$a" "$b"

step "archive-sync sync $a $b"
archive_sync sync "$a" "$b"

step "archive-sync conflicts $b"
archive_sync conflicts "$b"
copy=$(archive_sync conflicts "$b" --json | sed -n 's/.*"id" : "\(Person\/person1\.conflict-[^"]*\)".*/\1/p')
step "archive-sync get $b Person/person1; archive-sync get $b $copy"
archive_sync get "$b" Person/person1; echo
archive_sync get "$b" "$copy"; echo

step "ls $a/Person $b/Person      # the same files on both sides"
ls "$a/Person" "$b/Person"

step "archive-sync rm $a $copy; archive-sync sync $a $b      # resolved: keep the server's, drop the copy"
archive_sync rm "$a" "$copy"
archive_sync sync "$a" "$b"

step "car1 edited on both sides in different fields: merged field by field, no copy"
echo '{"color":"blue","id":"car1","model":"Zoe"}' | archive_sync put "$a" Car/car1
echo '{"id":"car1","model":"Zoe E-Tech"}' | archive_sync put "$b" Car/car1
step "archive-sync sync $a $b; archive-sync get $b Car/car1"
archive_sync sync "$a" "$b"
archive_sync get "$b" Car/car1; echo

step "archive-sync sync $a $b --json      # a sync after a sync does nothing"
archive_sync sync "$a" "$b" --json
