/* fuzz_connection.c — a whole connection as a server runs it (conn_model.h):
 * pipelined requests, bodies by Content-Length or chunked, bounded buffers,
 * every event logged. Feeding the same
 * stream whole, byte by byte or in data-derived pieces must give the same
 * log: how TCP splits a stream must never change how it is framed. */
#include "conn_model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t seed = fuzz_hash(FUZZ_HASH_INIT, data, size) | 1;
    struct conn *whole = conn_run(data, size, seed, 0);
    size_t ways[3] = {1, 2 + (size_t)(fuzz_next(&seed) % 7), 1 + (size_t)(fuzz_next(&seed) % 300)};
    /* byte by byte re-parses the head per byte: keep it to short inputs */
    for (size_t w = size <= 512 ? 0 : 1; w < 3; w++) {
        struct conn *split = conn_run(data, size, seed, ways[w]);
        FUZZ_ASSERT(split->events == whole->events);
        FUZZ_ASSERT(split->log_hash == whole->log_hash);
        free(split);
    }
    free(whole);
    return 0;
}
