/* test_http_host.c — http_host_valid: which Host values and authorities are
 * uri-host [":" port] (RFC 9110 §7.2, RFC 3986 §3.2.2) and which are a 400,
 * and that framing and the target split refuse the invalid ones. */
#include "../../core/http/http_parser.h"
#include "check.h"

#include <string.h>

static const char *const valid[] = {
    "",                        /* a target without an authority */
    "localhost",
    "localhost:8000",
    "example.com",
    "Example.COM.",            /* a trailing dot, any case */
    "127.0.0.1",
    "127.0.0.1:80",
    "1.2.3.999",               /* not an IPv4address, but a reg-name */
    "a-b_c~d",
    "x!$&'()*+,;=y",           /* sub-delims */
    "caf%C3%A9.example",       /* pct-encoded */
    "host:",                   /* port = *DIGIT: empty */
    "host:0",
    "host:65535",
    "host:00080",
    "[::1]",
    "[::1]:8080",
    "[2001:db8::17]",
    "[::ffff:192.0.2.1]:443",
    "[v1.fe80::a+en1]",        /* IPvFuture */
    "[V7.x:y]",
};

static const char *const invalid[] = {
    "a b",                     /* a space inside */
    "a\tb",
    "evil.example/x?y@z",      /* a path, a query, userinfo */
    "a\"<b>",
    "user@host",
    "host/",
    "host?",
    "host#",
    "host\\x",
    "ho%st",                   /* '%' not followed by two hex digits */
    "host%4",
    "host%",
    "host:80a",
    "host:65536",
    "host:99999999999999999999",
    "host:80:81",
    "host:-1",
    ":80",                     /* a port without a host */
    ":",
    "[::1",                    /* an unclosed IP-literal */
    "::1",                     /* IPv6 without brackets */
    "[]",
    "[::1]x",
    "[::1]:x",
    "[::g]",
    "[fe80::1%25eth0]",        /* zone IDs are not in an http URI */
    "[1.2.3.4]",
    "[v.x]",                   /* IPvFuture needs its hex version */
    "[v1.]",
    "[v1x]",
    "[::1]]",
    "a{b}",
    "a|b",
    "a^b",
    "a`b",
    "a<b",
    "\x7f",
    "caf\xc3\xa9.example",     /* raw UTF-8: only %XX in a reg-name */
};

static void check_table(void)
{
    for (size_t i = 0; i < sizeof valid / sizeof *valid; i++)
        CHECK(http_host_valid(valid[i], strlen(valid[i])), "'%s' is valid", valid[i]);
    for (size_t i = 0; i < sizeof invalid / sizeof *invalid; i++)
        CHECK(!http_host_valid(invalid[i], strlen(invalid[i])), "'%s' is invalid", invalid[i]);
    /* a NUL inside a view is no host byte */
    CHECK(!http_host_valid("a\0b", 3), "a NUL is invalid");
    /* the length, not a terminator, bounds the view */
    CHECK(http_host_valid("host:80/x", 7), "a view stops at its length");
    CHECK(!http_host_valid("[::1]", 4), "a view that cuts the bracket off");
}

/* The Host field through the head parser and http_request_framing. */
static void check_framing(void)
{
    static const struct {
        const char *host;
        int status;
    } cases[] = {
        {"a b", 400}, {"evil.example/x?y@z", 400}, {"a\"<b>", 400}, {"localhost:8000", 0},
        {"[::1]:80", 0}, {":80", 400}, {"", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char head[256];
        int n = snprintf(head, sizeof head, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", cases[i].host);
        struct http_request req;
        struct http_framing f;
        int status = 0;
        CHECK(http_parse_request(head, (size_t)n, 8192, &req, &status) == n, "Host '%s': head parses",
              cases[i].host);
        CHECK(http_request_framing(&req, &f) == cases[i].status, "Host '%s': framing gives %d",
              cases[i].host, cases[i].status);
    }
    /* An absolute-form target overrides Host, but an invalid Host is still
     * a 400 (RFC 9112 §3.2: "any request message ... with an invalid field
     * value"). */
    static const char abs_bad_host[] = "GET http://a.example/ HTTP/1.1\r\nHost: a b\r\n\r\n";
    struct http_request req;
    struct http_framing f;
    int status = 0;
    int n = http_parse_request(abs_bad_host, sizeof abs_bad_host - 1, 8192, &req, &status);
    CHECK(n > 0 && http_request_framing(&req, &f) == 400, "an invalid Host beside an absolute target");
}

/* The authority of an absolute-form target through http_split_target. */
static void check_authority(void)
{
    static const struct {
        const char *target;
        int status;
    } cases[] = {
        {"http://a\"<b>/", 400},
        {"http://a b/", 400},      /* (the head parser refuses the space first) */
        {"http://a%zz/", 400},
        {"http://host:99999/", 400},
        {"http://:80/", 400},
        {"http://[::1/", 400},
        {"http://u:p@host/", 400},
        {"http://host:8080/p", 0},
        {"http://[::1]:8080/p", 0},
        {"https://xn--caf-dma.example/", 0},
        {"http://host:/", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct http_target t;
        int r = http_split_target("GET", 3, cases[i].target, strlen(cases[i].target), &t);
        CHECK(r == cases[i].status, "target '%s': %d, want %d", cases[i].target, r, cases[i].status);
    }
}

int main(void)
{
    check_table();
    check_framing();
    check_authority();
    return check_summary();
}
