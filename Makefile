# Thin wrapper around CMake: the README's two commands are `make run` and `make test`.
BUILD ?= build
ASAN_BUILD ?= build-asan
JOBS ?= 2
CONFIG ?= config/arbor.conf

.PHONY: all deps build run test unit integration sanitize bench clean

all: build

deps:
	@scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

run: build
	./$(BUILD)/arbor -c $(CONFIG)

# The whole suite: unit tests and integration tests on the normal build, then both again
# on an AddressSanitizer + UndefinedBehaviorSanitizer build.
test: deps
	@scripts/run-tests.sh

bench: build
	@scripts/run-bench.sh

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
