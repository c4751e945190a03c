# archive-sync: the two commands the README opens with, and the benchmarks.
#   make demo    build, then run the demos on fresh stores: Samples/demo.sh, Samples/cache-demo.sh, Samples/two-dir-merge.sh
#   make test    build and run every test, then replay each fuzz target's corpus and saved crashes
#   make fuzz    fuzz each decoder of outside bytes for FUZZ_SECONDS (default 60) each (docs/fuzzing.md)
#   make test-tsan  the library's tests under the thread sanitizer (slow; not part of `make test`)
#   make test-power-cut  a longer run of the power-cut simulator (docs/power-cut.md)
#   make bench   build the benchmarks' package (Benchmarks/) and run them all (Benchmarks/README.md)
# Each installs the Debian packages it needs, and only when they are missing.

SWIFT ?= swift
APT_PACKAGES = libsqlite3-dev libinotifytools0-dev openssh-server openssh-client python3 iproute2
BENCH_PACKAGES = rsync unison awscli $(S3_TEST_PACKAGES)
# The S3 tests' throw-away Ceph cluster and RADOS Gateway (Tests/TestSupport/CephGateway.swift):
# about 73 MB to download, 20 s to install; .ci/apt-install passes --no-install-recommends.
S3_TEST_PACKAGES = radosgw ceph-mon ceph-osd ceph-common

.PHONY: deps demo test test-power-cut test-tsan bench build format fuzz fuzz-build fuzz-replay fuzz-seeds

# Release builds link the Swift runtime and Foundation into each binary, as Swift server tools
# ship: `archive-sync` then runs on a host without Swift (the far side of a sync over ssh), and
# each process maps 5-6 MB less (Benchmarks/README.md). Every release build here uses the same
# flags, so one `.build/release` serves them all, and one `Benchmarks/.build/release` the
# benchmarks. (Linking prints glibc's warning about `mktemp` in Foundation's static library;
# it is not this project's code.)
RELEASE = -c release --static-swift-stdlib

deps:
	@bash .ci/apt-install $(APT_PACKAGES)

build: deps
	$(SWIFT) build $(RELEASE) --product archive-sync
	$(SWIFT) build $(RELEASE) --product quickstart
	$(SWIFT) build $(RELEASE) --product model-cache

demo: build
	bash Samples/demo.sh "$$($(SWIFT) build $(RELEASE) --show-bin-path)"
	bash Samples/cache-demo.sh "$$($(SWIFT) build $(RELEASE) --show-bin-path)"
	bash Samples/two-dir-merge.sh "$$($(SWIFT) build $(RELEASE) --show-bin-path)"

test: deps
	@bash .ci/apt-install $(S3_TEST_PACKAGES)
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build
	$(MAKE) fuzz-replay

# The power-cut simulator (docs/power-cut.md) over more states than `make test` checks: it ends
# with one line, `power-cut: N states checked, M broke an invariant`, what broke printed above it.
# POWER_CUT_ARGS: e.g. --seed 7, --workloads saves,writer, --keep-failures /tmp/broken.
# Write faults (ENOSPC, EIO): 1,000 drawn from the 6,852 calls and kinds of every command;
# POWER_CUT_FAULTS=-1 for every one (hours).
POWER_CUT_STATES ?= 3000
POWER_CUT_FAULTS ?= 1000
test-power-cut: deps
	$(SWIFT) build --product archive-sync
	$(SWIFT) build --product crash-writer
	python3 Tests/PowerCut/powercut.py --bin "$$($(SWIFT) build --show-bin-path)" --states $(POWER_CUT_STATES) --faults $(POWER_CUT_FAULTS) $(POWER_CUT_ARGS)

# The libFuzzer targets under Fuzz/, built with the address sanitizer in .build-fuzz: a build of
# their own, which adds about 1.5 minutes to a first `make test` on two idle cores (7 when four
# other builds share them); replaying the corpus takes seconds. Fuzz/run.sh says more;
# FUZZ_TARGETS='fuzz-serve fuzz-json' limits any of these to those targets.
fuzz-build: deps
	SWIFT=$(SWIFT) bash Fuzz/run.sh build

# Each target once over its committed corpus and its saved crashes (Fuzz/Crashes/TARGET/).
fuzz-replay: fuzz-build
	bash Fuzz/run.sh replay

# FUZZ_SECONDS=N fuzzes each target N seconds; a crash is saved in Fuzz/Crashes/TARGET/.
fuzz: fuzz-build
	bash Fuzz/run.sh fuzz

# Rewrites the generated seeds of Fuzz/Corpus (frames, replies, encoded models).
fuzz-seeds:
	SWIFT=$(SWIFT) bash Fuzz/run.sh seeds

# The thread sanitizer, in its own build directory (a full build of its own: slow on two cores).
# Every lock the tests reach is a TracedMutex (Sources/ArchiveLocking/TracedMutex.swift says why
# a plain Mutex is not), so no suppressions are needed. Every test runs (about 3 minutes on two
# cores); TSAN_FILTER='ArchiveCacheTests|ArchiveStoreTests', e.g., runs only those suites.
test-tsan: deps
	@bash .ci/apt-install $(S3_TEST_PACKAGES)
	$(SWIFT) build --build-tests --sanitize=thread --scratch-path .build-tsan
	$(SWIFT) test --skip-build --sanitize=thread --scratch-path .build-tsan $(if $(TSAN_FILTER),--filter '$(TSAN_FILTER)')

# The benchmarks are a package of their own (Benchmarks/Package.swift, the project by path). It
# builds the project's `archive-sync` beside them (one `swift build` builds only the last
# --product it is given): watch-bench, sync-bench, remote-bench and archive-bench's workload 5
# run the one next to them. keyed-bench links the Swift runtime dynamically, so it is built in
# a folder of its own (Benchmarks/Package.swift says why). They run in turn.
# BENCH_ARGS: e.g. --quick, --only 3. BENCH_BUILD: e.g. --scratch-path Benchmarks/.build-bench.
# KEYED_BENCH_BUILD: keyed-bench's build folder.
KEYED_BENCH_BUILD ?= --scratch-path Benchmarks/.build-keyed
# WATCH_BENCH_ARGS (the watcher): e.g. --only 2; by default --quick when BENCH_ARGS has it.
WATCH_BENCH_ARGS ?= $(filter --quick,$(BENCH_ARGS))
# KEYED_BENCH_ARGS (the NSKeyedArchiver reader against NSKeyedUnarchiver): e.g. --quick.
KEYED_BENCH_ARGS ?= $(filter --quick,$(BENCH_ARGS))
# SYNC_BENCH_ARGS (two-directory sync against rsync and unison): e.g. --only 3.
SYNC_BENCH_ARGS ?= $(filter --quick,$(BENCH_ARGS))
# CACHE_BENCH_ARGS: e.g. --only 1, --rounds 15; by default --quick when BENCH_ARGS has it.
CACHE_BENCH_ARGS ?= $(filter --quick,$(BENCH_ARGS))
# REMOTE_BENCH_ARGS (sync over ssh to an sshd of its own on 127.0.0.1, against rsync -e ssh):
# e.g. --runs 2.
REMOTE_BENCH_ARGS ?= $(filter --quick,$(BENCH_ARGS))
# LIVE_BENCH_ARGS (live sessions over ssh to an sshd of its own on 127.0.0.1): e.g. --only 1.
LIVE_BENCH_ARGS ?= $(filter --quick,$(BENCH_ARGS))
# BUCKET_BENCH_ARGS (the bucket replica against awscli on a Ceph gateway of its own): --runs 5.
BUCKET_BENCH_ARGS ?= $(filter --quick,$(BENCH_ARGS))
BENCH_SWIFT_BUILD = $(SWIFT) build $(RELEASE) --package-path Benchmarks $(BENCH_BUILD)
BENCH_BIN = $$($(BENCH_SWIFT_BUILD) --show-bin-path)
KEYED_SWIFT_BUILD = $(SWIFT) build -c release --package-path Benchmarks $(KEYED_BENCH_BUILD)
bench: deps
	@bash .ci/apt-install $(APT_PACKAGES) $(BENCH_PACKAGES)
	for product in archive-sync archive-bench watch-bench sync-bench cache-bench remote-bench live-bench bucket-bench; do \
		$(BENCH_SWIFT_BUILD) --product $$product || exit 1; \
	done
	$(KEYED_SWIFT_BUILD) --product keyed-bench
	"$(BENCH_BIN)/archive-bench" $(BENCH_ARGS)
	"$(BENCH_BIN)/watch-bench" $(WATCH_BENCH_ARGS)
	"$$($(KEYED_SWIFT_BUILD) --show-bin-path)/keyed-bench" $(KEYED_BENCH_ARGS)
	"$(BENCH_BIN)/sync-bench" $(SYNC_BENCH_ARGS)
	"$(BENCH_BIN)/cache-bench" $(CACHE_BENCH_ARGS)
	"$(BENCH_BIN)/remote-bench" $(REMOTE_BENCH_ARGS)
	"$(BENCH_BIN)/live-bench" $(LIVE_BENCH_ARGS)
	"$(BENCH_BIN)/bucket-bench" $(BUCKET_BENCH_ARGS)

format:
	$(SWIFT) format --in-place --recursive Package.swift Sources Tests Samples Benchmarks/Package.swift $(wildcard Benchmarks/*/*.swift)
