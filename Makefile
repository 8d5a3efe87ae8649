# cserve — build, test, measure. `make help` lists the targets, one line
# each (the `## ` comment on each target's line).
#
# Knobs: PYTHON=/usr/bin/python3 (the CPython to embed; any >= 3.9, e.g. PYTHON=python3.12),
#        PYTHON_PC (a pkg-config name to take its flags from instead),
#        PYTHON_LINK=auto|static|shared (how libpython is linked: auto = the shared one where the installation has it, else static),
#        ALLOC=jemalloc|libc (libc when jemalloc's dev files are missing), OPT=-O2, INSTRUMENTS=1|0 (compile the counters out with 0),
#        TEST_HOOKS=0|1 (1: a test build, with the fault hooks the integration tests set in the environment,
#        CSERVE_FAULT_SUBMIT and CSERVE_TEST_FAIL_POOL_THREAD; 0, the default, leaves them out; a SAN build defaults to 1).

# Which CPython to embed and how to link it: PY_CFLAGS, PY_LIBS, PY_LINK,
# PY_DEFS (mk/python.mk says what it decides, and from what).
PYTHON     ?= /usr/bin/python3
PYTHON_PC  ?= $(if $(filter /usr/bin/python3,$(PYTHON)),python3-embed)
PYTHON_LINK ?= auto
ALLOC      ?= jemalloc
OPT        ?= -O2
INSTRUMENTS ?= 1
SAN        ?=
TEST_HOOKS ?= $(if $(SAN),1,0)
BUILD      ?= build
include mk/python.mk

WARN      := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes
CFLAGS_BASE := -std=c11 -D_GNU_SOURCE $(WARN) -g -fno-omit-frame-pointer
CFLAGS    := $(CFLAGS_BASE) $(OPT) -DCSERVE_INSTRUMENTS=$(INSTRUMENTS) -DCSERVE_TEST_HOOKS=$(TEST_HOOKS) $(EXTRA_CFLAGS)
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
  HAVE_JEMALLOC := $(shell printf '\043include <jemalloc/jemalloc.h>\nint main(void){return 0;}\n' | \
                     $(CC) -x c - -ljemalloc -o /dev/null 2>/dev/null && echo 1)
  ifeq ($(HAVE_JEMALLOC),1)
    LDLIBS  += -ljemalloc
  else
    $(info cserve: jemalloc's development files are missing (Debian: libjemalloc-dev); linking the C library's malloc instead (ALLOC=libc))
    ALLOC := libc
  endif
endif
# Objects remember which Python they were compiled for, and whether with the
# test hooks: another PYTHON, or TEST_HOOKS, in the same BUILD directory
# rebuilds everything instead of mixing headers, or leaving hooks in ./cserve.
PY_STAMP := $(BUILD)/python.stamp
PY_STAMP_TEXT := $(PYTHON) $(PY_HOME) $(PY_CFLAGS) $(PY_LIBS) $(PY_LINK) $(ALLOC) hooks=$(TEST_HOOKS)
$(shell mkdir -p $(BUILD) && (echo '$(PY_STAMP_TEXT)' | cmp -s - $(PY_STAMP) || echo '$(PY_STAMP_TEXT)' > $(PY_STAMP)))

.DEFAULT_GOAL := all
include handoffs/handoffs.mk
include tests/parser.mk

CORE_SRCS := $(wildcard core/*/*.c)
SRCS      := $(CORE_SRCS) $(HANDOFF_SRCS)
OBJS      := $(SRCS:%.c=$(BUILD)/%.o)

.PHONY: all cserve-hooks help run test test-long test-asan test-tsan test-freethreaded deps deps-run deps-test deps-paper \
        deps-experiments integration-test soak experiments experiments-quick experiments-test profile paper clean \
        bench layering perf-check test-busy

all: cserve build/pipeload ## build ./cserve (release, jemalloc)

# The server of the tests that force faults through the environment: a
# release build reads no such variable (TEST_HOOKS above).
HOOKS_BIN := build-hooks/cserve
cserve-hooks: ## build build-hooks/cserve: ./cserve with the tests' fault hooks (TEST_HOOKS=1)
	$(MAKE) BUILD=build-hooks TEST_HOOKS=1 $(HOOKS_BIN)

# The lines of every makefile read (not the generated .d files) that name a
# target with a `## ` comment, in the order they are read.
help: ## list the targets, one line each
	@awk 'BEGIN { FS = ":[^#]*## " } /^[a-zA-Z0-9][a-zA-Z0-9_.-]*:[^=]*## / { printf "  %-20s %s\n", $$1, $$2 }' \
	  $(filter-out %.d,$(MAKEFILE_LIST))

ifeq ($(BUILD),build)
cserve: $(BUILD)/cserve
	cp $< $@.tmp && mv -f $@.tmp $@  # a rename works while ./cserve runs
endif

$(BUILD)/cserve: $(OBJS) $(PY_LINK_DEPS)
	$(CC) $(PY_LINK_FLAGS) $(LDFLAGS) -o $@ $(OBJS) $(LDLIBS)

$(OBJS): $(PY_STAMP)
$(BUILD)/core/python/interp.o: CFLAGS += $(PY_DEFS)
$(BUILD)/core/server/options.o: CFLAGS += -DCSERVE_ALLOC='"$(ALLOC)"' -DCSERVE_PYTHON_LINK='"$(PY_LINK)"'
$(BUILD)/core/metrics/metrics_dashboard.o: core/metrics/dashboard.html # built in with .incbin

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(PY_CFLAGS) -MMD -MP -c -o $@ $<

-include $(OBJS:.o=.d)

# The install tiers (scripts/setup.sh says what each package is for); each
# installs only what is missing.
deps: ## install every tier's packages
	scripts/setup.sh
deps-run: ## install what building and serving need (compiler, python3-dev, jemalloc)
	scripts/setup.sh run
deps-test: ## install deps-run's and what the tests use
	scripts/setup.sh test
deps-paper: ## install what builds the paper's PDF (pandoc, weasyprint)
	scripts/setup.sh paper
deps-experiments: ## install deps-run's, deps-paper's and the research toolchain
	scripts/setup.sh experiments

# The tier first, then a fresh make: the Makefile's pkg-config look-ups must
# see the python3-dev that the tier may just have installed.
run: deps-run ## build and serve apps/hello.py on 127.0.0.1:8000 (ring handoff)
	$(MAKE) all
	./cserve --handoff=ring

# The integration suite, against every handoff backend. With pytest-xdist
# (the test tier installs it) on TEST_JOBS workers, each taking whole
# modules (--dist loadfile): a module's tests share its servers and run in
# order, as they do alone. TEST_JOBS=1: one process, as without xdist.
TEST_JOBS ?= 4
HAVE_XDIST := $(shell $(PYTHON) -c 'import xdist' 2>/dev/null && echo 1)
PYTEST_JOBS := $(if $(and $(HAVE_XDIST),$(filter-out 0 1,$(TEST_JOBS))),-n $(TEST_JOBS) --dist loadfile)
# The modules in the order the workers take them: the longest first, so
# that none of them starts last and runs on alone.
INTEGRATION_FIRST := $(addprefix tests/integration/,test_reload.py test_metrics.py)
INTEGRATION_MODULES := $(INTEGRATION_FIRST) \
  $(filter-out $(INTEGRATION_FIRST),$(sort $(wildcard tests/integration/test_*.py)))
integration-test: all cserve-hooks ## the integration suite against ./cserve and build-hooks/cserve, on every handoff (TEST_JOBS processes)
	CSERVE_PYTHON_LINK=$(PYTHON_LINK) CSERVE_HOOKS_BIN=$(HOOKS_BIN) $(PYTHON) -m pytest -q $(PYTEST_JOBS) $(INTEGRATION_MODULES)

# core/conn/jobs.c's reset of a recycled job, checked field by field (ASan+UBSan);
# runs with the parser's unit tests.
$(BUILD)/unit/jobs_clear: tests/unit/jobs_clear.c tests/unit/check.h core/conn/jobs.c core/http/buffer.c \
		core/python/job.h core/conn/loop.h core/http/http_parser.h
	@mkdir -p $(dir $@)
	$(CC) $(UNIT_CFLAGS) -o $@ tests/unit/jobs_clear.c core/conn/jobs.c core/http/buffer.c

unit-test: $(BUILD)/unit/jobs_clear

# The declared dependency graph, stated once in docs/architecture.md (which
# folder may include which, which Python folder may import which), checked
# by scripts/layering.py with no include cycle between files; one line per
# violation.
layering: ## check includes and imports against docs/architecture.md's graph
	/usr/bin/python3 scripts/layering.py

# make test: the builds (the server, its test build, the handoffs' test
# binaries) and the checks whose verdict does not depend on timing side by side (two at a time; -O keeps each one's output
# together), then the handoffs' tests and the mutants (the litmus and batch
# tests time their threads), then the integration suite, whose timeouts
# are measured in wall time. scripts/time-make-test.sh times it and records
# the time.
test: deps-test ## everything a change must pass: builds, checks, unit, fuzz, handoff and integration tests
	$(MAKE) -j2 -O all cserve-hooks layering unit-test fuzz-short experiments-test experiments-quick $(HANDOFF_TEST_BINS)
	$(MAKE) handoff-test mutants
	$(MAKE) integration-test

# How the server's threads are scheduled is a benchmark's question, not a
# test's: the spins, wakes, dozes and holds the waiting policies buy, how
# soon a held loop reads another connection, the ring's paced batch test.
# Serial, alone, each check in interleaved rounds decided on medians, a
# round that lost CPU to other work run again (tests/perf/perf.py; on a
# quiet machine, a few minutes).
PERF_ROUNDS ?= 5
perf-check: deps-test ## the scheduling checks: medians of interleaved rounds, serial (run it on a quiet machine)
	$(MAKE) all $(HANDOFF_TEST_DIR)/batch_test
	CC="$(CC)" PYTHON="$(PYTHON)" handoffs/tests/mutants.sh --litmus $(HANDOFF_TEST_DIR)/mutants-litmus
	PERF_ROUNDS=$(PERF_ROUNDS) $(PYTHON) -m pytest -q -s -p no:xdist tests/perf

# make test beside CPU-bound processes, as on a machine doing other work:
# every run recorded in experiments/results/test-busy.txt (docs/testing.md).
BUSY_HOGS ?= 2
BUSY_RUNS ?= 3
BUSY_TARGET ?= test
test-busy: deps-test ## make test BUSY_RUNS times beside BUSY_HOGS CPU-bound processes, each run recorded
	scripts/test-busy.sh $(BUSY_HOGS) $(BUSY_RUNS) experiments/results/test-busy.txt $(BUSY_TARGET)

# What make test leaves out for its length, CI runs: the searches of every
# interleaving of the ring's protocol model (handoffs/tests/check_model.sh).
test-long: deps-test ## the model's exhaustive searches, too long for make test
	$(MAKE) handoff-model-long

# The sanitizer and free-threaded builds are test builds (TEST_HOOKS=1):
# given as CSERVE_BIN alone, each serves the fault tests too.
test-asan: deps-test ## the integration suite against an ASan+UBSan build, leaks checked
	$(MAKE) BUILD=build-asan SAN=asan TEST_HOOKS=1 build-asan/cserve
	CSERVE_BIN=build-asan/cserve ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:fast_unwind_on_malloc=0:malloc_context_size=256 \
	  LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp:print_suppressions=0 \
	  $(PYTHON) -m pytest -q tests/integration

test-tsan: deps-test ## the handoffs and a short load run under TSan
	$(MAKE) BUILD=build-tsan SAN=tsan TEST_HOOKS=1 build-tsan/cserve handoff-test-tsan
	CSERVE_BIN=build-tsan/cserve TSAN_OPTIONS=halt_on_error=1 \
	  $(PYTHON) -m pytest -q tests/integration -k load

# cserve on a free-threaded CPython (PEP 703; docs/python.md): the
# interpreter from scripts/build-freethreaded-python.sh (built once, 7 to 14
# min on 2 cores; nothing if FT_PREFIX has it), build-ft/cserve against it,
# and the integration tests against it (~6 min). The tests run on
# /usr/bin/python3 (they are clients); the apps run on the embedded 3.13t,
# which has no Flask or Django, and the venv and deploy tests expect the
# cserve of the tests' own Python: those are left out, as are the reload
# and knob tests (processes, signals, the loop's timing: no Python of their
# own), and the cycle-collection test, whose bound assumes the GIL build's
# collector thresholds (3.13t collects later).
#
# Then the bridge's tests under TSan, built against the same interpreter.
# That libpython is not instrumented, so TSan does not see its locks: the
# critical sections that serialise a request's wsgi.input and write() across
# the app's threads (test_app_threads) would all be reported, and are left
# out of that run; what it checks is the state the pool threads share
# without them (the HTTP_* key cache, the environ template).
FT_PREFIX ?= /opt/cserve-py313t
FT_PYTHON := $(FT_PREFIX)/bin/python3.13t
FT_PYTEST_ARGS ?= tests/integration --ignore=tests/integration/test_flask.py \
  --ignore=tests/integration/test_deploy_python.py --ignore=tests/integration/test_reload.py \
  --ignore=tests/integration/test_knobs.py \
  -k 'not django and not virtualenv and not reference_cycles'
FT_TSAN_TESTS ?= test_freethreaded test_wsgi test_bridge_refs
test-freethreaded: deps-test ## build a free-threaded CPython 3.13 if needed, and the tests on it
	scripts/build-freethreaded-python.sh $(FT_PREFIX)
	$(MAKE) BUILD=build-ft PYTHON=$(FT_PYTHON) TEST_HOOKS=1 build-ft/cserve
	CSERVE_BIN=build-ft/cserve /usr/bin/python3 -m pytest -q $(FT_PYTEST_ARGS)
	$(MAKE) BUILD=build-ft-tsan SAN=tsan PYTHON=$(FT_PYTHON) TEST_HOOKS=1 build-ft-tsan/cserve
	CSERVE_BIN=build-ft-tsan/cserve TSAN_OPTIONS=halt_on_error=1:suppressions=$(CURDIR)/tests/tsan-freethreaded.supp \
	  /usr/bin/python3 -m pytest -q $(FT_TSAN_TESTS:%=tests/integration/%.py)

# Long load and fault runs: the long forms of the load and fault tests (10^6
# requests per backend, 2000 rounds per vanishing client), then a timed run
# per backend watching RSS and fds for drift (SOAK_MINUTES each).
SOAK_MINUTES ?= 2
soak: deps-test ## long load and fault runs watching RSS and descriptors (SOAK_MINUTES)
	$(MAKE) all
	CSERVE_BIN=./cserve $(PYTHON) tests/soak.py --minutes $(SOAK_MINUTES)

# The full run (~40-45 min on a 2-vCPU guest; a clean tree, a quiet machine):
# every sweep with interleaved repeats, open-loop, start-up/stop, the
# scheduler trace, the simulation, then tables, figures and numbers.
EXP_OUT       ?= experiments/results/full
EXP_QUICK_OUT ?= $(or $(TMPDIR),/tmp)/cserve-experiments-quick-$(notdir $(CURDIR))
experiments: deps-experiments ## the full sweep into EXP_OUT, then the paper (most of an hour)
	$(MAKE) all
	$(MAKE) BUILD=build-noinst INSTRUMENTS=0 build-noinst/cserve
	PYTHON=$(PYTHON) experiments/full.sh $(EXP_OUT)
	$(if $(filter experiments/results/full,$(EXP_OUT)),$(PYTHON) -m experiments.paper --pdf --readme)

# The cheap pipelining client of the loop-bound experiments (no Python, no
# Lua): experiments/loadgen/pipeload.c, always into build/ (the harness runs
# it from there whatever BUILD the server is built in).
build/pipeload: experiments/loadgen/pipeload.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -O2 -o $@ $< -lpthread -lm

# The plumbing end to end in a scratch folder (~2 min; part of make test).
experiments-quick: all ## the experiments' plumbing end to end, tiny, in a scratch folder
	PYTHON=$(PYTHON) experiments/full.sh --quick $(EXP_QUICK_OUT)

# The prose-numbers test and the harness's own tests (pure Python, seconds;
# the placement tests run ./cserve and wrk for a few, so the server is built
# first: on a fresh clone they would otherwise find no binary).
experiments-test: all ## the harness's own tests and the prose-numbers check
	$(PYTHON) -m pytest -q experiments/tests

# The side-by-side bench (~5 min; run it on a quiet machine): ring vs the
# other handoffs, native-hello and Granian; PASS/FAIL per goal. BENCH_ARGS:
# e.g. --quick (smoke), --baseline-bin OLD_CSERVE.
BENCH_ARGS ?=
bench: deps-experiments ## the handoffs side by side and the bench's goals (BENCH_ARGS=--quick: smoke)
	$(MAKE) all
	$(PYTHON) -m experiments.bench $(BENCH_ARGS)

# On-CPU profiles reduced to µs per request per thread (perf, cpu-clock),
# into /tmp/cserve-profile-{ring,dgram}/report.md: a look at this checkout,
# not a record (the full run's are experiments/results/full/profile-*.md).
profile: deps-experiments ## on-CPU profiles of ring and dgram, per request per thread
	$(MAKE) all
	for h in ring dgram; do scripts/profile.sh -d 5 -c 64 -o /tmp/cserve-profile-$$h -- --handoff $$h || exit 1; \
	  echo "profile: /tmp/cserve-profile-$$h/report.md"; done

# paper/paper.out.md, paper/paper.pdf (not committed: this builds it) and
# the headline results block in docs/results.md, from
# experiments/results/full (experiments/paper.py; paper/ holds the sources).
paper: deps-paper ## build paper/paper.out.md, paper/paper.pdf and docs/results.md's headline block
	$(PYTHON) -m experiments.paper --pdf --readme

# Every build folder (build/, and build-*/ of each BUILD, sanitizer, fuzzer
# and other Python) and the binary.
clean: ## remove every build folder and ./cserve
	rm -rf build $(wildcard build-*/) cserve cserve.tmp
