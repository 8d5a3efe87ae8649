# cserve — build, test, measure.
#
#   make               build ./cserve (release, jemalloc)
#   make run           build and serve apps/hello.py on 127.0.0.1:8000 (ring handoff)
#   make test          everything a submission must pass (installs missing packages first)
#   make test-long     the checks too long for make test (the model's exhaustive searches); CI runs them
#   make test-asan     the integration suite against an ASan+UBSan build
#   make test-tsan     the handoffs and a short load run under TSan
#   make test-freethreaded  build a free-threaded CPython 3.13 if needed, and the Python-facing tests on it
#   make deps          install the Debian/PyPI packages the build, tests and experiments need
#   make bench         the handoffs side by side, and the bench's goals (BENCH_ARGS=--quick: smoke)
#   make micro | micro-record | loop-floor | stress | fuzz | soak | experiments | paper
#
# Knobs: PYTHON=/usr/bin/python3 (the CPython to embed; any >= 3.9, e.g. PYTHON=python3.12),
#        PYTHON_PC (a pkg-config name to take its flags from instead),
#        PYTHON_LINK=auto|static|shared (how libpython is linked: auto = as PYTHON's own executable links it),
#        ALLOC=jemalloc|libc (libc when jemalloc's dev files are missing), OPT=-O2, INSTRUMENTS=1|0 (compile the counters out with 0).

# Which CPython to embed (docs/python.md): PYTHON, asked where its
# installation lives. The tests and experiments run on it too. The system
# python3 keeps its pkg-config file; any other interpreter (pyenv, a venv's
# python, python3.12) gives its flags through its own pythonX.Y-config --embed,
# or its python-X.Y-embed.pc when there is no -config script.
PYTHON     ?= /usr/bin/python3
PYTHON_PC  ?= $(if $(filter /usr/bin/python3,$(PYTHON)),python3-embed)
PYTHON_LINK ?= auto
ALLOC      ?= jemalloc
OPT        ?= -O2
INSTRUMENTS ?= 1
SAN        ?=
BUILD      ?= build

# The probe also says whether PYTHON's own executable has libpython mapped
# (it runs with a shared one), where the static archive is, if there is one,
# and (last, as they are several words) the libraries the archive needs.
PY_PROBE  := $(shell $(PYTHON) -c 'import os, sys, sysconfig as s; g = s.get_config_var; \
  a = os.path.join(g("LIBPL") or "", g("LIBRARY") or ""); \
  mapped = any("/libpython" in l for l in open("/proc/self/maps")); \
  print(sys.base_prefix, "%d.%d" % sys.version_info[:2], g("BINDIR"), g("LIBDIR"), g("Py_ENABLE_SHARED") or 0, \
        int(mapped), a if a.endswith(".a") and os.path.isfile(a) else "-", \
        " ".join(g(k) or "" for k in ("LIBS", "SYSLIBS", "MODLIBS")))' 2>/dev/null)
PY_HOME   := $(word 1,$(PY_PROBE))
PY_VER    := $(word 2,$(PY_PROBE))
PY_BINDIR := $(word 3,$(PY_PROBE))
PY_LIBDIR := $(word 4,$(PY_PROBE))
PY_SHARED := $(word 5,$(PY_PROBE))
PY_EXE_SHARED := $(word 6,$(PY_PROBE))
PY_ARCHIVE := $(filter-out -,$(word 7,$(PY_PROBE)))
PY_ARCHIVE_LIBS := $(wordlist 8,$(words $(PY_PROBE)),$(PY_PROBE))
# A free-threaded build (PEP 703, "3.13t") names its executable, its
# -config script, its pkg-config file and its library directory with the ABI
# flag "t" (python3.13t, lib/python3.13t): PY_VERT is PY_VER with that flag,
# and the standard library directory is taken as the interpreter says, not
# composed. For a GIL build they are what they always were (python3.11,
# PREFIX/lib/python3.11).
PY_PROBE_FT := $(shell $(PYTHON) -c 'import sysconfig as s; \
  print("t" if s.get_config_var("Py_GIL_DISABLED") else "-", s.get_path("stdlib"))' 2>/dev/null)
PY_ABI_THREAD := $(filter-out -,$(word 1,$(PY_PROBE_FT)))
PY_STDLIB := $(word 2,$(PY_PROBE_FT))
PY_VERT   := $(PY_VER)$(PY_ABI_THREAD)
PY_CONFIG := $(wildcard $(PY_BINDIR)/python$(PY_VERT)-config)
ifneq ($(PYTHON_PC),)
  PY_CFLAGS := $(shell pkg-config --cflags $(PYTHON_PC) 2>/dev/null)
  PY_LIBS   := $(shell pkg-config --libs $(PYTHON_PC) 2>/dev/null)
else ifneq ($(PY_CONFIG),)
  PY_CFLAGS := $(shell $(PY_CONFIG) --includes)
  PY_LIBS   := $(shell $(PY_CONFIG) --embed --ldflags)
else
  PY_CFLAGS := $(shell PKG_CONFIG_PATH=$(PY_LIBDIR)/pkgconfig pkg-config --cflags python-$(PY_VERT)-embed 2>/dev/null)
  PY_LIBS   := $(shell PKG_CONFIG_PATH=$(PY_LIBDIR)/pkgconfig pkg-config --libs python-$(PY_VERT)-embed 2>/dev/null)
endif
# Static or shared libpython (docs/python.md). A distribution may build
# its interpreter twice: Debian's /usr/bin/python3.11 is linked with a static
# libpython compiled with profile-guided optimisation (libpython3.11.a holds
# the same objects, without the LTO of python3's own link), and the shared
# libpython3.11.so (what -lpython3.11 finds) without it; Python code runs
# measurably slower on the shared one. So auto embeds the interpreter the way
# PYTHON's own executable does: the archive if that executable has no shared
# libpython mapped and the archive is installed, else the shared library.
# Sanitizer builds keep the shared library (TSan needs a PIE executable).
ifeq ($(PYTHON_LINK),auto)
  PY_LINK := $(if $(and $(PY_ARCHIVE),$(filter 0,$(PY_EXE_SHARED)),$(if $(SAN),,1)),static,shared)
else ifeq ($(PYTHON_LINK),static)
  PY_LINK := static
  $(if $(PY_ARCHIVE),,$(error PYTHON_LINK=static: $(PYTHON) has no static libpython installed (sysconfig LIBPL/LIBRARY)))
  $(if $(SAN),$(error PYTHON_LINK=static with SAN=$(SAN): a sanitizer build links the shared libpython))
else ifeq ($(PYTHON_LINK),shared)
  PY_LINK := shared
else
  $(error PYTHON_LINK must be auto, static or shared, not '$(PYTHON_LINK)')
endif
# -lpythonX.Y of an installation without a shared libpython would find the
# archive, and the binary would not be what --version says.
$(if $(and $(filter shared,$(PY_LINK)),$(filter 0,$(PY_SHARED))),$(error $(PYTHON) has no shared libpython \
  (built without --enable-shared): build with PYTHON_LINK=static, and without SAN))
PY_LINK_FLAGS :=
PY_LINK_DEPS  :=
ifeq ($(PY_LINK),static)
  # The archive's objects are not position-independent (Debian's are not),
  # so the executable is not either, as Debian's python3 is not; and the
  # archive needs the libraries its built-in modules use (zlib, expat). The
  # binary holds the interpreter, so it is relinked when the archive changes.
  PY_LIBS   := $(PY_ARCHIVE) $(PY_ARCHIVE_LIBS)
  PY_LINK_FLAGS := -no-pie
  PY_LINK_DEPS  := $(PY_ARCHIVE)
endif
# A libpython outside the linker's default directories (pyenv, /opt) is found
# at run time through an rpath; an executable holding libpython must export
# its symbols so the C extension modules it loads (_ssl, numpy) can link
# against them.
# (A shared link implies a shared libpython: an installation without one is refused above.)
PY_LIBS   += $(if $(filter shared,$(PY_LINK)),$(if $(filter /usr/lib% /lib%,$(PY_LIBDIR)),,-Wl,-rpath,$(PY_LIBDIR)))
PY_LIBS   += -Wl,--export-dynamic
# cserve starts that installation by its own prefix, whatever PATH holds.
PY_DEFS   := -DCSERVE_PYTHON_HOME='"$(PY_HOME)"' -DCSERVE_PYTHON_EXE='"$(PY_BINDIR)/python$(PY_VERT)"' \
             -DCSERVE_PYTHON_STDLIB='"$(PY_STDLIB)"' -DCSERVE_PYTHON_LIBNAME='"python$(PY_VERT)"'

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
  HAVE_JEMALLOC := $(shell printf '\043include <jemalloc/jemalloc.h>\nint main(void){return 0;}\n' | \
                     $(CC) -x c - -ljemalloc -o /dev/null 2>/dev/null && echo 1)
  ifeq ($(HAVE_JEMALLOC),1)
    LDLIBS  += -ljemalloc
  else
    $(info cserve: jemalloc's development files are missing (Debian: libjemalloc-dev); linking the C library's malloc instead (ALLOC=libc))
    ALLOC := libc
  endif
endif
# Objects remember which Python they were compiled for: another PYTHON in the
# same BUILD directory rebuilds everything instead of mixing headers.
PY_STAMP := $(BUILD)/python.stamp
PY_STAMP_TEXT := $(PYTHON) $(PY_HOME) $(PY_CFLAGS) $(PY_LIBS) $(PY_LINK) $(ALLOC)
$(shell mkdir -p $(BUILD) && (echo '$(PY_STAMP_TEXT)' | cmp -s - $(PY_STAMP) || echo '$(PY_STAMP_TEXT)' > $(PY_STAMP)))

.DEFAULT_GOAL := all
include handoffs/handoffs.mk
include tests/parser.mk

CORE_SRCS := $(wildcard core/*/*.c)
SRCS      := $(CORE_SRCS) $(HANDOFF_SRCS)
OBJS      := $(SRCS:%.c=$(BUILD)/%.o)

.PHONY: all run test test-long test-asan test-tsan test-freethreaded deps integration-test soak experiments experiments-quick experiments-test \
        profile paper clean bench layering

all: cserve build/pipeload

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

deps:
	scripts/setup.sh

# deps first, then a fresh make: the Makefile's pkg-config look-ups must see
# the python3-dev that deps may just have installed.
run: deps
	$(MAKE) all
	./cserve --handoff=ring

# The integration suite, against every handoff backend. With pytest-xdist
# (scripts/setup.sh installs it) on TEST_JOBS workers, each taking whole
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
integration-test: all
	CSERVE_PYTHON_LINK=$(PYTHON_LINK) $(PYTHON) -m pytest -q $(PYTEST_JOBS) $(INTEGRATION_MODULES)

# core/conn/jobs.c's reset of a recycled job, checked field by field (ASan+UBSan);
# runs with the parser's unit tests.
build/unit/jobs_clear: tests/unit/jobs_clear.c tests/unit/check.h core/conn/jobs.c core/http/buffer.c \
		core/python/job.h core/conn/loop.h core/http/http_parser.h
	@mkdir -p $(dir $@)
	$(CC) $(UNIT_CFLAGS) -o $@ tests/unit/jobs_clear.c core/conn/jobs.c core/http/buffer.c

unit-test: build/unit/jobs_clear

# The declared dependency graph (scripts/layering.py: which folder may
# include which, no include cycle between files, which Python folder may
# import which); one line per violation.
layering:
	/usr/bin/python3 scripts/layering.py

# make test: the builds (the server, the handoffs' test binaries) and the
# checks whose verdict does not depend on timing side by side (two at a time; -O keeps each one's output
# together), then the handoffs' tests and the mutants (the litmus and batch
# tests time their threads), then the integration suite, whose timeouts
# are measured in wall time. scripts/time-make-test.sh times it and records
# the time.
test: deps
	$(MAKE) -j2 -O all layering unit-test fuzz-short experiments-test experiments-quick $(HANDOFF_TEST_BINS)
	$(MAKE) handoff-test mutants
	$(MAKE) integration-test

# What make test leaves out for its length, CI runs: the searches of every
# interleaving of the ring's protocol model (handoffs/tests/check_model.sh).
test-long: deps
	$(MAKE) handoff-model-long

test-asan: deps
	$(MAKE) BUILD=build-asan SAN=asan build-asan/cserve
	CSERVE_BIN=build-asan/cserve ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:fast_unwind_on_malloc=0:malloc_context_size=256 \
	  LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp:print_suppressions=0 \
	  $(PYTHON) -m pytest -q tests/integration

test-tsan: deps
	$(MAKE) BUILD=build-tsan SAN=tsan build-tsan/cserve handoff-test-tsan
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
test-freethreaded:
	scripts/build-freethreaded-python.sh $(FT_PREFIX)
	$(MAKE) BUILD=build-ft PYTHON=$(FT_PYTHON) build-ft/cserve
	CSERVE_BIN=build-ft/cserve /usr/bin/python3 -m pytest -q $(FT_PYTEST_ARGS)
	$(MAKE) BUILD=build-ft-tsan SAN=tsan PYTHON=$(FT_PYTHON) build-ft-tsan/cserve
	CSERVE_BIN=build-ft-tsan/cserve TSAN_OPTIONS=halt_on_error=1:suppressions=$(CURDIR)/tests/tsan-freethreaded.supp \
	  /usr/bin/python3 -m pytest -q $(FT_TSAN_TESTS:%=tests/integration/%.py)

# Long load and fault runs: the long forms of the load and fault tests (10^6
# requests per backend, 2000 rounds per vanishing client), then a timed run
# per backend watching RSS and fds for drift (SOAK_MINUTES each).
SOAK_MINUTES ?= 2
soak: deps
	$(MAKE) all
	CSERVE_BIN=./cserve $(PYTHON) tests/soak.py --minutes $(SOAK_MINUTES)

# The full run (~40-45 min on a 2-vCPU guest; a clean tree, a quiet machine):
# every sweep with interleaved repeats, open-loop, start-up/stop, the
# scheduler trace, the simulation, then tables, figures and numbers.
EXP_OUT       ?= experiments/results/full
EXP_QUICK_OUT ?= $(or $(TMPDIR),/tmp)/cserve-experiments-quick-$(notdir $(CURDIR))
experiments: deps
	scripts/setup-experiments.sh
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
experiments-quick: all
	PYTHON=$(PYTHON) experiments/full.sh --quick $(EXP_QUICK_OUT)

# The prose-numbers test and the harness's own tests (pure Python, seconds;
# the placement tests run ./cserve and wrk for a few, so the server is built
# first: on a fresh clone they would otherwise find no binary).
experiments-test: all
	$(PYTHON) -m pytest -q experiments/tests

# The side-by-side bench (~5 min; run it on a quiet machine): ring vs the
# other handoffs, native-hello and Granian; PASS/FAIL per goal. BENCH_ARGS:
# e.g. --quick (smoke), --baseline-bin OLD_CSERVE.
BENCH_ARGS ?=
bench: deps
	$(MAKE) all
	$(PYTHON) -m experiments.bench $(BENCH_ARGS)

# On-CPU profiles reduced to µs per request per thread (perf, cpu-clock),
# into /tmp/cserve-profile-{ring,dgram}/report.md: a look at this checkout,
# not a record (the full run's are experiments/results/full/profile-*.md).
profile: deps
	$(MAKE) all
	for h in ring dgram; do scripts/profile.sh -d 5 -c 64 -o /tmp/cserve-profile-$$h -- --handoff $$h || exit 1; \
	  echo "profile: /tmp/cserve-profile-$$h/report.md"; done

# paper/paper.out.md, paper/paper.pdf and README.md's generated results section,
# from experiments/results/full (experiments/paper.py; paper/ holds the sources).
paper:
	scripts/setup-experiments.sh
	$(PYTHON) -m experiments.paper --pdf --readme

clean:
	rm -rf build build-asan build-tsan build-fuzz build-other-python build-ft build-ft-tsan cserve
