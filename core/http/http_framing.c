/* http_framing.c — how a parsed request is framed and whether the connection
 * lives on: Content-Length, Transfer-Encoding, Connection, Expect, Host
 * (RFC 9112 §6, §9.3; RFC 9110 §7.2, §8.6, §10.1.1).
 *
 * Request smuggling lives in the gap between two parsers that frame the same
 * bytes differently, so every ambiguous shape is refused rather than
 * resolved: CL with TE, differing CLs, TE not ending in exactly one chunked,
 * TE on HTTP/1.0 (whose intermediaries may not know it). */
#include "http_parser.h"

#include "http_chars.h"

bool http_token_eq(const char *s, size_t len, const char *lower_literal)
{
    size_t i = 0;
    for (; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 'A' && c <= 'Z') c |= 0x20;
        if (lower_literal[i] == '\0' || c != (unsigned char)lower_literal[i]) return false;
    }
    return lower_literal[i] == '\0';
}

/* Walks a comma-separated list (RFC 9110 §5.6.1); members are OWS-trimmed. */
struct list_cursor {
    const char *p, *end;
};

/* Yields the next member into (*m, *m_len) (possibly empty, e.g. "a,,b");
 * false when the list is used up. */
static bool list_next(struct list_cursor *c, const char **m, size_t *m_len)
{
    if (c->p == NULL) return false;
    const char *s = c->p;
    const char *comma = s;
    while (comma < c->end && *comma != ',') comma++;
    const char *e = comma;
    while (s < e && (*s == ' ' || *s == '\t')) s++;
    while (e > s && (e[-1] == ' ' || e[-1] == '\t')) e--;
    *m = s;
    *m_len = (size_t)(e - s);
    c->p = comma < c->end ? comma + 1 : NULL;
    return true;
}

static bool is_token(const char *s, size_t n)
{
    if (n == 0) return false;
    for (size_t i = 0; i < n; i++)
        if (!http_tchar[(unsigned char)s[i]]) return false;
    return true;
}

/* Content-Length = 1*DIGIT, capped at 2^63-1 so it fits every signed
 * offset downstream. Returns false for anything else. */
static bool parse_decimal(const char *s, size_t n, uint64_t *out)
{
    if (n == 0) return false;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned d = (unsigned char)s[i] - (unsigned)'0';
        if (d > 9) return false;
        if (v > (UINT64_C(0x7fffffffffffffff) - d) / 10) return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

int http_request_framing(const struct http_request *req, struct http_framing *out)
{
    const bool http11 = req->minor_version >= 1;
    bool have_cl = false, have_te = false, close = false, keep_alive_token = false;
    bool te_bad = false, te_unknown = false, last_is_chunked = false, expect_bad = false;
    unsigned chunked_count = 0, host_count = 0;
    uint64_t cl = 0;

    out->expect_continue = false;
    out->host = NULL;
    out->host_len = 0;

    for (size_t i = 0; i < req->num_headers; i++) {
        const struct http_header *h = &req->headers[i];
        struct list_cursor c = {h->value, h->value + h->value_len};
        const char *m;
        size_t m_len;

        if (http_token_eq(h->name, h->name_len, "content-length")) {
            /* Duplicates and list members must all agree (RFC 9110 §8.6). */
            while (list_next(&c, &m, &m_len)) {
                uint64_t v;
                if (!parse_decimal(m, m_len, &v)) return 400;
                if (have_cl && v != cl) return 400;
                cl = v;
                have_cl = true;
            }
        } else if (http_token_eq(h->name, h->name_len, "transfer-encoding")) {
            /* One list, possibly spread over several field lines: the order
             * of members across lines is the order of codings applied. */
            have_te = true;
            while (list_next(&c, &m, &m_len)) {
                if (!is_token(m, m_len)) {
                    te_bad = true; /* empty member, parameters, junk */
                    last_is_chunked = false;
                } else if (http_token_eq(m, m_len, "chunked")) {
                    chunked_count++;
                    last_is_chunked = true;
                } else {
                    te_unknown = true;
                    last_is_chunked = false;
                }
            }
        } else if (http_token_eq(h->name, h->name_len, "connection")) {
            while (list_next(&c, &m, &m_len)) {
                if (http_token_eq(m, m_len, "close")) close = true;
                else if (http_token_eq(m, m_len, "keep-alive")) keep_alive_token = true;
            }
        } else if (http_token_eq(h->name, h->name_len, "expect")) {
            while (list_next(&c, &m, &m_len)) {
                if (http_token_eq(m, m_len, "100-continue")) {
                    /* An HTTP/1.0 client cannot take a 100: ignore it
                     * (RFC 9110 §10.1.1). */
                    if (http11) out->expect_continue = true;
                } else {
                    expect_bad = true;
                }
            }
        } else if (http_token_eq(h->name, h->name_len, "host")) {
            host_count++;
            out->host = h->value;
            out->host_len = h->value_len;
        }
    }

    /* Framing errors first: they decide whether the stream can be trusted. */
    if (have_te) {
        if (have_cl || !http11 || te_bad || !last_is_chunked || chunked_count != 1) return 400;
        if (te_unknown) return 501;
    }
    /* RFC 9112 §3.2: a missing, repeated or invalid Host is a 400. */
    if (host_count > 1 || (http11 && host_count == 0)) return 400;
    if (host_count && !http_host_valid(out->host, out->host_len)) return 400;
    if (expect_bad) return 417;

    if (have_te) {
        out->body = HTTP_BODY_CHUNKED;
        out->content_length = 0;
    } else if (have_cl && cl > 0) {
        out->body = HTTP_BODY_LENGTH;
        out->content_length = cl;
    } else {
        out->body = HTTP_BODY_NONE;
        out->content_length = 0;
    }
    out->keep_alive = !close && (http11 || keep_alive_token);
    return 0;
}
