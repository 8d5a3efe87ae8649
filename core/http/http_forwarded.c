/* http_forwarded.c — what a trusted proxy says about the client: its
 * address, the scheme and (only when asked) the host it asked for. Believed
 * only when the connection's peer is in --forwarded-allow-ips (none by
 * default), and read only from the fields --forwarded-headers names (by
 * default X-Forwarded-For and X-Forwarded-Proto, what the nginx recipe in
 * docs/deploying.md sets): a field the proxy does not set itself passes
 * through from the client unchanged, so reading it would let any client
 * choose. `Forwarded` (RFC 7239) and X-Forwarded-* are never mixed: one
 * family is the one source. Pure: the two lists, parsed, are the caller's
 * struct forwarded_policy, passed to every call; the WSGI bridge
 * (wsgi_environ.c) and the access log read a request through it with the
 * one policy the server parsed, so they name the same client.
 *
 * The client's address is found from the right: each proxy appends the
 * address it got the request from, so the rightmost entry is what the
 * trusted peer vouches for; entries that are themselves trusted proxies
 * (an address in the list: '*' and 'unix' trust a peer, never an entry)
 * are passed over, and the first other one is the client. The leftmost
 * entries, which a client can write, are reached only through proxies the
 * list trusts. The scheme and the host come from the nearest proxy's own
 * entry (the last). */
#include "http_forwarded.h"

#include "ip_allow.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

static const struct {
    const char *name;
    unsigned bit;
} field_names[] = {
    {"x-forwarded-for", FORWARDED_XFF}, {"x-forwarded-proto", FORWARDED_XPROTO},
    {"x-forwarded-host", FORWARDED_XHOST}, {"forwarded", FORWARDED_RFC7239},
};

int forwarded_trust_parse(struct forwarded_policy *trust, const char *list, char *err, size_t errcap)
{
    return ip_allow_parse(&trust->peers, list, err, errcap);
}

int forwarded_fields_parse(struct forwarded_policy *policy, const char *list, char *err, size_t errcap)
{
    unsigned got = 0;
    const char *p = list;
    while (*p) {
        size_t len = strcspn(p, ",");
        const char *next = p[len] ? p + len + 1 : p + len;
        while (len && (*p == ' ' || *p == '\t')) {
            p++;
            len--;
        }
        while (len && (p[len - 1] == ' ' || p[len - 1] == '\t'))
            len--;
        size_t i = 0;
        for (; len && i < sizeof field_names / sizeof *field_names; i++)
            if (strlen(field_names[i].name) == len && strncasecmp(p, field_names[i].name, len) == 0)
                break;
        if (len && i == sizeof field_names / sizeof *field_names) {
            snprintf(err, errcap, "'%.*s' is not forwarded, x-forwarded-for, x-forwarded-proto or "
                                  "x-forwarded-host", (int)len, p);
            return -1;
        }
        if (len)
            got |= field_names[i].bit;
        p = next;
    }
    if ((got & FORWARDED_RFC7239) && (got & ~(unsigned)FORWARDED_RFC7239)) {
        snprintf(err, errcap, "forwarded and x-forwarded-* say the same things: name one family, "
                              "the one the proxy sets");
        return -1;
    }
    policy->fields = got;
    return 0;
}

/* An entry in X-Forwarded-For or a for= node: trusted only when it is in
 * a listed network ('*' and 'unix' vouch for the peer alone: with them the
 * rightmost entry, the one the peer appended, is the client). */
static bool trusted_text(const struct forwarded_policy *trust, const char *s, size_t len)
{
    return ip_allow_in_nets(&trust->peers, s, len);
}

bool forwarded_trusted(const struct forwarded_policy *trust, const char *peer)
{
    if (!trust || !trust->fields)
        return false;
    return ip_allow_peer(&trust->peers, peer);
}

static void trim(struct span *s)
{
    while (s->len && (*s->p == ' ' || *s->p == '\t')) {
        s->p++;
        s->len--;
    }
    while (s->len && (s->p[s->len - 1] == ' ' || s->p[s->len - 1] == '\t'))
        s->len--;
}

/* The elements of a comma-separated list spread over every field of one
 * name, walked right to left (the nearest proxy's first). */
struct walk {
    const struct http_request *req;
    const char *name;
    size_t below;   /* fields left to search: indices below this one */
    size_t pos;     /* how much of the current field's value is left */
    const char *value;
};

static void walk_start(struct walk *w, const struct http_request *req, const char *name)
{
    *w = (struct walk){.req = req, .name = name, .below = req->num_headers};
}

static bool walk_prev(struct walk *w, struct span *out)
{
    for (;;) {
        while (w->pos == 0) { /* the next field of this name to the left */
            if (w->below == 0)
                return false;
            const struct http_header *h = &w->req->headers[--w->below];
            if (http_token_eq(h->name, h->name_len, w->name)) {
                w->value = h->value;
                w->pos = h->value_len;
            }
        }
        size_t start = w->pos;
        while (start > 0 && w->value[start - 1] != ',')
            start--;
        out->p = w->value + start;
        out->len = w->pos - start;
        w->pos = start ? start - 1 : 0;
        trim(out);
        if (out->len)
            return true;
    }
}

/* In one Forwarded element ("for=a;proto=https;host=x"), the value of key
 * (quotes removed). */
static bool fwd_param(struct span el, const char *key, struct span *out)
{
    size_t klen = strlen(key);
    const char *p = el.p, *end = el.p + el.len;
    while (p < end) {
        const char *semi = memchr(p, ';', (size_t)(end - p));
        struct span pair = {p, (size_t)((semi ? semi : end) - p)};
        trim(&pair);
        if (pair.len > klen && pair.p[klen] == '=' && strncasecmp(pair.p, key, klen) == 0) {
            out->p = pair.p + klen + 1;
            out->len = pair.len - klen - 1;
            if (out->len >= 2 && out->p[0] == '"' && out->p[out->len - 1] == '"') {
                out->p++;
                out->len -= 2;
            }
            return true;
        }
        if (!semi)
            break;
        p = semi + 1;
    }
    return false;
}

/* A node in Forwarded's for= may carry a port ("1.2.3.4:5", "[::1]:5"). */
static struct span node_addr(struct span s)
{
    if (s.len && s.p[0] == '[') {
        const char *close = memchr(s.p, ']', s.len);
        if (close)
            s.len = (size_t)(close - s.p) + 1;
    } else {
        const char *colon = memchr(s.p, ':', s.len);
        if (colon && !memchr(colon + 1, ':', s.len - (size_t)(colon - s.p) - 1))
            s.len = (size_t)(colon - s.p);
    }
    return s;
}


bool forwarded_read(const struct forwarded_policy *trust, const struct http_request *req, const char *peer,
                    struct forwarded *out)
{
    *out = (struct forwarded){0};
    if (!forwarded_trusted(trust, peer))
        return false;
    unsigned fields = trust->fields;
    struct walk w;
    struct span el;
    if (fields & FORWARDED_RFC7239) {
        walk_start(&w, req, "forwarded");
        bool nearest = true;
        while (walk_prev(&w, &el)) {
            struct span v;
            if (nearest) {
                if (fwd_param(el, "proto", &v))
                    out->proto = v;
                if (fwd_param(el, "host", &v))
                    out->host = v;
                nearest = false;
            }
            if (!fwd_param(el, "for", &v))
                break;
            out->client = node_addr(v);
            if (!trusted_text(trust, out->client.p, out->client.len))
                break;
        }
    }
    if (fields & FORWARDED_XPROTO) {
        walk_start(&w, req, "x-forwarded-proto");
        if (walk_prev(&w, &el))
            out->proto = el;
    }
    if (fields & FORWARDED_XHOST) {
        walk_start(&w, req, "x-forwarded-host");
        if (walk_prev(&w, &el))
            out->host = el;
    }
    if (fields & FORWARDED_XFF) {
        walk_start(&w, req, "x-forwarded-for");
        while (walk_prev(&w, &el)) {
            out->client = el;
            if (!trusted_text(trust, el.p, el.len))
                break;
        }
    }
    /* Only what the fields may hold: http/https, an address, host[:port]. */
    bool https = out->proto.len == 5 && strncasecmp(out->proto.p, "https", 5) == 0;
    bool http = out->proto.len == 4 && strncasecmp(out->proto.p, "http", 4) == 0;
    if (!https && !http)
        out->proto = (struct span){0};
    out->https = https;
    int family;
    unsigned char a[16];
    if (out->client.len && ip_parse(out->client.p, out->client.len, &family, a)) {
        if (out->client.p[0] == '[') {
            out->client.p++;
            out->client.len -= 2;
        }
    } else {
        out->client = (struct span){0};
    }
    if (!http_host_valid(out->host.p, out->host.len))
        out->host = (struct span){0};
    return true;
}
