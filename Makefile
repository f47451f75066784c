# The two commands a newcomer runs (see README.md):
#   make run    install dependencies, build, run the main job
#   make test   install dependencies, build with warnings as errors, run the suite, then the suite
#               again under AddressSanitizer + UndefinedBehaviorSanitizer, then each libFuzzer
#               target briefly (clang), then the format and layer and function-length checks
BUILD      ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
FUZZ_BUILD ?= build-fuzz
# make test's fuzz step: each target for this many runs or seconds, whichever ends first
FUZZ_RUNS  ?= 20000
FUZZ_SECS  ?= 15
JOBS       ?= $(shell nproc)
CTEST_ARGS ?= --output-on-failure -j $(JOBS)
PREFIX     ?= /usr/local

.PHONY: all deps build build-asan build-tsan build-fuzz test-tsan run test test-fast test-asan test-fuzz format-check layers-check install clean

all: build

deps:
	bash scripts/deps.sh

build: deps
	cmake -S . -B $(BUILD) -G Ninja -DZEN_WERROR=ON
	cmake --build $(BUILD) -j $(JOBS)

build-asan: deps
	cmake -S . -B $(ASAN_BUILD) -G Ninja -DZEN_WERROR=ON -DZEN_SANITIZE=address,undefined \
	      -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(ASAN_BUILD) -j $(JOBS)

build-tsan: deps
	cmake -S . -B $(TSAN_BUILD) -G Ninja -DZEN_WERROR=ON -DZEN_SANITIZE=thread \
	      -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(TSAN_BUILD) -j $(JOBS)

# The libFuzzer targets (tests/fuzz.cmake) with clang, ASan and UBSan; only they are built here.
build-fuzz: deps
	CC=clang cmake -S . -B $(FUZZ_BUILD) -G Ninja -DZEN_BUILD_FUZZ=ON -DZEN_BUILD_PYTHON=OFF
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz_targets

# Each target from its seed corpus for a short budget (a finding fails; bench/fuzz.sh with the
# default 1000000 runs is the long run of docs/security.md).
test-fuzz: build-fuzz
	bash bench/fuzz.sh $(FUZZ_RUNS) $(FUZZ_BUILD) $(FUZZ_SECS)

run: build
	./$(BUILD)/zen train

test-fast: build
	cd $(BUILD) && ctest $(CTEST_ARGS)

test-asan: build-asan
	cd $(ASAN_BUILD) && \
	  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp:print_suppressions=0 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest $(CTEST_ARGS)

# make install [PREFIX=/usr/local] [DESTDIR=staging]: library, headers, zen, zen(1), zen.pc and
# the CMake package (see README.md, "Install").
install: build
	DESTDIR="$(DESTDIR)" cmake --install $(BUILD) --prefix "$(PREFIX)"

# ThreadSanitizer: inproc ranks are threads, tcp and mpi have progress threads. The mpi label is
# left out (Open MPI's own threads are not instrumented and report in its internals), and so are
# the slow multi-process cli runs, which add no threads of their own to what the unit tests cover.
test-tsan: build-tsan
	cd $(TSAN_BUILD) && \
	  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$(CURDIR)/tests/tsan.supp" \
	  ctest $(CTEST_ARGS) -LE 'mpi|cluster|install'

format-check:
	bash scripts/check-format.sh

# check-call-circles reads the objects of $(BUILD) (make test builds it first)
layers-check:
	bash scripts/check-layers.sh
	bash scripts/check-function-size.sh
	bash scripts/check-call-circles.sh $(BUILD)

test: test-fast test-asan test-fuzz format-check layers-check

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(FUZZ_BUILD)
