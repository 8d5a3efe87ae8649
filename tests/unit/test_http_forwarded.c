/* test_http_forwarded.c — whom a proxy's fields are believed from, which
 * fields are read, and which entry of X-Forwarded-For / Forwarded is the
 * client: never one a client can write in front of a trusted proxy. */
#include "../../core/http/http_forwarded.c" /* built in: the unit tests link only the parser's files */
#include "../../core/http/ip_allow.c"
#include "check.h"

static char errbuf[200];
/* The policy the checks below read with; configure() replaces it. */
static struct forwarded_policy policy;

static void configure_policy(struct forwarded_policy *p, const char *allow, const char *fields_list)
{
    CHECK(forwarded_trust_parse(p, allow, errbuf, sizeof errbuf) == 0, "allow '%s': %s", allow, errbuf);
    CHECK(forwarded_fields_parse(p, fields_list, errbuf, sizeof errbuf) == 0, "fields '%s': %s", fields_list,
          errbuf);
}

static void configure(const char *allow, const char *fields_list)
{
    configure_policy(&policy, allow, fields_list);
}

struct want {
    bool trusted;
    const char *client, *proto, *host; /* NULL: none */
};

static bool span_is(struct span s, const char *want)
{
    if (!want)
        return s.len == 0;
    return s.len == strlen(want) && memcmp(s.p, want, s.len) == 0;
}

/* fields: the header lines after the request line, each ending in CRLF;
 * read with p. */
static void check_with(const struct forwarded_policy *p, const char *name, const char *peer, const char *fields_text,
                       struct want w)
{
    char head[1024];
    int n = snprintf(head, sizeof head, "GET / HTTP/1.1\r\nHost: origin.test\r\n%s\r\n", fields_text);
    struct http_request req;
    int status = 0;
    CHECK(http_parse_request(head, (size_t)n, 8192, &req, &status) == n, "%s: head parses", name);
    struct forwarded f;
    bool got = forwarded_read(p, &req, peer, &f);
    CHECK(got == w.trusted, "%s: trusted %d, want %d", name, got, w.trusted);
    CHECK(span_is(f.client, w.client), "%s: client '%.*s', want '%s'", name, (int)f.client.len,
          f.client.p ? f.client.p : "", w.client ? w.client : "(none)");
    CHECK(span_is(f.proto, w.proto), "%s: proto '%.*s', want '%s'", name, (int)f.proto.len,
          f.proto.p ? f.proto.p : "", w.proto ? w.proto : "(none)");
    CHECK(span_is(f.host, w.host), "%s: host '%.*s', want '%s'", name, (int)f.host.len,
          f.host.p ? f.host.p : "", w.host ? w.host : "(none)");
}

static void check(const char *name, const char *peer, const char *fields_text, struct want w)
{
    check_with(&policy, name, peer, fields_text, w);
}

#define HOSTILE_RFC7239 "Forwarded: for=6.6.6.6;proto=https;host=evil.example\r\n"
#define HOSTILE_XHOST "X-Forwarded-Host: evil.example\r\n"

static void check_defaults(void)
{
    /* Trusting nobody (the default): nothing is read, from any peer. */
    configure("", "x-forwarded-for,x-forwarded-proto");
    check("default, loopback peer", "127.0.0.1",
          "X-Forwarded-For: 6.6.6.6\r\nX-Forwarded-Proto: https\r\n" HOSTILE_RFC7239 HOSTILE_XHOST,
          (struct want){false, NULL, NULL, NULL});
    check("default, unix peer", "", "X-Forwarded-For: 6.6.6.6\r\n", (struct want){false, NULL, NULL, NULL});
    /* A zeroed policy, or none at all, believes no one. */
    static const struct forwarded_policy zeroed;
    check_with(&zeroed, "zeroed policy, unix peer", "", "X-Forwarded-For: 6.6.6.6\r\n",
               (struct want){false, NULL, NULL, NULL});
    check_with(NULL, "no policy, unix peer", "", "X-Forwarded-For: 6.6.6.6\r\n",
               (struct want){false, NULL, NULL, NULL});
}

/* Each reader reads with the policy it is given: two at once do not mix. */
static void check_policies_apart(void)
{
    struct forwarded_policy unix_xff, tcp_proto;
    configure_policy(&unix_xff, "unix", "x-forwarded-for");
    configure_policy(&tcp_proto, "10.0.0.1", "x-forwarded-proto");
    const char *fields_text = "X-Forwarded-For: 203.0.113.7\r\nX-Forwarded-Proto: https\r\n";
    check_with(&unix_xff, "first policy, its peer", "", fields_text, (struct want){true, "203.0.113.7", NULL, NULL});
    check_with(&unix_xff, "first policy, the other's peer", "10.0.0.1", fields_text,
               (struct want){false, NULL, NULL, NULL});
    check_with(&tcp_proto, "second policy, its peer", "10.0.0.1", fields_text,
               (struct want){true, NULL, "https", NULL});
    check_with(&tcp_proto, "second policy, the other's peer", "", fields_text,
               (struct want){false, NULL, NULL, NULL});
}

/* The nginx recipe: a unix-socket peer that sets X-Forwarded-For
 * ($proxy_add_x_forwarded_for: the client's own, then $remote_addr) and
 * X-Forwarded-Proto ($scheme, replacing the client's), and passes
 * Forwarded and X-Forwarded-Host through as the client sent them. */
static void check_recipe(void)
{
    configure("unix", "x-forwarded-for,x-forwarded-proto");
    check("recipe, plain", "", "X-Forwarded-For: 203.0.113.7\r\nX-Forwarded-Proto: http\r\n",
          (struct want){true, "203.0.113.7", "http", NULL});
    check("recipe, hostile client of both families", "",
          HOSTILE_RFC7239 HOSTILE_XHOST "X-Forwarded-For: 6.6.6.6, 203.0.113.7\r\nX-Forwarded-Proto: http\r\n",
          (struct want){true, "203.0.113.7", "http", NULL});
    check("recipe, a client's own X-Forwarded-For on two lines", "",
          "X-Forwarded-For: 6.6.6.6\r\nX-Forwarded-For: 7.7.7.7, 203.0.113.7\r\nX-Forwarded-Proto: http\r\n",
          (struct want){true, "203.0.113.7", "http", NULL});
    check("recipe, the TCP peer is not the unix one", "127.0.0.1",
          "X-Forwarded-For: 6.6.6.6\r\nX-Forwarded-Proto: https\r\n", (struct want){false, NULL, NULL, NULL});
}

static void check_chains(void)
{
    /* Two proxies: the nearer (the peer, 10.0.0.2) appended the farther's
     * address (10.0.0.1), which appended the client's. */
    configure("10.0.0.0/24", "x-forwarded-for,x-forwarded-proto");
    check("chain of listed proxies", "10.0.0.2", "X-Forwarded-For: 6.6.6.6, 198.51.100.4, 10.0.0.1\r\n",
          (struct want){true, "198.51.100.4", NULL, NULL});
    check("every entry a listed proxy", "10.0.0.2", "X-Forwarded-For: 10.0.0.9, 10.0.0.1\r\n",
          (struct want){true, "10.0.0.9", NULL, NULL});
    check("garbage where the client should be", "10.0.0.2", "X-Forwarded-For: 6.6.6.6, unknown\r\n",
          (struct want){true, NULL, NULL, NULL});
    check("the nearest X-Forwarded-Proto", "10.0.0.2", "X-Forwarded-Proto: https, http\r\n",
          (struct want){true, NULL, "http", NULL});
    check("not a scheme", "10.0.0.2", "X-Forwarded-Proto: gopher\r\n", (struct want){true, NULL, NULL, NULL});
    /* '*' and 'unix' vouch for the peer, never for an entry: the rightmost
     * entry is the client, not the leftmost a client wrote. */
    configure("*", "x-forwarded-for,x-forwarded-proto");
    check("'*' takes one hop", "192.0.2.1", "X-Forwarded-For: 6.6.6.6, 203.0.113.7\r\n",
          (struct want){true, "203.0.113.7", NULL, NULL});
    configure("unix,*", "x-forwarded-for");
    check("an entry 'unix' names nothing", "", "X-Forwarded-For: 6.6.6.6, 203.0.113.7\r\n",
          (struct want){true, "203.0.113.7", NULL, NULL});
    configure("::1", "x-forwarded-for");
    check("an IPv6 client", "::1", "X-Forwarded-For: 6.6.6.6, 2001:db8::17\r\n",
          (struct want){true, "2001:db8::17", NULL, NULL});
}

static void check_fields(void)
{
    configure("unix", "x-forwarded-for,x-forwarded-proto,x-forwarded-host");
    check("x-forwarded-host when asked", "",
          "X-Forwarded-Host: www.example.org:8443\r\nX-Forwarded-For: 203.0.113.7\r\n",
          (struct want){true, "203.0.113.7", NULL, "www.example.org:8443"});
    check("an invalid x-forwarded-host", "", "X-Forwarded-Host: evil.example/<script>\r\n",
          (struct want){true, NULL, NULL, NULL});
    configure("unix", "x-forwarded-proto");
    check("only the scheme", "", "X-Forwarded-For: 203.0.113.7\r\nX-Forwarded-Proto: https\r\n",
          (struct want){true, NULL, "https", NULL});
    /* RFC 7239, only when asked, and then X-Forwarded-* are not read. */
    configure("unix", "forwarded");
    check("forwarded when asked", "",
          "Forwarded: for=6.6.6.6, for=\"[2001:db8::17]:4711\";proto=https;host=\"shop.example:8443\"\r\n"
          "X-Forwarded-For: 9.9.9.9\r\nX-Forwarded-Proto: http\r\nX-Forwarded-Host: evil.example\r\n",
          (struct want){true, "2001:db8::17", "https", "shop.example:8443"});
    check("forwarded: scheme and host from the nearest element only", "",
          "Forwarded: for=6.6.6.6;proto=https;host=evil.example, for=203.0.113.7\r\n",
          (struct want){true, "203.0.113.7", NULL, NULL});
    check("forwarded: a client's element on its own line", "",
          "Forwarded: for=6.6.6.6;proto=https\r\nForwarded: for=203.0.113.7;proto=http\r\n",
          (struct want){true, "203.0.113.7", "http", NULL});
    configure("unix", "");
    check("no fields: nothing is believed", "", "X-Forwarded-For: 203.0.113.7\r\n",
          (struct want){false, NULL, NULL, NULL});
}

static void check_parse_errors(void)
{
    static const char *const bad_fields[] = {
        "forwarded,x-forwarded-for", "x-forwarded-proto, forwarded", "x-real-ip", "x-forwarded-port",
    };
    for (size_t i = 0; i < sizeof bad_fields / sizeof *bad_fields; i++)
        CHECK(forwarded_fields_parse(&policy, bad_fields[i], errbuf, sizeof errbuf) == -1, "fields '%s' refused",
              bad_fields[i]);
    CHECK(forwarded_fields_parse(&policy, " X-Forwarded-For , x-forwarded-proto ", errbuf, sizeof errbuf) == 0,
          "names are case-insensitive and trimmed");
    static const char *const bad_allow[] = {"10.0.0.300", "10.0.0.0/33", "example.com", "::1/129", "10.0.0.0/ 8",
                                            "10.0.0.0/+8", "10.0.0.0/-0", "10.0.0.0/", "10.0.0.0/8x",
                                            "::1/99999999999999999999"};
    for (size_t i = 0; i < sizeof bad_allow / sizeof *bad_allow; i++)
        CHECK(forwarded_trust_parse(&policy, bad_allow[i], errbuf, sizeof errbuf) == -1, "allow '%s' refused",
              bad_allow[i]);
    CHECK(forwarded_trust_parse(&policy, "10.0.0.0/8, ::1/128, 10.1.2.3/0", errbuf, sizeof errbuf) == 0,
          "prefix lengths in digits are taken");
}

int main(void)
{
    check_defaults();
    check_policies_apart();
    check_recipe();
    check_chains();
    check_fields();
    check_parse_errors();
    return check_summary();
}
