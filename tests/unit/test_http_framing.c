/* test_http_framing.c — http_request_framing and http_token_eq: how each
 * request is framed, which smuggling shapes are refused and with what. */
#include "../../core/http/http_parser.h"
#include "check.h"

#include <string.h>

enum { NONE = HTTP_BODY_NONE, LEN = HTTP_BODY_LENGTH, CHUNKED = HTTP_BODY_CHUNKED };

struct framing_case {
    const char *name;
    const char *head;
    int status;        /* 0: framed */
    int body;          /* checked when status is 0 */
    uint64_t length;
    bool keep_alive;
    bool expect_continue;
};

/* The fields a refused case leaves unchecked. */
#define REFUSED NONE, 0, false, false
#define H11 "POST / HTTP/1.1\r\nHost: h\r\n"
#define H10 "POST / HTTP/1.0\r\n"

static const struct framing_case cases[] = {
    /* plain framing */
    {"no body", H11 "\r\n", 0, NONE, 0, true, false},
    {"content-length", H11 "Content-Length: 42\r\n\r\n", 0, LEN, 42, true, false},
    {"content-length zero is no body", H11 "Content-Length: 0\r\n\r\n", 0, NONE, 0, true, false},
    {"leading zeros", H11 "Content-Length: 007\r\n\r\n", 0, LEN, 7, true, false},
    {"largest length", H11 "Content-Length: 9223372036854775807\r\n\r\n", 0, LEN,
     UINT64_C(9223372036854775807), true, false},
    {"identical duplicates", H11 "Content-Length: 5\r\nContent-Length: 5\r\n\r\n", 0, LEN, 5,
     true, false},
    {"identical list members", H11 "Content-Length: 5, 5,5\r\n\r\n", 0, LEN, 5, true, false},
    {"chunked", H11 "Transfer-Encoding: chunked\r\n\r\n", 0, CHUNKED, 0, true, false},
    {"Chunked (case-insensitive)", H11 "Transfer-Encoding: ChUnKeD\r\n\r\n", 0, CHUNKED, 0, true,
     false},
    {"chunked with OWS", H11 "Transfer-Encoding:\tchunked \r\n\r\n", 0, CHUNKED, 0, true, false},
    /* Content-Length errors */
    {"differing duplicates", H11 "Content-Length: 5\r\nContent-Length: 6\r\n\r\n", 400, REFUSED},
    {"differing list members", H11 "Content-Length: 5, 6\r\n\r\n", 400, REFUSED},
    {"empty list member", H11 "Content-Length: 5,\r\n\r\n", 400, REFUSED},
    {"empty value", H11 "Content-Length:\r\n\r\n", 400, REFUSED},
    {"plus sign", H11 "Content-Length: +5\r\n\r\n", 400, REFUSED},
    {"minus sign", H11 "Content-Length: -5\r\n\r\n", 400, REFUSED},
    {"space inside", H11 "Content-Length: 1 2\r\n\r\n", 400, REFUSED},
    {"hex", H11 "Content-Length: 0x10\r\n\r\n", 400, REFUSED},
    {"2^63", H11 "Content-Length: 9223372036854775808\r\n\r\n", 400, REFUSED},
    {"2^64 wraps to 0", H11 "Content-Length: 18446744073709551616\r\n\r\n", 400, REFUSED},
    /* Transfer-Encoding errors */
    {"CL then TE", H11 "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 400, REFUSED},
    {"TE then CL", H11 "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", 400, REFUSED},
    {"TE with CL 0", H11 "Transfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n", 400, REFUSED},
    {"chunked then gzip", H11 "Transfer-Encoding: chunked, gzip\r\n\r\n", 400, REFUSED},
    {"gzip alone", H11 "Transfer-Encoding: gzip\r\n\r\n", 400, REFUSED},
    {"chunked twice in a list", H11 "Transfer-Encoding: chunked, chunked\r\n\r\n", 400, REFUSED},
    {"chunked twice in two lines",
     H11 "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 400, REFUSED},
    {"chunked line then gzip line",
     H11 "Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n", 400, REFUSED},
    {"x-chunked", H11 "Transfer-Encoding: x-chunked\r\n\r\n", 400, REFUSED},
    {"chunked with a parameter", H11 "Transfer-Encoding: chunked;q=1\r\n\r\n", 400, REFUSED},
    {"empty TE", H11 "Transfer-Encoding:\r\n\r\n", 400, REFUSED},
    {"empty TE member", H11 "Transfer-Encoding: ,chunked\r\n\r\n", 400, REFUSED},
    {"quoted chunked", H11 "Transfer-Encoding: \"chunked\"\r\n\r\n", 400, REFUSED},
    {"TE in HTTP/1.0", H10 "Transfer-Encoding: chunked\r\n\r\n", 400, REFUSED},
    {"gzip, chunked", H11 "Transfer-Encoding: gzip, chunked\r\n\r\n", 501, REFUSED},
    {"gzip line then chunked line",
     H11 "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n", 501, REFUSED},
    {"deflate, chunked", H11 "Transfer-Encoding: deflate,chunked\r\n\r\n", 501, REFUSED},
    /* Host */
    {"HTTP/1.1 without Host", "GET / HTTP/1.1\r\n\r\n", 400, REFUSED},
    {"two Hosts", H11 "Host: h\r\n\r\n", 400, REFUSED},
    {"two Hosts in HTTP/1.0", H10 "Host: a\r\nHost: b\r\n\r\n", 400, REFUSED},
    {"HTTP/1.0 without Host", H10 "\r\n", 0, NONE, 0, false, false},
    {"empty Host", "GET / HTTP/1.1\r\nHost:\r\n\r\n", 0, NONE, 0, true, false},
    /* Connection */
    {"close", H11 "Connection: close\r\n\r\n", 0, NONE, 0, false, false},
    {"Close in a list", H11 "Connection: upgrade, CLOSE\r\n\r\n", 0, NONE, 0, false, false},
    {"close in a second line", H11 "Connection: foo\r\nConnection: close\r\n\r\n", 0, NONE, 0,
     false, false},
    {"closed is not close", H11 "Connection: closed\r\n\r\n", 0, NONE, 0, true, false},
    {"1.0 keep-alive", H10 "Connection: Keep-Alive\r\n\r\n", 0, NONE, 0, true, false},
    {"1.0 keep-alive and close", H10 "Connection: keep-alive, close\r\n\r\n", 0, NONE, 0, false,
     false},
    /* Expect */
    {"100-continue", H11 "Expect: 100-continue\r\nContent-Length: 3\r\n\r\n", 0, LEN, 3, true,
     true},
    {"100-Continue", H11 "Expect: 100-Continue\r\n\r\n", 0, NONE, 0, true, true},
    {"100-continue ignored in 1.0", H10 "Expect: 100-continue\r\n\r\n", 0, NONE, 0, false, false},
    {"other expectation", H11 "Expect: 200-ok\r\n\r\n", 417, REFUSED},
    {"100-continue plus another", H11 "Expect: 100-continue, x\r\n\r\n", 417, REFUSED},
    {"empty Expect", H11 "Expect:\r\n\r\n", 417, REFUSED},
    /* framing errors outrank the rest */
    {"bad CL outranks Expect", H11 "Expect: x\r\nContent-Length: -1\r\n\r\n", 400, REFUSED},
    {"bad TE outranks a missing Host",
     "GET / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked, gzip\r\n\r\n", 400, REFUSED},
};

static void check_case(const struct framing_case *c)
{
    struct http_request req;
    struct http_framing f;
    int status = 0;
    size_t len = strlen(c->head);
    int r = http_parse_request(c->head, len, 8192, &req, &status);
    CHECK(r == (int)len, "%s: head parses (%d, status %d)", c->name, r, status);
    if (r != (int)len) return;
    int got = http_request_framing(&req, &f);
    CHECK(got == c->status, "%s: framing returned %d, want %d", c->name, got, c->status);
    if (got != 0 || c->status != 0) return;
    CHECK((int)f.body == c->body, "%s: body kind %d, want %d", c->name, (int)f.body, c->body);
    CHECK(f.content_length == c->length, "%s: length %llu", c->name,
          (unsigned long long)f.content_length);
    CHECK(f.keep_alive == c->keep_alive, "%s: keep_alive %d", c->name, f.keep_alive);
    CHECK(f.expect_continue == c->expect_continue, "%s: expect_continue %d", c->name,
          f.expect_continue);
}

static void check_host_view(void)
{
    static const char head[] = "GET / HTTP/1.1\r\nhOsT:  example.com:80 \r\n\r\n";
    struct http_request req;
    struct http_framing f;
    int status;
    CHECK(http_parse_request(head, sizeof head - 1, 8192, &req, &status) > 0, "host head parses");
    CHECK(http_request_framing(&req, &f) == 0, "host head frames");
    CHECK(f.host == head + 23 && f.host_len == 14, "host is a view of the trimmed value");
}

static void check_token_eq(void)
{
    CHECK(http_token_eq("Chunked", 7, "chunked"), "mixed case matches");
    CHECK(http_token_eq("CHUNKED", 7, "chunked"), "upper case matches");
    CHECK(!http_token_eq("chunke", 6, "chunked"), "prefix does not match");
    CHECK(!http_token_eq("chunkeds", 8, "chunked"), "longer does not match");
    CHECK(!http_token_eq("chunked", 7, "chunkeds"), "shorter literal does not match");
    CHECK(http_token_eq("", 0, ""), "empty matches empty");
    /* 0xC3 | 0x20 is not 'c': only A-Z fold */
    CHECK(!http_token_eq("\xc3hunked", 7, "chunked"), "non-ASCII does not fold");
    CHECK(!http_token_eq("chunked\0", 8, "chunked"), "an embedded NUL is not the end");
}

int main(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_case(&cases[i]);
    check_host_view();
    check_token_eq();
    return check_summary();
}
