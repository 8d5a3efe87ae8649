/* test_http_target.c — http_split_target (the accepted target forms and the
 * refused ones) and http_percent_decode (including in place). */
#include "../../core/http/http_parser.h"
#include "check.h"

#include <string.h>

struct target_case {
    const char *method, *target;
    int status;
    const char *path, *query; /* query NULL: has_query false */
};

static const struct target_case cases[] = {
    {"GET", "/", 0, "/", NULL},
    {"GET", "/a/b%20c", 0, "/a/b%20c", NULL},
    {"GET", "/p?q=1&r=2", 0, "/p", "q=1&r=2"},
    {"GET", "/p?", 0, "/p", ""},
    {"GET", "/p?a?b", 0, "/p", "a?b"},
    {"GET", "//double", 0, "//double", NULL},
    {"GET", "http://example.com/x?y", 0, "/x", "y"},
    {"GET", "HTTPS://example.com:443/x", 0, "/x", NULL},
    {"GET", "http://example.com", 0, "/", NULL},
    {"GET", "http://example.com?q", 0, "/", "q"},
    {"OPTIONS", "*", 0, "*", NULL},
    {"GET", "*", 400, NULL, NULL},
    {"options", "*", 400, NULL, NULL},
    {"CONNECT", "example.com:443", 400, NULL, NULL},
    {"GET", "example.com:80", 400, NULL, NULL},
    {"GET", "relative/path", 400, NULL, NULL},
    {"GET", "ftp://example.com/", 400, NULL, NULL},
    {"GET", "http:/example.com/", 400, NULL, NULL},
    {"GET", "http:///nohost", 400, NULL, NULL},
    {"GET", "http://user@example.com/", 400, NULL, NULL},
    {"GET", "/a#frag", 400, NULL, NULL},
    {"GET", "/caf\xc3\xa9", 400, NULL, NULL},
    {"GET", "/a b", 400, NULL, NULL},
    {"GET", "", 400, NULL, NULL},
    {"GET", "**", 400, NULL, NULL},
};

static bool view_is(const char *p, size_t n, const char *want)
{
    return n == strlen(want) && memcmp(p, want, n) == 0;
}

static void check_case(const struct target_case *c)
{
    struct http_target t;
    int r = http_split_target(c->method, strlen(c->method), c->target, strlen(c->target), &t);
    CHECK(r == c->status, "%s %s: returned %d, want %d", c->method, c->target, r, c->status);
    if (r != 0 || c->status != 0) return;
    CHECK(view_is(t.path, t.path_len, c->path), "%s: path '%.*s'", c->target, (int)t.path_len,
          t.path);
    CHECK(t.has_query == (c->query != NULL), "%s: has_query", c->target);
    CHECK(view_is(t.query, t.query_len, c->query ? c->query : ""), "%s: query '%.*s'", c->target,
          (int)t.query_len, t.query);
}

struct decode_case {
    const char *in, *out;
};

static const struct decode_case decodes[] = {
    {"", ""},
    {"plain", "plain"},
    {"a%20b", "a b"},
    {"%41%42%43", "ABC"},
    {"%e2%82%AC", "\xe2\x82\xac"},
    {"%zz", "%zz"},
    {"%4", "%4"},
    {"%", "%"},
    {"100%", "100%"},
    {"%%41", "%A"},
    {"%2F", "/"},
    {"a+b", "a+b"}, /* '+' is a space only in form bodies, not in paths */
};

static void check_decode(void)
{
    for (size_t i = 0; i < sizeof decodes / sizeof *decodes; i++) {
        const struct decode_case *c = &decodes[i];
        char out[64], inplace[64];
        size_t n = http_percent_decode(c->in, strlen(c->in), out);
        CHECK(view_is(out, n, c->out), "decode '%s' gave '%.*s'", c->in, (int)n, out);
        strcpy(inplace, c->in);
        n = http_percent_decode(inplace, strlen(inplace), inplace);
        CHECK(view_is(inplace, n, c->out), "decode '%s' in place gave '%.*s'", c->in, (int)n,
              inplace);
    }
    /* "%00" decodes to a NUL byte: the length, not a terminator, counts. */
    char out[4];
    size_t n = http_percent_decode("a%00b", 5, out);
    CHECK(n == 3 && out[0] == 'a' && out[1] == '\0' && out[2] == 'b', "%%00 decodes to NUL");
}

/* The authority an absolute-form target names, which overrides Host. */
static void check_authority(void)
{
    static const struct {
        const char *target, *authority; /* NULL: no authority (not absolute-form) */
    } auths[] = {
        {"http://a.example/x", "a.example"},
        {"HTTPS://A.Example:8443/p?q", "A.Example:8443"},
        {"http://a.example?x=1", "a.example"},
        {"http://a.example", "a.example"},
        {"http://[::1]:80/", "[::1]:80"},
        {"/x", NULL},
        {"/http://a.example/", NULL},
        {"*", NULL},
    };
    for (size_t i = 0; i < sizeof auths / sizeof *auths; i++) {
        const char *t = auths[i].target, *a = NULL;
        size_t n = 0;
        bool got = http_target_authority(t, strlen(t), &a, &n);
        if (!auths[i].authority)
            CHECK(!got, "'%s' has no authority, got '%.*s'", t, (int)n, a ? a : "");
        else
            CHECK(got && view_is(a, n, auths[i].authority), "authority of '%s' gave '%.*s'", t,
                  (int)n, a ? a : "");
    }
}

int main(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_case(&cases[i]);
    check_decode();
    check_authority();
    return check_summary();
}
