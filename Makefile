# cordon: build, bundles, tests, demo. Needs root for containers.
CARGO ?= cargo
PREFIX ?= /usr/local
CORDON := target/debug/cordon
PROBES := target/probes

.PHONY: all build release bundles probes images image-layouts test test-unit test-ptrace test-supervisor-level test-integration demo install fmt lint clean-bundles fuzz fuzz-smoke

all: build

build:
	$(CARGO) build --workspace --all-targets

release:
	$(CARGO) build --release -p cordon -p containerd-shim-cordon-v2

probes:
	bash tests/probes/build.sh $(PROBES)

# Real OCI bundles, built (not committed): busybox, and Debian with python3.
bundles: build probes
	PROBES_DIR=$(PROBES) bash bundles/busybox.sh bundles/busybox $(CORDON)
	PROBES_DIR=$(PROBES) bash bundles/python.sh bundles/python $(CORDON)

# OCI image layouts of the bundles (target/images/cordon-{busybox,python}.tar),
# imported into containerd (namespaces default and k8s.io, at
# $$CONTAINERD_ADDRESS) and Docker when they answer. No registry involved.
images: bundles
	bash tools/images.sh --import target/images

# The same layouts without importing them (the engines suite imports them
# into its own containerd).
image-layouts: bundles
	bash tools/images.sh target/images

test-unit:
	$(CARGO) test -p cordon

test-integration: bundles image-layouts
	$(CARGO) test -p cordon-tests -- --test-threads=2

# The policy matrix again, every container on the ptrace platform.
test-ptrace: bundles
	CORDON_TEST_PLATFORM=ptrace $(CARGO) test -p cordon-tests --test supervisor --test security --test lifecycle --test deputy -- --test-threads=2

# The path-rule suites again with every path rule in the supervisor
# (org.cordon.enforcement = "supervisor"), on both platforms.
test-supervisor-level: bundles
	CORDON_TEST_ENFORCEMENT=supervisor $(CARGO) test -p cordon-tests --test supervisor --test security --test deputy -- --test-threads=2
	CORDON_TEST_ENFORCEMENT=supervisor CORDON_TEST_PLATFORM=ptrace $(CARGO) test -p cordon-tests --test supervisor --test security --test deputy -- --test-threads=2

test: build lint test-unit test-integration test-ptrace test-supervisor-level

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

# The main job: a real container under the supervisor, and what it intercepted.
demo: bundles
	bash demo/run.sh

install: release
	install -D -m 0755 target/release/cordon $(DESTDIR)$(PREFIX)/bin/cordon
	install -D -m 0755 target/release/containerd-shim-cordon-v2 $(DESTDIR)$(PREFIX)/bin/containerd-shim-cordon-v2

fmt:
	$(CARGO) fmt --all

clean-bundles:
	rm -rf bundles/busybox bundles/python

# Benchmarks (bench/): cordon side by side with runc and crun, and the cost of
# interception. Root, `make bundles` first. Writes $(BENCH_OUT)/report.md,
# results.json and *.png. bench-smoke runs every section with few iterations.
BENCH_OUT ?= target/bench
.PHONY: bench bench-smoke

bench:
	$(CARGO) build --release -p cordon -p cordon-bench
	target/release/cordon-bench --cordon target/release/cordon --out $(BENCH_OUT)

bench-smoke:
	$(CARGO) build --release -p cordon -p cordon-bench
	target/release/cordon-bench --smoke --cordon target/release/cordon --out $(BENCH_OUT)

# Fuzzing (fuzz/, cargo-fuzz): config.json validation, policy files, the
# supervisor's decoders of container memory. fuzz-smoke runs every target
# briefly (CI); fuzz runs each for FUZZ_SECONDS. See fuzz/README.md.
FUZZ_SECONDS ?= 300

fuzz:
	FUZZ_SECONDS=$(FUZZ_SECONDS) bash tools/fuzz.sh

fuzz-smoke:
	bash tools/fuzz.sh --smoke

# Soak (tests/soak), long form: 1,000 sequential run/delete cycles, 200
# concurrent, 1,000 execs into one container, each checked for leftovers.
# `make test` runs the short form. Root; builds the bundles first.
.PHONY: soak

soak: bundles
	CORDON_SOAK=full $(CARGO) test -p cordon-tests --test soak -- --test-threads=2
