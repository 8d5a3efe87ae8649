/* fuzz_connection.c — the real connection code (core/conn*.c, through
 * conn_harness.c): pipelined requests, bodies by Content-Length or chunked,
 * 100-continue, errors and lingering, with ASan and UBSan watching every
 * state change. Feeding the same stream whole, byte by byte or in
 * data-derived pieces, with writes taken whole or in data-derived bites that
 * sometimes block, must give the same responses: how TCP splits a stream
 * must never change how it is framed. (When the server notices a bad head
 * may depend on the split: it parses when a line ends, and at EOF.) */
#include "conn_harness.h"
#include "fuzz_check.h"

#define MAX_HEAD 1024 /* small, so fuzzed inputs reach the limits */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t seed = fuzz_hash(FUZZ_HASH_INIT, data, size) | 1;
    struct harness_result whole, split;
    harness_run(data, size, seed, 0, 0, MAX_HEAD, &whole);
    size_t ways[3] = {1, 2 + (size_t)(fuzz_next(&seed) % 7), 1 + (size_t)(fuzz_next(&seed) % 300)};
    /* byte by byte re-parses the head per line: keep it to short inputs */
    for (size_t w = size <= 512 ? 0 : 1; w < 3; w++) {
        harness_run(data, size, seed, ways[w], 1 + (size_t)(fuzz_next(&seed) % 64), MAX_HEAD, &split);
        FUZZ_ASSERT(split.responses == whole.responses);
        FUZZ_ASSERT(split.out_len == whole.out_len);
        FUZZ_ASSERT(split.out_hash == whole.out_hash);
    }
    return 0;
}
