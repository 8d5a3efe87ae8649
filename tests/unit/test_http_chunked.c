/* test_http_chunked.c — http_chunked_decode: valid bodies give the same data
 * and the same end whether fed whole, byte by byte, in random pieces into
 * small output buffers, or decoded in place; invalid ones give their status
 * however they are fed. */
#include "../../core/http/http_parser.h"
#include "check.h"

#include <stdlib.h>
#include <string.h>

#define S(lit) lit, sizeof(lit) - 1
/* Appended after every valid body: the decoder must stop before it. */
#define NEXT "GET / HTTP/1.1\r\n"

struct valid_case {
    const char *name;
    const char *raw; /* the body, then NEXT */
    size_t raw_len;
    const char *data;
    size_t data_len;
};

static const struct valid_case valid_cases[] = {
    {"empty body", S("0\r\n\r\n" NEXT), S("")},
    {"one chunk", S("5\r\nhello\r\n0\r\n\r\n" NEXT), S("hello")},
    {"two chunks", S("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n" NEXT), S("hello world")},
    {"upper and lower hex", S("A\r\n0123456789\r\na\r\nabcdefghij\r\n0\r\n\r\n" NEXT), S("0123456789abcdefghij")},
    {"leading zeros", S("0005\r\nhello\r\n000\r\n\r\n" NEXT), S("hello")},
    {"extensions", S("5;name=value\r\nhello\r\n3;a;b=\"q d\"\r\nabc\r\n0;last\r\n\r\n" NEXT), S("helloabc")},
    {"whitespace before ';'", S("5 \t;x\r\nhello\r\n0\r\n\r\n" NEXT), S("hello")},
    {"trailers discarded", S("3\r\nabc\r\n0\r\nExpires: never\r\nX-Sum:  1\r\n\r\n" NEXT), S("abc")},
    {"data holding CRLF and digits", S("4\r\n\r\n0\r\r\n0\r\n\r\n" NEXT), S("\r\n0\r")},
    {"binary data", S("3\r\n\0\xff\n\r\n0\r\n\r\n" NEXT), S("\0\xff\n")},
};

/* Feeds raw in pieces of the sizes given by next_piece(), with out_cap as
 * the output room per call. Returns the decoder's last result; *consumed is
 * the total input used, (data, *data_len) what came out. */
struct piece_gen {
    uint32_t seed; /* 0: the whole input at once */
    size_t max;
};

static size_t next_piece(struct piece_gen *g)
{
    if (g->seed == 0) return (size_t)-1;
    g->seed ^= g->seed << 13;
    g->seed ^= g->seed >> 17;
    g->seed ^= g->seed << 5;
    return 1 + g->seed % g->max;
}

static int feed(const char *raw, size_t raw_len, struct piece_gen g, size_t out_cap, char *data,
                size_t *data_len, size_t *consumed, int *status)
{
    struct http_chunked d;
    http_chunked_init(&d);
    size_t pos = 0, produced = 0;
    int r = 0;
    char *out = malloc(out_cap);
    while (pos < raw_len) {
        size_t n = next_piece(&g);
        if (n > raw_len - pos) n = raw_len - pos;
        /* An exact-size copy, so ASan sees any read past the piece. */
        char *piece = malloc(n);
        memcpy(piece, raw + pos, n);
        size_t off = 0;
        for (;;) {
            size_t used = 0, got = 0;
            r = http_chunked_decode(&d, piece + off, n - off, &used, out, out_cap, &got, status);
            memcpy(data + produced, out, got);
            produced += got;
            off += used;
            if (r != 0 || off == n) break;
            if (used == 0 && got == 0) break; /* no progress: a decoder bug */
        }
        free(piece);
        pos += off;
        if (r != 0 || off < n) break;
    }
    free(out);
    *data_len = produced;
    *consumed = pos;
    return r;
}

static void check_valid(const struct valid_case *c)
{
    const size_t want_data = c->data_len;
    const size_t body_len = c->raw_len - (sizeof NEXT - 1);
    static const struct {
        uint32_t seed;
        size_t max, out_cap;
    } ways[] = {{0, 0, 4096}, {1, 1, 4096}, {7, 5, 3}, {99, 9, 1}, {1234, 3, 64}, {555, 17, 7}};

    for (size_t w = 0; w < sizeof ways / sizeof *ways; w++) {
        char data[256];
        size_t data_len, consumed;
        int status = 0;
        struct piece_gen g = {ways[w].seed, ways[w].max};
        int r = feed(c->raw, c->raw_len, g, ways[w].out_cap, data, &data_len, &consumed, &status);
        CHECK(r == 1, "%s (way %zu): result %d status %d", c->name, w, r, status);
        CHECK(consumed == body_len, "%s (way %zu): consumed %zu of %zu", c->name, w, consumed,
              body_len);
        CHECK(data_len == want_data && memcmp(data, c->data, want_data) == 0,
              "%s (way %zu): data '%.*s'", c->name, w, (int)data_len, data);
    }

    /* In place: the data lands at the front of the same buffer. */
    char buf[256];
    memcpy(buf, c->raw, c->raw_len);
    struct http_chunked d;
    size_t used, got;
    int status;
    http_chunked_init(&d);
    int r = http_chunked_decode(&d, buf, c->raw_len, &used, buf, c->raw_len, &got, &status);
    CHECK(r == 1 && used == body_len && got == want_data && memcmp(buf, c->data, got) == 0,
          "%s: in place (r %d, used %zu, got %zu)", c->name, r, used, got);
    CHECK(memcmp(buf + used, NEXT, sizeof NEXT - 1) == 0, "%s: in place leaves the next request",
          c->name);
}

struct invalid_case {
    const char *name;
    const char *raw;
    size_t raw_len;
    int status;
};

static const struct invalid_case invalid_cases[] = {
    {"empty size", S("\r\n"), 400},
    {"plus sign", S("+5\r\nhello\r\n0\r\n\r\n"), 400},
    {"minus sign", S("-5\r\nhello\r\n0\r\n\r\n"), 400},
    {"0x prefix", S("0x5\r\nhello\r\n0\r\n\r\n"), 400},
    {"leading space", S(" 5\r\nhello\r\n0\r\n\r\n"), 400},
    {"space inside", S("1 0\r\n"), 400},
    {"trailing space", S("5 \r\nhello\r\n0\r\n\r\n"), 400},
    {"non-hex", S("5g\r\n"), 400},
    {"2^63", S("8000000000000000\r\n"), 400},
    {"overflow", S("fffffffffffffffff\r\n"), 400},
    {"bare LF after size", S("5\nhello\r\n0\r\n\r\n"), 400},
    {"bare CR after size", S("5\rhello\r\n0\r\n\r\n"), 400},
    {"missing CRLF after data", S("5\r\nhelloX\r\n0\r\n\r\n"), 400},
    {"LF only after data", S("5\r\nhello\n0\r\n\r\n"), 400},
    {"CR only after data", S("5\r\nhello\r0\r\n\r\n"), 400},
    {"data longer than size", S("3\r\nhello\r\n0\r\n\r\n"), 400},
    {"control byte in extension", S("5;a\x01\r\nhello\r\n0\r\n\r\n"), 400},
    {"bare LF in extension", S("5;a\nhello\r\n"), 400},
    {"bare LF ends the body", S("0\r\n\n"), 400},
    {"trailer without colon", S("0\r\nX-Sum\r\n\r\n"), 400},
    {"trailer space before colon", S("0\r\nX-Sum : 1\r\n\r\n"), 400},
    {"trailer obs-fold", S("0\r\nX: 1\r\n 2\r\n\r\n"), 400},
    {"trailer NUL", S("0\r\nX: a\0b\r\n\r\n"), 400},
    {"trailer bare LF", S("0\r\nX: 1\n\r\n"), 400},
};

static void check_invalid(const struct invalid_case *c)
{
    static const struct {
        uint32_t seed;
        size_t max;
    } ways[] = {{0, 0}, {1, 1}, {42, 4}};
    for (size_t w = 0; w < sizeof ways / sizeof *ways; w++) {
        char data[256];
        size_t data_len, consumed;
        int status = 0;
        struct piece_gen g = {ways[w].seed, ways[w].max};
        int r = feed(c->raw, c->raw_len, g, 16, data, &data_len, &consumed, &status);
        CHECK(r == HTTP_ERROR && status == c->status, "%s (way %zu): result %d status %d",
              c->name, w, r, status);
    }
}

/* A size line (or a trailer line) past HTTP_CHUNKED_MAX_LINE is 400; a
 * trailer section past HTTP_CHUNKED_MAX_TRAILERS is 431; just under is fine. */
static void check_limits(void)
{
    static char buf[65536];
    struct http_chunked d;
    size_t used, got, n;
    int status, r;
    char out[16];

    /* "1;" + extension filling the line to exactly the limit: accepted */
    n = 0;
    buf[n++] = '1';
    buf[n++] = ';';
    memset(buf + n, 'x', HTTP_CHUNKED_MAX_LINE - 2);
    n += HTTP_CHUNKED_MAX_LINE - 2;
    memcpy(buf + n, "\r\na\r\n0\r\n\r\n", 10);
    http_chunked_init(&d);
    r = http_chunked_decode(&d, buf, n + 10, &used, out, sizeof out, &got, &status);
    CHECK(r == 1 && got == 1, "size line of exactly the limit: r %d", r);

    buf[2] = 'x';
    memmove(buf + 3, buf + 2, n + 10 - 2); /* one byte longer */
    http_chunked_init(&d);
    status = 0;
    r = http_chunked_decode(&d, buf, n + 11, &used, out, sizeof out, &got, &status);
    CHECK(r == HTTP_ERROR && status == 400, "size line over the limit: r %d status %d", r, status);

    /* Leading zeros count towards the line too: the size cannot spin forever. */
    memset(buf, '0', HTTP_CHUNKED_MAX_LINE + 1);
    http_chunked_init(&d);
    status = 0;
    r = http_chunked_decode(&d, buf, HTTP_CHUNKED_MAX_LINE + 1, &used, out, sizeof out, &got,
                            &status);
    CHECK(r == HTTP_ERROR && status == 400, "endless zeros: r %d status %d", r, status);

    /* Largest size accepted: 2^63 - 1 (the decoder then waits for data). */
    http_chunked_init(&d);
    r = http_chunked_decode(&d, S("7fffffffffffffff\r\nab"), &used, out, sizeof out, &got, &status);
    CHECK(r == 0 && got == 2, "size 2^63-1 accepted: r %d got %zu", r, got);

    /* Trailer section: 200 lines of 100 bytes = 20 000 > 16 384. */
    n = (size_t)sprintf(buf, "0\r\n");
    for (int i = 0; i < 200; i++) {
        n += (size_t)sprintf(buf + n, "X-%03d: ", i);
        memset(buf + n, 'v', 91);
        n += 91;
        n += (size_t)sprintf(buf + n, "\r\n");
    }
    n += (size_t)sprintf(buf + n, "\r\n");
    http_chunked_init(&d);
    status = 0;
    r = http_chunked_decode(&d, buf, n, &used, out, sizeof out, &got, &status);
    CHECK(r == HTTP_ERROR && status == 431, "trailers too long: r %d status %d", r, status);

    /* Errors are sticky. */
    status = 0;
    r = http_chunked_decode(&d, S("0\r\n\r\n"), &used, out, sizeof out, &got, &status);
    CHECK(r == HTTP_ERROR && status == 431, "error stays: r %d status %d", r, status);

    /* A full output buffer stops before the data, without losing input. */
    http_chunked_init(&d);
    r = http_chunked_decode(&d, S("5\r\nhello\r\n0\r\n\r\n"), &used, out, 0, &got, &status);
    CHECK(r == 0 && used == 3 && got == 0, "no room: r %d used %zu", r, used);
}

int main(void)
{
    for (size_t i = 0; i < sizeof valid_cases / sizeof *valid_cases; i++)
        check_valid(&valid_cases[i]);
    for (size_t i = 0; i < sizeof invalid_cases / sizeof *invalid_cases; i++)
        check_invalid(&invalid_cases[i]);
    check_limits();
    return check_summary();
}
