# handoffs/handoffs.mk — the handoff backends, their tests and micro-benchmarks.
# Included by the top-level Makefile (which compiles HANDOFF_SRCS into ./cserve).
#
#   make handoff-test       short TSan stress of every backend x {1,4} workers,
#                           the store-buffering litmus test, the Promela model,
#                           the submit contract under failing syscalls
#   make handoff-test-tsan  the same (it is already a TSan build)
#   make stress             long: 10^7 jobs per backend x {1,4} workers, -O2
#   make micro              Google Benchmark round trips through each backend

HANDOFF_SRCS := handoffs/handoff.c handoffs/dgram.c handoffs/condvar.c handoffs/eventfd.c handoffs/ring.c

HANDOFF_BACKENDS  := ring dgram condvar eventfd
HANDOFF_HDRS      := $(wildcard handoffs/*.h) core/counter.h core/futex.h core/spin.h
HANDOFF_TEST_DIR  := $(BUILD)/handoffs-tests
# The tests run on the handoff sources compiled into the test binary itself,
# with their own flags (not the server's objects, which may be ASan or -O2).
HANDOFF_TSAN      := -O1 -fsanitize=thread
HANDOFF_SHORT_JOBS ?= 200000
HANDOFF_LONG_JOBS  ?= 10000000
LITMUS_ROUNDS      ?= 5000000

.PHONY: handoff-test handoff-test-tsan handoff-stress-short handoff-litmus handoff-model \
        handoff-submit-error stress micro

$(HANDOFF_TEST_DIR)/stress-tsan: handoffs/tests/stress.c $(HANDOFF_SRCS) $(HANDOFF_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(HANDOFF_TSAN) -o $@ handoffs/tests/stress.c $(HANDOFF_SRCS) -lpthread

$(HANDOFF_TEST_DIR)/stress: handoffs/tests/stress.c $(HANDOFF_SRCS) $(HANDOFF_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -O2 -o $@ handoffs/tests/stress.c $(HANDOFF_SRCS) -lpthread

# No sanitizer: TSan's instrumented atomics would hide the hardware reordering
# this test exists to show.
$(HANDOFF_TEST_DIR)/litmus_sb: handoffs/tests/litmus_sb.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -O2 -o $@ $< -lpthread

# Every backend with 1 and 4 workers, then the ring with spinning off (every
# wait a park) and the smallest capacity (every ring wrap-around and full path).
handoff-stress-short: $(HANDOFF_TEST_DIR)/stress-tsan
	@set -e; for b in $(HANDOFF_BACKENDS); do for w in 1 4; do \
	  TSAN_OPTIONS=halt_on_error=1 $< -b $$b -w $$w -n $(HANDOFF_SHORT_JOBS); done; done; \
	TSAN_OPTIONS=halt_on_error=1 $< -b ring -w 4 -s 0 -n $(HANDOFF_SHORT_JOBS); \
	TSAN_OPTIONS=halt_on_error=1 $< -b ring -w 1 -s 0 -c 2 -p 30 -n $$(( $(HANDOFF_SHORT_JOBS) / 4 ))

handoff-litmus: $(HANDOFF_TEST_DIR)/litmus_sb
	$< $(LITMUS_ROUNDS) 3

handoff-model: handoffs/tests/ring_park.pml handoffs/tests/check_model.sh
	CC="$(CC)" handoffs/tests/check_model.sh $(HANDOFF_TEST_DIR)/model

# Every write/send the backends make can be made to fail (--wrap): a submit
# that reports an error must have queued nothing (submit_error.c).
$(HANDOFF_TEST_DIR)/submit_error: handoffs/tests/submit_error.c $(HANDOFF_SRCS) $(HANDOFF_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -O1 -fsanitize=address,undefined -fno-sanitize-recover=undefined \
	  -Wl,--wrap=write,--wrap=send -o $@ handoffs/tests/submit_error.c $(HANDOFF_SRCS) -lpthread

handoff-submit-error: $(HANDOFF_TEST_DIR)/submit_error
	$<

handoff-test: handoff-stress-short handoff-litmus handoff-model handoff-submit-error

handoff-test-tsan: handoff-test

stress: $(HANDOFF_TEST_DIR)/stress
	@set -e; for b in $(HANDOFF_BACKENDS); do for w in 1 4; do \
	  $< -b $$b -w $$w -n $(HANDOFF_LONG_JOBS); done; done

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

micro: $(MICRO_DIR)/bench_handoff
	$< $(MICRO_ARGS)
