/* conn_harness.h — the real connection code (core/conn*.c) driven without a
 * socket, for the fuzzers and the corpus test. The input stream arrives in
 * pieces, each followed by a readable event; writes accept a data-derived
 * number of bytes and sometimes block until a writable event; the stream
 * ends with the peer's EOF. The app is a stand-in run the way --inline runs
 * one (the body is framed and read before it runs): it answers 200 with the
 * body's length and hash, so every framing decision shows in the bytes out.
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

struct harness_result {
    uint64_t out_hash;  /* every response byte, interim 100s left out */
    uint64_t out_len;
    unsigned responses;
    int statuses[HARNESS_KEEP_STATUSES];
    unsigned continues; /* interim 100 Continue responses */
    bool closed_early;  /* the server closed (or was closing) before the peer's EOF */
};

/* Run one connection over data. max_piece: the largest piece the stream
 * arrives in (0: all at once); max_write: the most bytes one write takes
 * (0: all); seed drives both. max_head: --max-header-size. */
void harness_run(const uint8_t *data, size_t size, uint64_t seed, size_t max_piece,
                 size_t max_write, size_t max_head, struct harness_result *r);

#endif
