# tests/parser.mk — the HTTP parser's unit tests and fuzzers (included by the
# top-level Makefile, which defines CC and CFLAGS_BASE).
#
#   make unit-test                  C unit tests under ASan+UBSan, twice: the
#                                   portable scanners and (x86-64) the SSE2 ones
#   make fuzz-short                 every fuzzer for FUZZ_SHORT_SECONDS (5)
#   make fuzz FUZZ_SECONDS=N        every fuzzer for N seconds (60)

# Included before the top-level Makefile's "all": keep our targets from
# becoming the default goal (restored at the end of this file).
PARSER_MK_SAVED_GOAL := $(.DEFAULT_GOAL)

PARSER_SRCS := core/http/http_parser.c core/http/http_framing.c core/http/http_target.c \
               core/http/http_chunked.c core/http/http_chars.c core/http/http_host.c
PARSER_HDRS := core/http/http_parser.h core/http/http_chars.h

# The real connection code without its system calls, for the connection
# fuzzer and the corpus test: tests/fuzz/conn_harness.c stands in for
# core/conn/conn_io.c and the loop, tests/fuzz/conn_app.c for the app and the pool.
CONN_SRCS := core/conn/conn.c core/conn/conn_state.c core/conn/dispatch.c core/conn/conn_request.c core/conn/conn_body.c \
             core/conn/conn_write.c core/conn/jobs.c core/conn/native_hello.c \
             core/python/job.c core/http/buffer.c core/http/response_head.c core/http/http_forwarded.c core/http/ip_allow.c \
             core/base/log.c tests/fuzz/conn_harness.c tests/fuzz/conn_app.c
CONN_HDRS := $(wildcard core/conn/*.h core/python/job.h core/http/buffer.h) \
             tests/fuzz/conn_harness.h tests/fuzz/conn_app.h
# Which test and fuzzer link them.
CONN_USERS := test_http_corpus test_conn_pipeline test_conn_stop fuzz_connection
uses_conn = $(if $(filter $(1),$(CONN_USERS)),$(CONN_SRCS))

UNIT_TESTS     := $(patsubst tests/unit/%.c,%,$(wildcard tests/unit/test_*.c))
UNIT_CFLAGS    := $(CFLAGS_BASE) -O1 -fsanitize=address,undefined -fno-sanitize-recover=undefined
# $(BUILD)/unit/: the portable scanners (CSERVE_NO_SIMD); $(BUILD)/unit/simd/:
# the SSE2 ones the server is built with on x86-64.
UNIT_BINS      := $(UNIT_TESTS:%=$(BUILD)/unit/%)
HAVE_SSE2      := $(shell $(CC) -dM -E - </dev/null 2>/dev/null | grep -q __SSE2__ && echo 1)
UNIT_BINS_SIMD := $(if $(HAVE_SSE2),$(UNIT_TESTS:%=$(BUILD)/unit/simd/%))

FUZZ_CC      ?= clang
FUZZ_CFLAGS  := -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined \
                -fno-sanitize-recover=undefined -Wall -Wextra -Werror -Wshadow \
                -Wstrict-prototypes -Wmissing-prototypes
FUZZ_TARGETS := fuzz_request fuzz_chunked fuzz_connection
FUZZ_BINS    := $(FUZZ_TARGETS:%=build-fuzz/%)
FUZZ_SECONDS ?= 60
FUZZ_SHORT_SECONDS ?= 5

.PHONY: unit-test fuzz-short fuzz fuzz-build

.SECONDEXPANSION:
$(BUILD)/unit/%: tests/unit/%.c tests/unit/check.h $(wildcard tests/fuzz/*.h) $(PARSER_SRCS) $(PARSER_HDRS) \
              $$(call uses_conn,%) $(CONN_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(UNIT_CFLAGS) -DCSERVE_NO_SIMD -o $@ $< $(PARSER_SRCS) $(call uses_conn,$*) -lpthread

$(BUILD)/unit/simd/%: tests/unit/%.c tests/unit/check.h $(wildcard tests/fuzz/*.h) $(PARSER_SRCS) $(PARSER_HDRS) \
                    $$(call uses_conn,%) $(CONN_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(UNIT_CFLAGS) -o $@ $< $(PARSER_SRCS) $(call uses_conn,$*) -lpthread

# test_verdict.c builds core/metrics/verdict.c in (#include): a change there
# must rebuild it.
$(BUILD)/unit/test_verdict $(BUILD)/unit/simd/test_verdict: core/metrics/verdict.c core/metrics/verdict.h
# test_sizing_rule.c builds --blocking-threads auto's rule and the verdict in.
$(BUILD)/unit/test_sizing_rule $(BUILD)/unit/simd/test_sizing_rule: core/services/sizing_rule.c \
    core/services/sizing_rule.h core/metrics/verdict.c core/metrics/verdict.h

# test_dispatch.c builds the dispatcher (core/conn/dispatch.c) in.
$(BUILD)/unit/test_dispatch $(BUILD)/unit/simd/test_dispatch: core/conn/dispatch.c core/conn/dispatch.h

# test_log_stamp.c builds the log (its UTC stamp) in.
$(BUILD)/unit/test_log_stamp $(BUILD)/unit/simd/test_log_stamp: core/base/log.c core/base/log.h

unit-test: $(UNIT_BINS) $(UNIT_BINS_SIMD) ## the C unit tests (parser, job reset, verdict, auto threads, dispatcher, log stamp) under ASan+UBSan
	@set -e; for t in $^; do echo "== $$t"; ./$$t; done

build-fuzz/%: tests/fuzz/%.c $(PARSER_SRCS) $(PARSER_HDRS) $$(call uses_conn,%) $(CONN_HDRS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $< $(PARSER_SRCS) $(call uses_conn,$*) -lpthread

fuzz-build: $(FUZZ_BINS) ## build the fuzzers (clang, libFuzzer)

# Each run starts from the committed seeds and keeps what it finds in a
# scratch corpus under build-fuzz/ (the seeds stay clean); a crash leaves its
# input in build-fuzz/ and fails the target.
define run_fuzzer
	@set -e; for t in $(FUZZ_TARGETS); do \
	  mkdir -p build-fuzz/corpus/$$t; \
	  echo "== $$t ($(1) s)"; \
	  ./build-fuzz/$$t -max_total_time=$(1) -print_final_stats=0 \
	    -artifact_prefix=build-fuzz/$$t- build-fuzz/corpus/$$t tests/fuzz/corpus/$$t \
	    2>build-fuzz/$$t.log || { tail -40 build-fuzz/$$t.log; exit 1; }; \
	  grep -E 'DONE' build-fuzz/$$t.log | tail -1; \
	done
endef

fuzz-short: $(FUZZ_BINS) ## every fuzzer for FUZZ_SHORT_SECONDS (part of make test)
	$(call run_fuzzer,$(FUZZ_SHORT_SECONDS))

fuzz: $(FUZZ_BINS) ## every fuzzer for FUZZ_SECONDS
	$(call run_fuzzer,$(FUZZ_SECONDS))

# The proxy fields' test includes http_forwarded.c (the unit rule links
# only the parser's files): rebuild it when that file changes.
$(BUILD)/unit/test_http_forwarded $(BUILD)/unit/simd/test_http_forwarded: core/http/http_forwarded.c core/http/ip_allow.c \
    core/http/http_forwarded.h

.DEFAULT_GOAL := $(PARSER_MK_SAVED_GOAL)
