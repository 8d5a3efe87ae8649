/* test_http_parser.c — http_parse_request: valid heads with their parsed
 * fields (whole, at every split point, with pipelined bytes behind), invalid
 * heads with their status, and the size limits. */
#include "../../core/http/http_chars.h"
#include "../../core/http/http_parser.h"
#include "check.h"

#include <stdlib.h>
#include <string.h>

#define MAX_HEAD 8192
/* A string literal with its length, so cases may hold NUL bytes. */
#define S(lit) lit, sizeof(lit) - 1

struct valid_case {
    const char *name;
    const char *raw;
    size_t raw_len;
    const char *method, *target;
    int minor;
    size_t num_headers;
    const char *headers[4][2]; /* the first few, name and value */
};

static const struct valid_case valid_cases[] = {
    {"simple GET", S("GET / HTTP/1.1\r\nHost: example.com\r\n\r\n"), "GET", "/", 1, 1,
     {{"Host", "example.com"}}},
    {"HTTP/1.0, no fields", S("GET /index.html HTTP/1.0\r\n\r\n"), "GET", "/index.html", 0, 0,
     {{0}}},
    {"leading empty lines skipped", S("\r\n\r\nPOST /p?q=1 HTTP/1.1\r\nHost: h\r\n\r\n"), "POST",
     "/p?q=1", 1, 1, {{"Host", "h"}}},
    {"OWS trimmed, inner spaces kept", S("GET / HTTP/1.1\r\nX-A:  a b \t\r\nX-B:\tc\r\n\r\n"),
     "GET", "/", 1, 2, {{"X-A", "a b"}, {"X-B", "c"}}},
    {"empty values", S("GET / HTTP/1.1\r\nX-Empty:\r\nX-Blank:   \r\n\r\n"), "GET", "/", 1, 2,
     {{"X-Empty", ""}, {"X-Blank", ""}}},
    {"obs-text in value and target", S("GET /caf\xc3\xa9 HTTP/1.1\r\nX: \xff\x80\r\n\r\n"), "GET",
     "/caf\xc3\xa9", 1, 1, {{"X", "\xff\x80"}}},
    {"absolute-form", S("GET http://example.com:8080/a/b?c HTTP/1.1\r\nHost: example.com\r\n\r\n"),
     "GET", "http://example.com:8080/a/b?c", 1, 1, {{"Host", "example.com"}}},
    {"asterisk-form", S("OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n"), "OPTIONS", "*", 1, 1,
     {{"Host", "h"}}},
    {"token method and names with specials", S("M-SEARCH /x HTTP/1.1\r\nX!#$%&'*+-.^_`|~1: v\r\n\r\n"),
     "M-SEARCH", "/x", 1, 1, {{"X!#$%&'*+-.^_`|~1", "v"}}},
    {"long target and value (SIMD blocks + tails)",
     S("GET /aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa?b=cccccccccccccccccc HTTP/1.1\r\n"
       "User-Agent: Mozilla/5.0 (X11; Linux x86_64)\tGecko/20100101 Firefox/120.0   \r\n\r\n"),
     "GET", "/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa?b=cccccccccccccccccc", 1, 1,
     {{"User-Agent", "Mozilla/5.0 (X11; Linux x86_64)\tGecko/20100101 Firefox/120.0"}}},
    {"value with colons", S("GET / HTTP/1.1\r\nHost: [::1]:8000\r\n\r\n"), "GET", "/", 1, 1,
     {{"Host", "[::1]:8000"}}},
};

static bool view_is(const char *p, size_t n, const char *want)
{
    return n == strlen(want) && memcmp(p, want, n) == 0;
}

static void check_valid(const struct valid_case *c)
{
    struct http_request req;
    int status = 0;
    int r = http_parse_request(c->raw, c->raw_len, MAX_HEAD, &req, &status);
    CHECK(r == (int)c->raw_len, "%s: returned %d, want %zu", c->name, r, c->raw_len);
    if (r != (int)c->raw_len) return;
    CHECK(view_is(req.method, req.method_len, c->method), "%s: method", c->name);
    CHECK(view_is(req.target, req.target_len, c->target), "%s: target", c->name);
    CHECK(req.minor_version == c->minor, "%s: minor %d", c->name, req.minor_version);
    CHECK(req.num_headers == c->num_headers, "%s: %zu headers", c->name, req.num_headers);
    for (size_t i = 0; i < c->num_headers && i < 4; i++) {
        const struct http_header *h = &req.headers[i];
        CHECK(view_is(h->name, h->name_len, c->headers[i][0]), "%s: header %zu name", c->name, i);
        CHECK(view_is(h->value, h->value_len, c->headers[i][1]), "%s: header %zu value '%.*s'",
              c->name, i, (int)h->value_len, h->value);
    }

    /* Every proper prefix is PARTIAL (copied to an exact-size heap block so
     * ASan catches any read past the prefix). */
    int bad_prefix = -1;
    for (size_t k = 0; k < c->raw_len; k++) {
        char *pre = malloc(k ? k : 1);
        memcpy(pre, c->raw, k);
        int pr = http_parse_request(pre, k, MAX_HEAD, &req, &status);
        free(pre);
        if (pr != HTTP_PARTIAL && bad_prefix < 0) bad_prefix = (int)k;
    }
    CHECK(bad_prefix < 0, "%s: prefix of %d bytes is not PARTIAL", c->name, bad_prefix);

    /* A pipelined request behind it does not change the head's length. */
    char both[1024];
    static const char next[] = "GET /next HTTP/1.1\r\nHost: h\r\n\r\n";
    memcpy(both, c->raw, c->raw_len);
    memcpy(both + c->raw_len, next, sizeof next - 1);
    r = http_parse_request(both, c->raw_len + sizeof next - 1, MAX_HEAD, &req, &status);
    CHECK(r == (int)c->raw_len, "%s: with a pipelined request returned %d", c->name, r);
}

struct invalid_case {
    const char *name;
    const char *raw;
    size_t raw_len;
    int status;
};

static const struct invalid_case invalid_cases[] = {
    {"two spaces after method", S("GET  / HTTP/1.1\r\n\r\n"), 400},
    {"two spaces before version", S("GET /  HTTP/1.1\r\n\r\n"), 400},
    {"tab as separator", S("GET\t/ HTTP/1.1\r\n\r\n"), 400},
    {"leading space", S(" GET / HTTP/1.1\r\n\r\n"), 400},
    {"empty method", S(" / HTTP/1.1\r\n\r\n"), 400},
    {"non-token method", S("G@T / HTTP/1.1\r\n\r\n"), 400},
    {"missing version", S("GET /\r\n\r\n"), 400},
    {"missing target", S("GET HTTP/1.1\r\n\r\n"), 400},
    {"tab in target", S("GET /a\tb HTTP/1.1\r\n\r\n"), 400},
    {"NUL in target", S("GET /a\0b HTTP/1.1\r\n\r\n"), 400},
    {"DEL in target", S("GET /a\x7f HTTP/1.1\r\n\r\n"), 400},
    {"bare LF ends request-line", S("GET / HTTP/1.1\nHost: h\r\n\r\n"), 400},
    {"bare CR in request-line", S("GET /\r HTTP/1.1\r\n\r\n"), 400},
    {"bare CR after version", S("GET / HTTP/1.1\rHost: h\r\n\r\n"), 400},
    {"bare LF leading line", S("\nGET / HTTP/1.1\r\n\r\n"), 400},
    {"bare CR leading line", S("\r\rGET / HTTP/1.1\r\n\r\n"), 400},
    {"bare LF ends a field", S("GET / HTTP/1.1\r\nHost: h\nX: y\r\n\r\n"), 400},
    {"bare CR in a value", S("GET / HTTP/1.1\r\nX: a\rb\r\n\r\n"), 400},
    {"bare LF ends the head", S("GET / HTTP/1.1\r\nHost: h\r\n\n"), 400},
    {"CR CR ends the head", S("GET / HTTP/1.1\r\nHost: h\r\n\r\r\n"), 400},
    {"space before colon", S("GET / HTTP/1.1\r\nHost : h\r\n\r\n"), 400},
    {"tab before colon", S("GET / HTTP/1.1\r\nTransfer-Encoding\t: chunked\r\n\r\n"), 400},
    {"empty field name", S("GET / HTTP/1.1\r\n: v\r\n\r\n"), 400},
    {"no colon", S("GET / HTTP/1.1\r\nHost\r\n\r\n"), 400},
    {"non-token name", S("GET / HTTP/1.1\r\nX(y): v\r\n\r\n"), 400},
    {"obs-fold", S("GET / HTTP/1.1\r\nX: a\r\n b\r\n\r\n"), 400},
    {"obs-fold with tab", S("GET / HTTP/1.1\r\nX: a\r\n\tb\r\n\r\n"), 400},
    {"whitespace before the first field", S("GET / HTTP/1.1\r\n Host: h\r\n\r\n"), 400},
    {"NUL in value", S("GET / HTTP/1.1\r\nX: a\0b\r\n\r\n"), 400},
    {"control byte in value", S("GET / HTTP/1.1\r\nX: a\x01b\r\n\r\n"), 400},
    {"vertical tab in value", S("GET / HTTP/1.1\r\nTransfer-Encoding: \x0b" "chunked\r\n\r\n"), 400},
    {"DEL in value", S("GET / HTTP/1.1\r\nX: a\x7f\r\n\r\n"), 400},
    {"NUL in name", S("GET / HTTP/1.1\r\nX\0: v\r\n\r\n"), 400},
    {"lower-case version", S("GET / http/1.1\r\n\r\n"), 400},
    {"HTTP/1.10", S("GET / HTTP/1.10\r\n\r\n"), 400},
    {"HTTP/1", S("GET / HTTP/1\r\n\r\n"), 400},
    {"HTTP/1.x", S("GET / HTTP/1.x\r\n\r\n"), 400},
    {"trailing space after version", S("GET / HTTP/1.1 \r\n\r\n"), 400},
    {"HTTP/1.1 with suffix", S("GET / HTTP/1.1x\r\n\r\n"), 400},
    {"HTTP/2.0", S("GET / HTTP/2.0\r\n\r\n"), 505},
    {"HTTP/1.2", S("GET / HTTP/1.2\r\n\r\n"), 505},
    {"HTTP/3", S("GET / HTTP/3\r\n\r\n"), 505},
    {"HTTP/0.9", S("GET / HTTP/0.9\r\n\r\n"), 505},
};

/* The error status, and PARTIAL (never anything else) for every prefix. */
static void check_invalid(const struct invalid_case *c)
{
    struct http_request req;
    int status = 0;
    int r = http_parse_request(c->raw, c->raw_len, MAX_HEAD, &req, &status);
    CHECK(r == HTTP_ERROR && status == c->status, "%s: returned %d status %d, want %d", c->name,
          r, status, c->status);
    int odd_prefix = -1;
    for (size_t k = 0; k < c->raw_len; k++) {
        status = 0;
        r = http_parse_request(c->raw, k, MAX_HEAD, &req, &status);
        bool consistent = r == HTTP_PARTIAL || (r == HTTP_ERROR && status == c->status);
        if (!consistent && odd_prefix < 0) odd_prefix = (int)k;
    }
    CHECK(odd_prefix < 0, "%s: prefix of %d bytes gives another verdict", c->name, odd_prefix);
}

/* Builds "GET /<target_len a's> HTTP/1.1\r\n" + fields + "\r\n" into buf. */
static size_t build_request(char *buf, size_t target_len, size_t num_fields, size_t value_len)
{
    size_t n = 0;
    n += (size_t)sprintf(buf + n, "GET /");
    memset(buf + n, 'a', target_len);
    n += target_len;
    n += (size_t)sprintf(buf + n, " HTTP/1.1\r\n");
    for (size_t i = 0; i < num_fields; i++) {
        n += (size_t)sprintf(buf + n, "X-%zu: ", i);
        memset(buf + n, 'v', value_len);
        n += value_len;
        n += (size_t)sprintf(buf + n, "\r\n");
    }
    n += (size_t)sprintf(buf + n, "\r\n");
    return n;
}

static void check_limits(void)
{
    static char buf[65536];
    struct http_request req;
    int status;
    size_t n;

    n = build_request(buf, 9000, 1, 3);
    status = 0;
    CHECK(http_parse_request(buf, n, MAX_HEAD, &req, &status) == HTTP_ERROR && status == 414,
          "long request-line: status %d", status);
    status = 0;
    CHECK(http_parse_request(buf, MAX_HEAD, MAX_HEAD, &req, &status) == HTTP_ERROR && status == 414,
          "long request-line cut at max_head: status %d", status);
    CHECK(http_parse_request(buf, MAX_HEAD - 1, MAX_HEAD, &req, &status) == HTTP_PARTIAL,
          "long request-line one byte under max_head is PARTIAL");

    n = build_request(buf, 10, 200, 60);
    status = 0;
    CHECK(http_parse_request(buf, n, MAX_HEAD, &req, &status) == HTTP_ERROR && status == 431,
          "long header block: status %d", status);

    n = build_request(buf, 10, 101, 1);
    status = 0;
    CHECK(n < MAX_HEAD, "101 small fields fit in max_head");
    CHECK(http_parse_request(buf, n, MAX_HEAD, &req, &status) == HTTP_ERROR && status == 431,
          "101 fields: status %d", status);
    n = build_request(buf, 10, HTTP_MAX_HEADERS, 1);
    int r = http_parse_request(buf, n, MAX_HEAD, &req, &status);
    CHECK(r == (int)n && req.num_headers == HTTP_MAX_HEADERS, "exactly %d fields: %d",
          HTTP_MAX_HEADERS, r);

    /* The limit is on the head: a head of exactly max_head bytes is fine, one
     * byte over is 431, even when the whole head is in the buffer. */
    n = build_request(buf, 10, 1, 100);
    r = http_parse_request(buf, n, n, &req, &status);
    CHECK(r == (int)n, "head of exactly max_head bytes: %d", r);
    status = 0;
    r = http_parse_request(buf, n, n - 1, &req, &status);
    CHECK(r == HTTP_ERROR && status == 431, "head one byte over max_head: %d/%d", r, status);

    /* Endless empty lines before the request-line are bounded too. */
    for (size_t i = 0; i < MAX_HEAD; i += 2) memcpy(buf + i, "\r\n", 2);
    status = 0;
    r = http_parse_request(buf, MAX_HEAD, MAX_HEAD, &req, &status);
    CHECK(r == HTTP_ERROR && status == 414, "max_head of empty lines: %d/%d", r, status);
}

/* Views must point into the caller's buffer, not at copies. */
static void check_views_are_zero_copy(void)
{
    static const char raw[] = "PUT /x HTTP/1.1\r\nA: b\r\n\r\n";
    struct http_request req;
    int status;
    CHECK(http_parse_request(raw, sizeof raw - 1, MAX_HEAD, &req, &status) > 0, "parses");
    CHECK(req.method == raw && req.target == raw + 4 && req.headers[0].name == raw + 17 &&
              req.headers[0].value == raw + 20,
          "views point into the buffer");
}

/* Every byte value at every position of a 16-byte scanner step (and in the
 * tail after the last step) of a long target and a long field value: the
 * head parses exactly when the byte class allows the byte there, and a
 * value keeps it. Both builds run this (build/unit: the table loops;
 * build/unit/simd: the SSE2 steps), so the two scanners are held to the
 * same byte classes. */
static void check_every_byte_at_every_lane(void)
{
    enum { LEN = 40 }; /* two steps and a tail */
    for (int pos = 0; pos < LEN; pos++) {
        for (int b = 0; b < 256; b++) {
            char fill[LEN];
            memset(fill, 'a', LEN);
            fill[pos] = (char)b;
            char buf[256];
            struct http_request req;
            int status = 0;

            /* in a field value (not first or last: OWS is trimmed there) */
            static const char pre[] = "GET / HTTP/1.1\r\nX: v", post[] = "v\r\n\r\n";
            size_t len = 0;
            memcpy(buf, pre, sizeof pre - 1);
            len += sizeof pre - 1;
            memcpy(buf + len, fill, LEN);
            len += LEN;
            memcpy(buf + len, post, sizeof post - 1);
            len += sizeof post - 1;
            int r = http_parse_request(buf, len, MAX_HEAD, &req, &status);
            bool want = http_field_vchar[b];
            CHECK(want ? r == (int)len : r == HTTP_ERROR && status == 400,
                  "value byte 0x%02x at %d: %d/%d", b, pos, r, status);
            if (want && r == (int)len)
                CHECK(req.headers[0].value_len == LEN + 2 && (unsigned char)req.headers[0].value[1 + pos] == b,
                      "value byte 0x%02x at %d kept", b, pos);

            /* in the request-target */
            size_t tl = 5;
            memcpy(buf, "GET /", 5);
            memcpy(buf + tl, fill, LEN);
            tl += LEN;
            static const char version[] = " HTTP/1.1\r\n\r\n";
            memcpy(buf + tl, version, sizeof version - 1);
            tl += sizeof version - 1;
            status = 0;
            r = http_parse_request(buf, tl, MAX_HEAD, &req, &status);
            want = http_target_char[b];
            CHECK(want ? r == (int)tl && req.target_len == LEN + 1 : r == HTTP_ERROR,
                  "target byte 0x%02x at %d: %d/%d", b, pos, r, status);
        }
    }
}

int main(void)
{
    for (size_t i = 0; i < sizeof valid_cases / sizeof *valid_cases; i++)
        check_valid(&valid_cases[i]);
    for (size_t i = 0; i < sizeof invalid_cases / sizeof *invalid_cases; i++)
        check_invalid(&invalid_cases[i]);
    check_limits();
    check_views_are_zero_copy();
    check_every_byte_at_every_lane();
    return check_summary();
}
