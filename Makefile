# cserve — build, test, measure.
#
#   make               build ./cserve (release, jemalloc)
#   make run           build and serve apps/hello.py on 127.0.0.1:8000 (ring handoff)
#   make test          everything a submission must pass (installs missing packages first)
#   make test-asan     the integration suite against an ASan+UBSan build
#   make test-tsan     the handoffs and a short load run under TSan
#   make deps          install the Debian/PyPI packages the build, tests and experiments need
#   make micro | stress | fuzz | soak | experiments | paper
#
# Knobs: PYTHON_PC=python3-embed (pkg-config name of the CPython to embed),
#        ALLOC=jemalloc|libc, OPT=-O2, INSTRUMENTS=1|0 (compile the counters out with 0).

PYTHON_PC  ?= python3-embed
# The interpreter the tests and experiments run on: the one we embed.
PYTHON     ?= /usr/bin/python3
ALLOC      ?= jemalloc
OPT        ?= -O2
INSTRUMENTS ?= 1
SAN        ?=
BUILD      ?= build

PY_CFLAGS := $(shell pkg-config --cflags $(PYTHON_PC) 2>/dev/null)
PY_LIBS   := $(shell pkg-config --libs $(PYTHON_PC) 2>/dev/null)

WARN      := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes
CFLAGS_BASE := -std=c11 -D_GNU_SOURCE $(WARN) -g -fno-omit-frame-pointer
CFLAGS    := $(CFLAGS_BASE) $(OPT) -DCSERVE_INSTRUMENTS=$(INSTRUMENTS) $(EXTRA_CFLAGS)
LDLIBS    := $(PY_LIBS) -lpthread -lm

ifeq ($(SAN),asan)
  CFLAGS  += -fsanitize=address,undefined -fno-sanitize-recover=undefined
  LDFLAGS += -fsanitize=address,undefined
  ALLOC   := libc
endif
ifeq ($(SAN),tsan)
  CFLAGS  += -fsanitize=thread
  LDFLAGS += -fsanitize=thread
  ALLOC   := libc
endif
ifeq ($(ALLOC),jemalloc)
  LDLIBS  += -ljemalloc
endif

.DEFAULT_GOAL := all
include handoffs/handoffs.mk
include tests/parser.mk

CORE_SRCS := $(wildcard core/*.c)
SRCS      := $(CORE_SRCS) $(HANDOFF_SRCS)
OBJS      := $(SRCS:%.c=$(BUILD)/%.o)

.PHONY: all run test test-asan test-tsan deps integration-test soak experiments experiments-quick \
        profile paper clean

all: cserve

ifeq ($(BUILD),build)
cserve: $(BUILD)/cserve
	cp $< $@.tmp && mv -f $@.tmp $@  # a rename works while ./cserve runs
endif

$(BUILD)/cserve: $(OBJS)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(PY_CFLAGS) -MMD -MP -c -o $@ $<

-include $(OBJS:.o=.d)

deps:
	scripts/setup.sh

# deps first, then a fresh make: the Makefile's pkg-config look-ups must see
# the python3-dev that deps may just have installed.
run: deps
	$(MAKE) all
	./cserve --handoff=ring

# The integration suite, against every handoff backend.
integration-test: all
	$(PYTHON) -m pytest -q tests/integration

test: deps
	$(MAKE) all unit-test handoff-test fuzz-short integration-test

test-asan: deps
	$(MAKE) BUILD=build-asan SAN=asan build-asan/cserve
	CSERVE_BIN=build-asan/cserve ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:fast_unwind_on_malloc=0:malloc_context_size=256 \
	  LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp:print_suppressions=0 \
	  $(PYTHON) -m pytest -q tests/integration

test-tsan: deps
	$(MAKE) BUILD=build-tsan SAN=tsan build-tsan/cserve handoff-test-tsan
	CSERVE_BIN=build-tsan/cserve TSAN_OPTIONS=halt_on_error=1 \
	  $(PYTHON) -m pytest -q tests/integration -k load

# Long load and fault runs: the long forms of the load and fault tests (10^6
# requests per backend, 2000 rounds per vanishing client), then a timed run
# per backend watching RSS and fds for drift (SOAK_MINUTES each).
SOAK_MINUTES ?= 2
soak: deps
	$(MAKE) all
	CSERVE_BIN=./cserve $(PYTHON) tests/soak.py --minutes $(SOAK_MINUTES)

# The full sweep (~20-30 min on a 2-vCPU guest) and its tables and figures.
experiments: deps
	$(MAKE) all
	$(MAKE) BUILD=build-noinst INSTRUMENTS=0 build-noinst/cserve
	$(PYTHON) experiments/run.py
	$(PYTHON) experiments/report.py
	$(PYTHON) experiments/instrument_cost.py > experiments/results/instrument_cost.md

experiments-quick: deps
	$(MAKE) all
	$(PYTHON) experiments/run.py --quick
	$(PYTHON) experiments/report.py --dir experiments/results/quick

# On-CPU profiles reduced to µs per request per thread (perf, cpu-clock).
profile: deps
	$(MAKE) all
	mkdir -p experiments/results
	for h in ring dgram; do scripts/profile.sh -d 5 -c 64 -o /tmp/cserve-profile-$$h -- --handoff $$h && \
	  cp /tmp/cserve-profile-$$h/report.md experiments/results/profile-$$h.md || exit 1; done

paper:
	$(PYTHON) experiments/report.py
	$(PYTHON) paper/build.py

clean:
	rm -rf build build-asan build-tsan build-fuzz cserve
