# Thin wrapper around CMake: the README's two commands are `make run` and `make test`;
# `make install` installs into $(DESTDIR)$(PREFIX) (see README.md, Installing).
BUILD ?= build
ASAN_BUILD ?= build-asan
JOBS ?= 2
CONFIG ?= config/arbor.conf
PREFIX ?= /usr/local
DESTDIR ?=

FUZZ_SECONDS ?= 600

.PHONY: all deps build run test unit integration sanitize bench bench-tree bench-interest \
	bench-persist bench-bridge bench-partition bench-connections bench-overload bench-tls chaos \
	partition-soak crash fuzz \
	install mosquitto-tests test-tsan test-loops clean

all: build

deps:
	@scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

run: build
	./$(BUILD)/arbor -c $(CONFIG)

# The whole suite: unit tests and integration tests on the normal build, then both again
# on an AddressSanitizer + UndefinedBehaviorSanitizer build. The integration tests run in
# TEST_WORKERS pytest-xdist workers (default 2; TEST_WORKERS=0 runs them one by one); see
# docs/testing.md.
test: deps
	@scripts/run-tests.sh

# Builds the binary if needed (in an existing build tree, whatever its build type), then
# installs: sbin/arbor, bin/arbor_stp, bin/arbor_passwd, share/man/man{1,5,8}, etc/arbor/arbor.conf (/etc for PREFIX=/usr; an
# existing config is kept), lib/systemd/system/arbor.service, lib/sysusers.d/arbor.conf,
# etc/logrotate.d/arbor and the Wireshark dissector (lib/<multiarch>/wireshark/plugins for
# PREFIX=/usr, else lib/wireshark/plugins).
install:
	@test -f $(BUILD)/CMakeCache.txt || $(MAKE) --no-print-directory build
	@cmake --build $(BUILD) -j $(JOBS) --target arbor arbor_stp_cli
	@DESTDIR="$(DESTDIR)" cmake --install $(BUILD) --prefix "$(PREFIX)"

bench: build
	@scripts/run-bench.sh

# Every libFuzzer target (test/fuzz/README.md) for FUZZ_SECONDS each (default 600), built with
# clang in build-fuzz; the corpus grows in build-fuzz/corpus/<target>, findings land in
# build-fuzz/artifacts/. make test runs each for a few seconds.
fuzz: deps
	@FUZZ_SECONDS=$(FUZZ_SECONDS) JOBS=$(JOBS) scripts/run-fuzz.sh

# The MQTT-ST chaos test for two minutes (make test runs it for 20 s): brokers killed and
# links cut at random under QoS 1/2 load; ARBOR_CHAOS_SEED=N repeats a sequence of events.
chaos: build
	@scripts/setup-venv.sh
	@ARBOR_CHAOS_SECONDS=$${ARBOR_CHAOS_SECONDS:-120} ARBOR_BIN=$(CURDIR)/$(BUILD)/arbor \
		ARBOR_BUILD_DIR=$(CURDIR)/$(BUILD) .venv/bin/python -m pytest -q -p no:cacheprovider \
		--timeout=900 test/integration/test_peer_chaos.py

# Store and forward between brokers across long partitions (make test runs 120 s): the
# partition tests (reset, black hole, and the cut-off broker killed -9 halfway with durable
# persistence) with the middle link cut for 5 minutes, then for 30 minutes, the three side by
# side (about 75 minutes in all; ARBOR_PARTITION_LIST="300" for the short one only);
# -rP prints each test's figures (messages, time until everything arrived after the heal).
partition-soak: build
	@scripts/setup-venv.sh
	@for seconds in $${ARBOR_PARTITION_LIST:-300 1800}; do \
		echo "partition of $$seconds s"; \
		ARBOR_PARTITION_SECONDS=$$seconds ARBOR_BIN=$(CURDIR)/$(BUILD)/arbor \
		ARBOR_BUILD_DIR=$(CURDIR)/$(BUILD) .venv/bin/python -m pytest -q -rP -p no:cacheprovider \
		-n 3 --dist load --timeout=$$((seconds * 3 + 600)) \
		test/integration/test_peer_partition.py test/integration/test_peer_partition_crash.py \
		-k "heals or killed" || exit 1; \
	done

# arbor with persistence (snapshot, durable) against mosquitto with persistence, about 5
# minutes (not part of `make test`): replaces the Persistence section of docs/benchmarks.md.
bench-persist: deps
	@BUILD="$(BUILD)" JOBS="$(JOBS)" scripts/run-bench-persist.sh

# The durable-persistence crash test with 20 kills (make test runs it with 3): QoS 1/2
# publishers and persistent subscribers while the broker is killed with -9 at random moments;
# ARBOR_CRASH_SEED=N picks other moments.
crash: build
	@scripts/setup-venv.sh
	@ARBOR_CRASH_KILLS=$${ARBOR_CRASH_KILLS:-20} ARBOR_BIN=$(CURDIR)/$(BUILD)/arbor \
		ARBOR_BUILD_DIR=$(CURDIR)/$(BUILD) .venv/bin/python -m pytest -q -p no:cacheprovider \
		--timeout=900 test/integration/test_persistence_crash.py

# arbor MQTT-ST trees against Mosquitto bridged into the same trees (about 10 minutes; not
# part of `make test`): appends or replaces a section of docs/benchmarks.md.
bench-tree: deps
	@BUILD="$(BUILD)" JOBS="$(JOBS)" scripts/run-bench-tree.sh

# Interest routing (issue 20): three arbor brokers fully meshed with full replication and by
# interest, and three Debian mosquitto brokers in a static tree with per-topic bridge lines,
# under the MQTT-ST paper's local scenario and a Detti-style random attach; then the cost of
# 10,000 subscriptions' announcements (about 15 minutes; not part of `make test`): appends or
# replaces a section of docs/benchmarks.md. BENCH_INTEREST_QUICK=1 is a smoke test.
bench-interest: deps
	@BUILD="$(BUILD)" JOBS="$(JOBS)" scripts/run-bench-interest.sh

# An edge broker (arbor, and Debian's mosquitto side by side) bridged to a central Debian
# mosquitto: QoS 1 in and out, and the drain of a 100 000-message backlog (about 6 minutes; not
# part of `make test`): appends or replaces a section of docs/benchmarks.md.
# BENCH_BRIDGE_QUICK=1 is a half-minute smoke test of the pipeline.
bench-bridge: deps
	@BUILD="$(BUILD)" JOBS="$(JOBS)" scripts/run-bench-bridge.sh

# Two brokers whose link is cut for BENCH_PARTITION_SECONDS (default 300) under 1000 QoS 1 msg/s
# and healed, arbor peers (MQTT-ST resync) and Debian's mosquitto bridged with cleansession
# false side by side: how the backlog drains, live latency meanwhile, memory and disk per
# million messages (about 12 minutes; not part of `make test`): appends or replaces a section
# of docs/benchmarks.md. BENCH_PARTITION_QUICK=1 is a half-minute smoke test of the pipeline.
bench-partition: deps
	@BUILD="$(BUILD)" JOBS="$(JOBS)" scripts/run-bench-partition.sh

# Many connections to one broker, arbor and Debian's mosquitto side by side: memory per idle
# connection and per connection with two subscriptions, connections/s, and the fan-out of one
# QoS 0 message to every connection (delivery times, loss, CPU), for 1000 to 18 000 connections
# (about 2 minutes; not part of `make test`): appends or replaces a section of
# docs/benchmarks.md. BENCH_CONNECTIONS_QUICK=1 is a quarter-minute smoke test of the pipeline.
bench-connections: deps
	@BUILD="$(BUILD)" JOBS="$(JOBS)" scripts/run-bench-connections.sh

# The MQTT-ST paper's single-broker "local" scenario with slow subscribers, arbor and Debian's
# mosquitto side by side: 10 publishers at QoS 2 (each waits for PUBCOMP), 1000 messages of
# 100 B each, 10 and 50 subscribers on bench/# at QoS 2, clients written with the Go library
# paho.mqtt.golang (test/bench/overload; needs Go 1.24 or later): publication throughput,
# end-to-end latency, loss, broker CPU, median of 3 rounds (about 5 minutes; not part of
# `make test`): appends or replaces a section of docs/benchmarks.md.
# BENCH_OVERLOAD_QUICK=1 is a half-minute smoke test of the pipeline.
bench-overload: deps
	@BUILD="$(BUILD)" JOBS="$(JOBS)" scripts/run-bench-overload.sh
# TLS handshakes per second on one broker, arbor and Debian's mosquitto side by side: C clients
# (1, 8, 32) each connecting over and over (TLS handshake, CONNECT, CONNACK, DISCONNECT, close)
# with ECDSA P-256 and RSA 2048 certificates, TLS 1.3 and 1.2, then set_tcp_nodelay true,
# resumed sessions and plain TCP: connects/s, p50/p99 connect time, broker and client CPU per
# connect (about 8 minutes; not part of `make test`): appends or replaces a section of
# docs/benchmarks.md. BENCH_TLS_QUICK=1 is a smoke test of the pipeline (under a minute).
bench-tls: deps
	@BUILD="$(BUILD)" JOBS="$(JOBS)" scripts/run-bench-tls.sh

# Mosquitto 2.0.11's own broker tests (test/broker, groups 01-05, 07, 10-13) against arbor
# and Debian's mosquitto, PASS/FAIL per test (not part of `make test`: they are not ours).
mosquitto-tests: build
	@scripts/run-mosquitto-tests.sh $(CURDIR)/$(BUILD)/arbor /usr/sbin/mosquitto

# The unit tests on a ThreadSanitizer build (build-tsan): the primitives several event loops
# share (logger, mailboxes, reference counts) are tested from several threads there; then the
# integration tests of several loops on it with `loops 4`. Also a step of `make test`.
test-tsan: deps
	@scripts/run-tests.sh --tsan-only

# The whole integration suite with `loops 2`, then `loops 4` (ARBOR_LOOPS), on the normal
# build (`make test` runs it with one loop there, and with 2 on the ASan build).
test-loops: deps
	@scripts/run-tests.sh --loops-only

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) build-release build-fuzz build-tsan
