# handoffs/handoffs.mk — the handoff backends, their tests and micro-benchmarks.
# Included by the top-level Makefile (which compiles HANDOFF_SRCS into ./cserve).
#
#   make handoff-test       short TSan stress of every backend x {1,4} workers,
#                           the same at -O2 without TSan for the ring, the ring's
#                           SPSC queue at its full path under TSan, the litmus
#                           test on ring.c, the Promela model (+ its step check),
#                           the submit contract under failing syscalls, set_active
#   make handoff-test-tsan  the same (it is already a TSan build)
#   make mutants            build each ring mutant (ring_order.h), require a test
#                           to fail on it (handoffs/tests/mutants.sh; in make test;
#                           the litmus test's catches are make perf-check's)
#   make stress             long: 10^7 jobs per backend x {1,4} workers, -O2
#   make micro              Google Benchmark round trips through each backend
#   make micro-record       the same in 5 rounds, recorded; rewrites its table in handoffs/README.md
#   make loop-floor         what the handoff adds to the loop per job, recorded; its table in handoffs/README.md

HANDOFF_SRCS := handoffs/handoff.c handoffs/dgram.c handoffs/condvar.c handoffs/eventfd.c handoffs/ring.c \
                handoffs/spin_policy.c handoffs/fault.c

HANDOFF_BACKENDS  := ring dgram condvar eventfd
HANDOFF_HDRS      := $(wildcard handoffs/*.h) $(wildcard lib/*.h)
HANDOFF_TEST_DIR  := $(BUILD)/handoffs-tests
# The tests run on the handoff sources compiled into the test binary itself,
# with their own flags (not the server's objects, which may be ASan or -O2).
HANDOFF_TSAN      := -O1 -fsanitize=thread
HANDOFF_SHORT_JOBS ?= 200000
HANDOFF_LONG_JOBS  ?= 10000000
LITMUS_SECONDS     ?= 2

.PHONY: handoff-test handoff-test-tsan handoff-stress-short handoff-stress-o2 handoff-spsc handoff-litmus handoff-policy handoff-batch \
        handoff-model handoff-model-long handoff-submit-error handoff-active mutants stress micro micro-record loop-floor

$(HANDOFF_TEST_DIR)/stress-tsan: handoffs/tests/stress.c $(HANDOFF_SRCS) $(HANDOFF_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(HANDOFF_TSAN) -o $@ handoffs/tests/stress.c $(HANDOFF_SRCS) -lpthread

$(HANDOFF_TEST_DIR)/stress: handoffs/tests/stress.c $(HANDOFF_SRCS) $(HANDOFF_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -O2 -o $@ handoffs/tests/stress.c $(HANDOFF_SRCS) -lpthread

# No sanitizer: TSan's instrumented atomics would hide the hardware reordering
# this test exists to show. It #includes ring.c (and stands in for the kernel).
$(HANDOFF_TEST_DIR)/ring_litmus: handoffs/tests/ring_litmus.c $(HANDOFF_SRCS) $(HANDOFF_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -O2 -o $@ $< $(filter-out handoffs/ring.c,$(HANDOFF_SRCS)) -lpthread

$(HANDOFF_TEST_DIR)/spsc_test-tsan: handoffs/tests/spsc_test.c $(HANDOFF_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(HANDOFF_TSAN) -o $@ $< -lpthread

# Every backend with 1 and 4 workers, then the ring with spinning off (every
# wait a park), the smallest capacity (every ring wrap-around and full path),
# and every job paused (a pool slow enough for the loop to hold and doze).
handoff-stress-short: $(HANDOFF_TEST_DIR)/stress-tsan
	@set -e; for b in $(HANDOFF_BACKENDS); do for w in 1 4; do \
	  TSAN_OPTIONS=halt_on_error=1 $< -b $$b -w $$w -n $(HANDOFF_SHORT_JOBS); done; done; \
	TSAN_OPTIONS=halt_on_error=1 $< -b ring -w 4 -s 0 -n $(HANDOFF_SHORT_JOBS); \
	TSAN_OPTIONS=halt_on_error=1 $< -b ring -w 1 -s 0 -c 2 -p 30 -n $$(( $(HANDOFF_SHORT_JOBS) / 4 )); \
	TSAN_OPTIONS=halt_on_error=1 $< -b ring -w 2 -p 100 -n $$(( $(HANDOFF_SHORT_JOBS) / 10 ))

# The ring without TSan, where the CPU's own reordering is live; the last
# run with the adaptive budgets. Their stability is checked deterministically
# by handoff-policy (a synthetic feedback loop); the wall-clock check (-S) is
# in `make stress`: under foreign load the waits really change and the budget
# rightly follows them, which a bound on changes cannot tell from flapping.
handoff-stress-o2: $(HANDOFF_TEST_DIR)/stress
	@set -e; $< -b ring -w 1 -s 0 -n $(HANDOFF_SHORT_JOBS); \
	$< -b ring -w 2 -s 0 -c 2 -p 30 -n $$(( $(HANDOFF_SHORT_JOBS) / 4 )); \
	$< -b ring -w 4 -n $$(( $(HANDOFF_SHORT_JOBS) * 5 ))

# The adaptive spin policy fed synthetic wait histories (deterministic).
$(HANDOFF_TEST_DIR)/spin_policy_test: handoffs/tests/spin_policy_test.c handoffs/spin_policy.c handoffs/spin_policy.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -O2 -o $@ handoffs/tests/spin_policy_test.c handoffs/spin_policy.c

handoff-policy: $(HANDOFF_TEST_DIR)/spin_policy_test
	$<

# -O2, not TSan: under TSan each submit is slower than the worker's wake-up,
# so every submit meets a freshly parked worker and the burst is no burst.
# Run without --paced: the parts the code decides alone (--paced, the
# parts on the live scheduler, is make perf-check's).
$(HANDOFF_TEST_DIR)/batch_test: handoffs/tests/batch_test.c $(HANDOFF_SRCS) $(HANDOFF_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -O2 -o $@ handoffs/tests/batch_test.c $(filter-out handoffs/ring.c,$(HANDOFF_SRCS)) -lpthread

handoff-batch: $(HANDOFF_TEST_DIR)/batch_test
	$<

handoff-spsc: $(HANDOFF_TEST_DIR)/spsc_test-tsan
	TSAN_OPTIONS=halt_on_error=1 $< 100000

handoff-litmus: $(HANDOFF_TEST_DIR)/ring_litmus
	$< worker $(LITMUS_SECONDS)
	$< loop $(LITMUS_SECONDS)

# The model's steps against ring.c and the two reach searches (seconds);
# the searches of every interleaving (minutes, ~5 GB each) are
# handoff-model-long, part of make test-long.
handoff-model: handoffs/tests/ring_protocol.pml handoffs/tests/check_model.sh handoffs/tests/check_steps.py
	CC="$(CC)" PYTHON="$(PYTHON)" handoffs/tests/check_model.sh --quick $(HANDOFF_TEST_DIR)/model

handoff-model-long: handoffs/tests/ring_protocol.pml handoffs/tests/check_model.sh ## every interleaving of the ring's model (part of make test-long)
	CC="$(CC)" PYTHON="$(PYTHON)" handoffs/tests/check_model.sh --exhaustive $(HANDOFF_TEST_DIR)/model-long

# The binaries handoff-test runs (make test builds them beside other work).
HANDOFF_TEST_BINS := $(addprefix $(HANDOFF_TEST_DIR)/,stress-tsan stress ring_litmus spsc_test-tsan \
                       spin_policy_test batch_test submit_error active_test)

handoff-test: layering handoff-policy handoff-batch handoff-stress-short handoff-stress-o2 handoff-spsc handoff-litmus handoff-model handoff-submit-error handoff-active ## the handoffs' stress (TSan), litmus, model and contract tests

# ~30 s on a 2-vCPU guest: 14 mutant builds, each failing the tests named for it.
mutants: ## each ring mutant built and caught by a test
	CC="$(CC)" PYTHON="$(PYTHON)" handoffs/tests/mutants.sh $(HANDOFF_TEST_DIR)/mutants

# Every write/send the backends make can be made to fail (--wrap): a submit
# that reports an error must have queued nothing (submit_error.c).
$(HANDOFF_TEST_DIR)/submit_error: handoffs/tests/submit_error.c $(HANDOFF_SRCS) $(HANDOFF_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -O1 -fsanitize=address,undefined -fno-sanitize-recover=undefined \
	  -Wl,--wrap=write,--wrap=send -o $@ handoffs/tests/submit_error.c $(HANDOFF_SRCS) -lpthread

handoff-submit-error: $(HANDOFF_TEST_DIR)/submit_error
	$<

# The loop narrowing and widening the workers it uses (set_active: a pool
# that sizes itself).
$(HANDOFF_TEST_DIR)/active_test: handoffs/tests/active_test.c $(HANDOFF_SRCS) $(HANDOFF_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -O1 -fsanitize=address,undefined -fno-sanitize-recover=undefined \
	  -o $@ handoffs/tests/active_test.c $(HANDOFF_SRCS) -lpthread

handoff-active: $(HANDOFF_TEST_DIR)/active_test
	$<

handoff-test-tsan: handoff-test

stress: $(HANDOFF_TEST_DIR)/stress ## 10^7 jobs per backend x {1,4} workers, -O2
	@set -e; for b in $(HANDOFF_BACKENDS); do for w in 1 4; do \
	  $< -b $$b -w $$w -n $(HANDOFF_LONG_JOBS); done; done; \
	$< -b ring -w 4 -n $$(( $(HANDOFF_SHORT_JOBS) * 5 )) -S

# Micro-benchmarks: C drivers (experiments/micro/roundtrip.c) registered from
# one small .cc file; Google Benchmark from Debian's libbenchmark-dev.
MICRO_DIR  := $(BUILD)/micro
MICRO_ARGS ?= --benchmark_counters_tabular=true

$(MICRO_DIR)/bench_handoff: experiments/micro/bench_handoff.cc experiments/micro/roundtrip.c \
		experiments/micro/roundtrip.h $(HANDOFF_SRCS) $(HANDOFF_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -O2 -c -o $(MICRO_DIR)/roundtrip.o experiments/micro/roundtrip.c
	@set -e; for f in $(HANDOFF_SRCS); do \
	  $(CC) $(CFLAGS_BASE) -O2 -c -o $(MICRO_DIR)/$$(basename $$f .c).o $$f; done
	$(CXX) -std=c++17 -O2 -g -Wall -Wextra -Werror -o $@ experiments/micro/bench_handoff.cc \
	  $(MICRO_DIR)/roundtrip.o $(addprefix $(MICRO_DIR)/,$(notdir $(HANDOFF_SRCS:.c=.o))) -lbenchmark -lpthread

micro: $(MICRO_DIR)/bench_handoff ## one job's round trip through each backend (Google Benchmark)
	$< $(MICRO_ARGS)

# The same benchmarks in repeated rounds, recorded (experiments/results/micro/)
# and written into the micro-benchmark table in handoffs/README.md. A quiet machine.
micro-record: $(MICRO_DIR)/bench_handoff ## micro in rounds, recorded; rewrites its table in handoffs/README.md
	$(PYTHON) -m experiments.micro --bin $< --rounds 5
	$(PYTHON) -m experiments.micro --readme experiments/results/micro/micro.json

# What the handoff itself adds to the loop per request, with no sockets,
# parsing or interpreter (experiments/micro/loop_floor.c, a plain C driver),
# recorded in interleaved rounds (experiments/results/loop-floor/) and
# written into handoffs/README.md's block. A quiet machine, ~2 min.
$(MICRO_DIR)/loop_floor: experiments/micro/loop_floor.c $(HANDOFF_SRCS) $(HANDOFF_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -O2 -o $@ experiments/micro/loop_floor.c $(HANDOFF_SRCS) -lpthread

loop-floor: $(MICRO_DIR)/loop_floor ## what the handoff adds to the loop per job, recorded; its block in handoffs/README.md
	$(PYTHON) -m experiments.loop_floor --bin $< --rounds 9
	$(PYTHON) -m experiments.loop_floor --readme experiments/results/loop-floor/loop_floor.json
