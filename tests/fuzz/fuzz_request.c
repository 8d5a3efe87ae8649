/* fuzz_request.c — the request head, its framing and its target on arbitrary
 * bytes. Beyond "no crash": the returned length stays inside the input and
 * max_head, every view lies inside the head, re-parsing exactly the head gives
 * the same views, shorter prefixes are PARTIAL (or the same error), and the
 * statuses are the documented ones. */
#include "../../core/http/http_parser.h"
#include "fuzz_check.h"

#include <string.h>

#define MAX_HEAD 2048

static void check_views(const struct http_request *req, const char *buf, size_t n)
{
    FUZZ_ASSERT(req->method_len > 0 && fuzz_inside(req->method, req->method_len, buf, n));
    FUZZ_ASSERT(req->target_len > 0 && fuzz_inside(req->target, req->target_len, buf, n));
    FUZZ_ASSERT(req->minor_version == 0 || req->minor_version == 1);
    FUZZ_ASSERT(req->num_headers <= HTTP_MAX_HEADERS);
    for (size_t i = 0; i < req->num_headers; i++) {
        const struct http_header *h = &req->headers[i];
        FUZZ_ASSERT(h->name_len > 0 && fuzz_inside(h->name, h->name_len, buf, n));
        FUZZ_ASSERT(fuzz_inside(h->value, h->value_len, buf, n));
        /* trimmed: no OWS at either end */
        if (h->value_len) {
            FUZZ_ASSERT(h->value[0] != ' ' && h->value[0] != '\t');
            FUZZ_ASSERT(h->value[h->value_len - 1] != ' ' && h->value[h->value_len - 1] != '\t');
        }
        for (size_t k = 0; k < h->value_len; k++)
            FUZZ_ASSERT(h->value[k] != '\r' && h->value[k] != '\n' && h->value[k] != '\0');
    }
}

static void check_framing_and_target(const struct http_request *req, const char *buf, size_t n)
{
    struct http_framing f;
    int st = http_request_framing(req, &f);
    FUZZ_ASSERT(st == 0 || st == 400 || st == 417 || st == 501);
    if (st == 0) {
        FUZZ_ASSERT(f.body == HTTP_BODY_NONE || f.body == HTTP_BODY_LENGTH ||
                    f.body == HTTP_BODY_CHUNKED);
        FUZZ_ASSERT((f.body == HTTP_BODY_LENGTH) == (f.content_length > 0));
        FUZZ_ASSERT(f.content_length <= UINT64_C(0x7fffffffffffffff));
        FUZZ_ASSERT(f.body != HTTP_BODY_CHUNKED || req->minor_version == 1);
        FUZZ_ASSERT(f.host != NULL || req->minor_version == 0);
        if (f.host) FUZZ_ASSERT(fuzz_inside(f.host, f.host_len, buf, n));
        /* a framed Host is host[:port]: nothing that ends an authority or
         * that an app could mistake for more than a host */
        static const char not_host[] = "/?#@\"<>\\^`{|}";
        for (size_t i = 0; f.host && i < f.host_len; i++) {
            unsigned char c = (unsigned char)f.host[i];
            FUZZ_ASSERT(c > 0x20 && c < 0x7f && !memchr(not_host, c, sizeof not_host - 1));
        }
    }

    struct http_target t;
    st = http_split_target(req->method, req->method_len, req->target, req->target_len, &t);
    FUZZ_ASSERT(st == 0 || st == 400);
    if (st != 0) return;
    const int static_root = t.path_len == 1 && t.path[0] == '/' &&
                            !fuzz_inside(t.path, 1, req->target, req->target_len);
    FUZZ_ASSERT(static_root || fuzz_inside(t.path, t.path_len, req->target, req->target_len));
    FUZZ_ASSERT(fuzz_inside(t.query, t.query_len, req->target, req->target_len));
    FUZZ_ASSERT(t.has_query || t.query_len == 0);
    FUZZ_ASSERT(t.path_len > 0 && (t.path[0] == '/' || t.path[0] == '*'));

    char decoded[MAX_HEAD];
    size_t d = http_percent_decode(t.path, t.path_len, decoded);
    FUZZ_ASSERT(d <= t.path_len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = (const char *)data;
    static struct http_request req, again;
    int status = 0, status2 = 0;
    int r = http_parse_request(buf, size, MAX_HEAD, &req, &status);
    uint64_t seed = fuzz_hash(FUZZ_HASH_INIT, data, size) | 1;

    if (r == HTTP_PARTIAL) {
        FUZZ_ASSERT(size < MAX_HEAD);
        return 0;
    }
    if (r == HTTP_ERROR) {
        FUZZ_ASSERT(status == 400 || status == 414 || status == 431 || status == 505);
        FUZZ_ASSERT(status != 414 || size >= MAX_HEAD); /* only a line cut by max_head */
        /* any prefix: still waiting, or already the same error */
        size_t k = size ? (size_t)(fuzz_next(&seed) % size) : 0;
        int rp = http_parse_request(buf, k, MAX_HEAD, &again, &status2);
        FUZZ_ASSERT(rp == HTTP_PARTIAL || (rp == HTTP_ERROR && status2 == status));
        return 0;
    }

    size_t n = (size_t)r;
    FUZZ_ASSERT(r > 0 && n <= size && n <= MAX_HEAD);
    FUZZ_ASSERT(n >= 4 && memcmp(buf + n - 4, "\r\n\r\n", 4) == 0); /* line end + empty line */
    check_views(&req, buf, n);

    /* exactly the head: the same head, the same views */
    int r2 = http_parse_request(buf, n, MAX_HEAD, &again, &status2);
    FUZZ_ASSERT(r2 == r && again.num_headers == req.num_headers);
    FUZZ_ASSERT(again.method == req.method && again.target == req.target);
    for (size_t i = 0; i < req.num_headers; i++)
        FUZZ_ASSERT(again.headers[i].value == req.headers[i].value &&
                    again.headers[i].value_len == req.headers[i].value_len);

    /* one byte short, and a data-derived prefix: PARTIAL */
    FUZZ_ASSERT(http_parse_request(buf, n - 1, MAX_HEAD, &again, &status2) == HTTP_PARTIAL);
    size_t k = (size_t)(fuzz_next(&seed) % n);
    FUZZ_ASSERT(http_parse_request(buf, k, MAX_HEAD, &again, &status2) == HTTP_PARTIAL);

    check_framing_and_target(&req, buf, n);
    return 0;
}
