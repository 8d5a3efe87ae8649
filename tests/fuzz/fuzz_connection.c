/* fuzz_connection.c — the real connection code (core/conn/conn*.c, jobs.c, job.c,
 * through conn_harness.c): pipelined requests, bodies by Content-Length or
 * chunked, 100-continue, errors and lingering, with ASan and UBSan watching
 * every state change, both with the app inline and on a stand-in pool
 * (conn_app.h) that answers through the job protocol on a data-derived
 * schedule: pipelining, CONN_HOLD's coalescing, need-body, flushes, a full
 * handoff, and (on some inputs) the connection timing out while the app
 * holds its jobs (ORPHAN).
 *
 * Feeding the same stream whole, byte by byte or in data-derived pieces,
 * with writes taken whole or in data-derived bites that sometimes block,
 * must give the same responses: how TCP splits a stream must never change
 * how it is framed. (When the server notices a bad head may depend on the
 * split: it parses when a line ends, and at EOF.) And the pool must give the
 * bytes inline gives, whatever its schedule, unless a body error reached the
 * app (inline, the loop answers those itself). The harness checks the rest
 * on every run (conn_harness.h). */
#include "conn_harness.h"
#include "fuzz_check.h"

#define MAX_HEAD 1024 /* small, so fuzzed inputs reach the limits */

static void same(const struct harness_result *a, const struct harness_result *b)
{
    FUZZ_ASSERT(a->responses == b->responses);
    FUZZ_ASSERT(a->out_len == b->out_len);
    FUZZ_ASSERT(a->out_hash == b->out_hash);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t seed = fuzz_hash(FUZZ_HASH_INIT, data, size) | 1;
    struct harness_result whole, split;
    struct harness_config cfg = {.max_head = MAX_HEAD};
    harness_run(data, size, seed, &cfg, &whole);
    size_t ways[3] = {1, 2 + (size_t)(fuzz_next(&seed) % 7), 1 + (size_t)(fuzz_next(&seed) % 300)};
    /* byte by byte re-parses the head per line: keep it to short inputs */
    for (size_t w = size <= 512 ? 0 : 1; w < 3; w++) {
        cfg.max_piece = ways[w];
        cfg.max_write = 1 + (size_t)(fuzz_next(&seed) % 64);
        harness_run(data, size, seed, &cfg, &split);
        same(&split, &whole);
    }
    /* The pool, on two schedules the input chooses. */
    cfg.pool = true;
    for (int k = 0; k < 2; k++) {
        cfg.capacity = 1 + (unsigned)(fuzz_next(&seed) % 8);
        cfg.max_piece = fuzz_next(&seed) % 2 ? 0 : ways[1 + fuzz_next(&seed) % 2];
        cfg.max_write = fuzz_next(&seed) % 2 ? 0 : 1 + (size_t)(fuzz_next(&seed) % 64);
        harness_run(data, size, fuzz_next(&seed), &cfg, &split);
        if (!split.body_error)
            same(&split, &whole);
    }
    /* And on some inputs the client's connection times out under it. */
    if (fuzz_next(&seed) % 4 == 0) {
        cfg.drop = true;
        harness_run(data, size, seed, &cfg, &split);
    }
    return 0;
}
