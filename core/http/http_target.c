/* http_target.c — the request-target split into PATH_INFO and QUERY_STRING
 * material (RFC 9112 §3.2), and percent-decoding.
 *
 * Only the forms a WSGI origin server can serve are accepted: origin-form,
 * absolute-form with an http(s) scheme (RFC 9112 §3.2.2: a server MUST accept
 * it), and asterisk-form for OPTIONS. Authority-form is for CONNECT, which a
 * WSGI server does not tunnel. */
#include "http_parser.h"

#include "http_chars.h"

#include <string.h>

/* Splits path?query for a target part that starts at its path (or at '?'
 * or the end, meaning an empty path). */
static void split_path_query(const char *s, const char *end, struct http_target *out)
{
    const char *q = memchr(s, '?', (size_t)(end - s));
    const char *path_end = q ? q : end;
    if (path_end == s) {
        /* absolute-form with an empty path: the path is "/" (RFC 9112
         * §3.2.2); a static literal, since the target holds no '/'. */
        out->path = "/";
        out->path_len = 1;
    } else {
        out->path = s;
        out->path_len = (size_t)(path_end - s);
    }
    out->has_query = q != NULL;
    out->query = q ? q + 1 : end;
    out->query_len = q ? (size_t)(end - q - 1) : 0;
}

/* Length of a case-insensitive "http://" or "https://" prefix, or 0. */
static size_t scheme_prefix(const char *t, size_t n)
{
    if (n >= 7 && http_token_eq(t, 7, "http://")) return 7;
    if (n >= 8 && http_token_eq(t, 8, "https://")) return 8;
    return 0;
}

int http_split_target(const char *method, size_t method_len, const char *target,
                      size_t target_len, struct http_target *out)
{
    if (target_len == 0) return 400;
    for (size_t i = 0; i < target_len; i++) {
        unsigned char c = (unsigned char)target[i];
        /* VCHAR only; '#' never travels in a request (RFC 9110 §4.2.5) */
        if (c < 0x21 || c > 0x7e || c == '#') return 400;
    }
    const char *end = target + target_len;

    if (target[0] == '/') {
        split_path_query(target, end, out);
        return 0;
    }
    if (target_len == 1 && target[0] == '*') {
        /* methods are case-sensitive (RFC 9110 §9.1): only "OPTIONS" */
        if (method_len != 7 || memcmp(method, "OPTIONS", 7) != 0) return 400;
        out->path = target;
        out->path_len = 1;
        out->query = end;
        out->query_len = 0;
        out->has_query = false;
        return 0;
    }
    size_t scheme = scheme_prefix(target, target_len);
    if (scheme == 0) return 400; /* authority-form, relative path, other scheme */
    const char *authority = target + scheme;
    const char *a = authority;
    while (a < end && *a != '/' && *a != '?') a++;
    /* An http(s) URI with an empty host is invalid (RFC 9110 §4.2.1); so is
     * userinfo, which RFC 9110 §4.2.4 forbids senders to generate ('@' is
     * no host byte), and any other authority that is not host[:port]: it
     * overrides the Host field, so it is held to the same rule. */
    if (a == authority || !http_host_valid(authority, (size_t)(a - authority))) return 400;
    split_path_query(a, end, out);
    return 0;
}

bool http_target_authority(const char *target, size_t target_len, const char **authority,
                           size_t *authority_len)
{
    size_t scheme = target_len && target[0] != '/' ? scheme_prefix(target, target_len) : 0;
    if (scheme == 0)
        return false; /* origin-form, asterisk-form */
    const char *a = target + scheme, *end = target + target_len, *e = a;
    while (e < end && *e != '/' && *e != '?') e++;
    *authority = a;
    *authority_len = (size_t)(e - a);
    return true;
}

size_t http_percent_decode(const char *in, size_t len, char *out)
{
    /* The write index never passes the read index, so out == in is safe. */
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        if (in[i] == '%' && len - i >= 3) {
            int hi = http_hex_value((unsigned char)in[i + 1]);
            int lo = http_hex_value((unsigned char)in[i + 2]);
            if (hi >= 0 && lo >= 0) {
                out[o++] = (char)(hi << 4 | lo);
                i += 2;
                continue;
            }
        }
        out[o++] = in[i];
    }
    return o;
}
