/* conn_harness.h — the real connection code (core/conn/conn*.c) driven without a
 * socket, for the fuzzers and the corpus test. The input stream arrives in
 * pieces, each followed by a readable event; writes accept a data-derived
 * number of bytes and sometimes block until a writable event; the stream
 * ends with the peer's EOF. The app is a stand-in (conn_app.h) run the way
 * --inline runs one, or on a stand-in pool through the job protocol's
 * messages, between loop passes: it answers 200 with the body's length and
 * hash, so every framing decision shows in the bytes out.
 *
 * Checked on every run, both ways: responses come in request order, one per
 * request the app ran (X-Seq counts 0, 1, 2, ...) unless the connection
 * closes; nothing follows a response that says Connection: close; every
 * response written, the loop's own errors too, reaches the response hooks
 * (the access log, the metrics) with the status it sent, in order; nothing
 * is left with the app and every job is back on the free list at the end.
 *
 * What comes back: the response bytes (interim "100 Continue" left out and
 * counted: whether it is sent depends on how the stream was split), their
 * statuses, and whether the server had decided to close before the stream
 * ended. */
#ifndef CSERVE_CONN_HARNESS_H
#define CSERVE_CONN_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HARNESS_KEEP_STATUSES 16

/* How the run goes. */
struct harness_config {
    size_t max_piece; /* the largest piece the stream arrives in (0: all at once) */
    size_t max_write; /* the most bytes one write takes (0: all) */
    size_t max_head;  /* --max-header-size */
    bool pool;        /* the app on the stand-in pool, not inline */
    unsigned capacity;/* pool: jobs the one pool thread may hold */
    bool drop;        /* pool: the connection may time out while the app holds jobs */
};

struct harness_result {
    uint64_t out_hash;  /* every response byte, interim 100s left out */
    uint64_t out_len;
    unsigned responses;
    int statuses[HARNESS_KEEP_STATUSES];
    unsigned continues; /* interim 100 Continue responses */
    bool closed_early;  /* the server closed (or was closing) before the peer's EOF */
    bool closing_seen;  /* a response said Connection: close */
    bool body_error;    /* pool: the app met a body error (inline: the loop answers those) */
    bool dropped;       /* the connection timed out on purpose (cfg.drop) */
    unsigned app_runs;
};

/* Run one connection over data; seed drives every choice (pieces, writes,
 * the pool's schedule). */
void harness_run(const uint8_t *data, size_t size, uint64_t seed,
                 const struct harness_config *cfg, struct harness_result *r);

/* How many of a pipeline's requests go to the app at once, on a pool of
 * one thread measured at pace_ns, slow_ns its slow side (dispatch.h), that
 * runs another connection's request, just started, with others jobs
 * outstanding in all: one connection, one request of it already answered,
 * sends n more (n < 64) in one piece, and the count is taken before any of
 * them has run. The run then ends as harness_run's do, every check
 * included. */
unsigned harness_pipeline_bound(uint64_t pace_ns, uint64_t slow_ns, unsigned others, unsigned n);
/* The worker's cap on pipelined jobs (loop.piped.most) in the runs that
 * follow; 0: none, as before the first call. */
void harness_set_pipe_most(unsigned most);

/* How many of a connection's two pipelined requests the app runs when the
 * loop stops (SIGTERM, as loop_stop marks it) with the first answered and
 * the second parked for the one pool thread, busy with another
 * connection's request: in the pass where that request's completion frees
 * the thread (loop.c: the signal's events, then the completions, then the
 * retries, then the stop's sweep) when thread_frees_first, else after the
 * sweep. The run then ends as harness_run's do, every check included. */
unsigned harness_stop_pipelined(bool thread_frees_first);

#endif
