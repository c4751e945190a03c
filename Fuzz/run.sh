#!/usr/bin/env bash
# The fuzz targets (docs/fuzzing.md), for the Makefile:
#   Fuzz/run.sh build    build every target with libFuzzer and the address sanitizer (.build-fuzz)
#   Fuzz/run.sh replay   run each once over its corpus and its saved crashes; fail on any crash
#   Fuzz/run.sh fuzz     fuzz each for FUZZ_SECONDS (default 60); new crashes go to Fuzz/Crashes/TARGET/
#   Fuzz/run.sh seeds    rewrite the generated seeds of Fuzz/Corpus from a plain debug build
# FUZZ_TARGETS='fuzz-serve fuzz-json' limits any of them to those targets.
set -euo pipefail
cd "$(dirname "$0")/.."
SWIFT=${SWIFT:-swift}
TARGETS=${FUZZ_TARGETS:-fuzz-wire-request fuzz-wire-reply fuzz-serve fuzz-keyed-archive fuzz-plist-codec fuzz-json fuzz-manifest fuzz-file-name}
BUILD=(-c debug --scratch-path .build-fuzz -Xswiftc -sanitize=fuzzer,address -Xswiftc -DFUZZING)
BIN=.build-fuzz/debug
# Swift's runtime keeps metadata caches for the life of the process: not leaks.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
# A trap is libFuzzer's to report: Swift's backtracer would read the stack under the address
# sanitizer (which reports that as an error of its own) and can hold the output pipe open.
export SWIFT_BACKTRACE=enable=no

# A crash directory, when there is one: libFuzzer refuses a directory that does not exist.
inputs() {
    echo "Fuzz/Corpus/$1"
    if [ -d "Fuzz/Crashes/$1" ]; then echo "Fuzz/Crashes/$1"; fi
}

case "${1:-}" in
build)
    # One `swift build` builds only its last --product, hence one build per target. The linker
    # warns about each sanitizer symbol it cannot export; only errors are worth showing.
    for target in $TARGETS; do
        "$SWIFT" build "${BUILD[@]}" --product "$target" 2>&1 | grep -v "warning: Cannot export local symbol" || {
            echo "building $target failed" >&2
            exit 1
        }
    done
    ;;
replay)
    replayed=0
    for target in $TARGETS; do
        set +e
        # shellcheck disable=SC2046
        "$BIN/$target" -runs=0 $(inputs "$target") 2>&1 | grep -vE "^(INFO|MS:|base unit|0x)"
        status=${PIPESTATUS[0]}
        set -e
        if [ "$status" -ne 0 ]; then
            echo "$target crashed on an input of $(inputs "$target" | tr '\n' ' ')(exit $status)" >&2
            echo "fuzz-replay: $replayed passed, 1 failed"
            exit 1
        fi
        replayed=$((replayed + 1))
    done
    echo "fuzz-replay: $replayed passed, 0 failed"
    ;;
fuzz)
    failed=()
    for target in $TARGETS; do
        # New coverage goes to a working corpus outside the repository; the seeds stay as committed.
        mkdir -p ".build-fuzz/corpus/$target" "Fuzz/Crashes/$target"
        echo "== $target: ${FUZZ_SECONDS:-60} s"
        set +e
        # shellcheck disable=SC2046
        "$BIN/$target" -max_total_time="${FUZZ_SECONDS:-60}" -timeout=10 -print_final_stats=1 -print_funcs=0 \
            -artifact_prefix="Fuzz/Crashes/$target/" ".build-fuzz/corpus/$target" $(inputs "$target") 2>&1 |
            grep -vE '^(#[0-9]+\s+(NEW|REDUCE|pulse)|"|###### |INFO: )'
        status=${PIPESTATUS[0]}
        set -e
        if [ "$status" -ne 0 ]; then failed+=("$target"); fi
        rmdir "Fuzz/Crashes/$target" 2>/dev/null || true
    done
    if [ ${#failed[@]} -gt 0 ]; then
        echo "crashes found by: ${failed[*]} (inputs in Fuzz/Crashes/)" >&2
        exit 1
    fi
    ;;
seeds)
    for target in fuzz-wire-request fuzz-wire-reply fuzz-json fuzz-plist-codec; do
        "$SWIFT" build --product "$target" >/dev/null
        mkdir -p "Fuzz/Corpus/$target"
        "$("$SWIFT" build --show-bin-path)/$target" --write-seeds "Fuzz/Corpus/$target"
    done
    # A session for serve: the handshake, one request, the end.
    mkdir -p Fuzz/Corpus/fuzz-serve
    for seed in Fuzz/Corpus/fuzz-wire-request/seed-*; do
        cat Fuzz/Corpus/fuzz-wire-request/seed-0 "$seed" Fuzz/Corpus/fuzz-wire-request/seed-3 >"Fuzz/Corpus/fuzz-serve/session-${seed##*-}"
    done
    ;;
*)
    sed -n '2,7p' "$0" >&2
    exit 2
    ;;
esac
