/* fuzz_chunked.c — a differential check of the chunked decoder: the same
 * bytes decoded in one call, in data-derived pieces into small output
 * buffers, and in place must give the same data, the same number of bytes
 * consumed and the same verdict. */
#include "../../core/http/http_parser.h"
#include "fuzz_check.h"

#include <string.h>

struct outcome {
    int result; /* 1 done, 0 wants more, HTTP_ERROR */
    int status;
    size_t consumed;
    size_t data_len;
    uint64_t data_hash;
};

/* One call with room for everything (the decoder never writes more than it
 * reads). out may be in (in place). */
static struct outcome decode_whole(const char *in, size_t len, char *out)
{
    struct http_chunked d;
    struct outcome o = {0, 0, 0, 0, FUZZ_HASH_INIT};
    http_chunked_init(&d);
    size_t got = 0;
    o.result = http_chunked_decode(&d, in, len, &o.consumed, out, len, &got, &o.status);
    FUZZ_ASSERT(o.consumed <= len && got <= o.consumed);
    o.data_len = got;
    o.data_hash = fuzz_hash(o.data_hash, out, got);
    if (o.result != HTTP_ERROR) o.status = 0;
    return o;
}

/* Pieces of 1..max_piece bytes, each in an exact-size copy, and an output
 * buffer of out_cap bytes, both data-derived. */
static struct outcome decode_pieces(const char *in, size_t len, uint64_t seed, size_t max_piece,
                                    size_t out_cap)
{
    struct http_chunked d;
    struct outcome o = {0, 0, 0, 0, FUZZ_HASH_INIT};
    char out[64];
    http_chunked_init(&d);
    size_t pos = 0;
    while (pos < len && o.result == 0) {
        size_t n = 1 + (size_t)(fuzz_next(&seed) % max_piece);
        if (n > len - pos) n = len - pos;
        char *piece = malloc(n);
        memcpy(piece, in + pos, n);
        size_t off = 0;
        while (o.result == 0 && off < n) {
            size_t used = 0, got = 0;
            o.result = http_chunked_decode(&d, piece + off, n - off, &used, out, out_cap, &got,
                                           &o.status);
            FUZZ_ASSERT(used <= n - off && got <= out_cap);
            /* progress, or a full output buffer waiting for room */
            FUZZ_ASSERT(o.result != 0 || used > 0 || got > 0);
            off += used;
            o.data_len += got;
            o.data_hash = fuzz_hash(o.data_hash, out, got);
        }
        free(piece);
        pos += off;
    }
    o.consumed = pos;
    if (o.result != HTTP_ERROR) o.status = 0;
    return o;
}

static void same(const struct outcome *a, const struct outcome *b)
{
    FUZZ_ASSERT(a->result == b->result);
    FUZZ_ASSERT(a->status == b->status);
    FUZZ_ASSERT(a->consumed == b->consumed);
    FUZZ_ASSERT(a->data_len == b->data_len && a->data_hash == b->data_hash);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *in = (const char *)data;
    char *out = malloc(size ? size : 1);
    struct outcome whole = decode_whole(in, size, out);
    FUZZ_ASSERT(whole.result == 1 || whole.result == HTTP_ERROR || whole.consumed == size);
    FUZZ_ASSERT(whole.result != HTTP_ERROR || whole.status == 400 || whole.status == 431);

    /* in place */
    memcpy(out, in, size);
    struct outcome inplace = decode_whole(out, size, out);
    same(&whole, &inplace);

    uint64_t seed = fuzz_hash(FUZZ_HASH_INIT, data, size) | 1;
    struct outcome bytes = decode_pieces(in, size, seed, 1, 64);
    same(&whole, &bytes);
    size_t out_cap = 1 + (size_t)(fuzz_next(&seed) % 64);
    struct outcome pieces = decode_pieces(in, size, seed, 1 + fuzz_next(&seed) % 32, out_cap);
    same(&whole, &pieces);
    free(out);
    return 0;
}
