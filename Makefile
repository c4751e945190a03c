# archive-sync: the two commands the README opens with, and the benchmarks.
#   make demo    build, then run the demo (Samples/demo.sh) on a fresh store
#   make test    build and run every test
#   make bench   run the benchmarks (Benchmarks/README.md)
# Each installs the Debian packages it needs, and only when they are missing.

SWIFT ?= swift
APT_PACKAGES = libsqlite3-dev libinotifytools0-dev
BENCH_PACKAGES = rsync

.PHONY: deps demo test bench build format

deps:
	@bash .ci/apt-install $(APT_PACKAGES)

build: deps
	$(SWIFT) build -c release --product archive-sync
	$(SWIFT) build -c release --product quickstart

demo: build
	bash Samples/demo.sh "$$($(SWIFT) build -c release --show-bin-path)"

test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build

# One `swift build` builds only the last --product it is given, hence two builds.
# BENCH_ARGS: e.g. --quick, --only 3. BENCH_BUILD: e.g. --scratch-path .build-bench.
bench: deps
	@bash .ci/apt-install $(APT_PACKAGES) $(BENCH_PACKAGES)
	$(SWIFT) build -c release $(BENCH_BUILD) --product archive-sync
	$(SWIFT) build -c release $(BENCH_BUILD) --product archive-bench
	"$$($(SWIFT) build -c release $(BENCH_BUILD) --show-bin-path)/archive-bench" $(BENCH_ARGS)

format:
	$(SWIFT) format --in-place --recursive Package.swift Sources Tests Samples Benchmarks
