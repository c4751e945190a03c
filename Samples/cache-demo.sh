#!/usr/bin/env bash
# The model cache's part of `make demo` (after Samples/demo.sh): a program that persists and
# caches models while a second process edits one of their archive files, and picks the edit up.
#
#   Samples/cache-demo.sh BIN_DIR [STORE]     (BIN_DIR holds archive-sync and model-cache)
set -euo pipefail
bin=${1:?usage: cache-demo.sh BIN_DIR [STORE]}
store=${2:-./demo-cache-store}
step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }

rm -rf "$store"
step "model-cache $store        # Samples/ModelCache/main.swift: ModelCache, a watcher, and a second process editing a file"
"$bin/model-cache" "$store"

step "cat $store/Contact/ada.json        # the edit the cache picked up"
cat "$store/Contact/ada.json"; echo

step "archive-sync history $store Contact/ada        # the watcher recorded it as version 2"
"$bin/archive-sync" history "$store" Contact/ada

step "archive-sync ls $store Contact        # the expired Contact/tmp is gone"
"$bin/archive-sync" ls "$store" Contact
rm -rf "$store"
