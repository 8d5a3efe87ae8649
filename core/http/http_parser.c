/* http_parser.c — the request head: request-line and header fields (RFC 9112
 * §2–§5), in one forward pass with no copies.
 *
 * The parser is stateless: a caller with a partial head calls again with the
 * longer buffer and the scan restarts. Every decision depends only on bytes
 * already seen (plus one byte of lookahead after a CR, which yields PARTIAL
 * when missing), and the scan never looks past min(len, max_head). So the
 * result for a byte stream does not depend on how it was split: every proper
 * prefix of a valid head is PARTIAL, and an error in a prefix is the same
 * error for any longer buffer. The fuzzers check exactly that. */
#include "http_parser.h"

#include "http_chars.h"

/* The scanners below take 16 bytes per step with SSE2, which every x86-64
 * CPU has, so the default build uses them; CSERVE_NO_SIMD (the unit tests'
 * second build) and other CPUs use the table loops, which also finish every
 * tail. A step loads only when 16 bytes remain before end. */
#if defined(__SSE2__) && !defined(CSERVE_NO_SIMD)
#include <emmintrin.h>
#define HTTP_SIMD 1

/* Index of the first set lane of a byte mask, 16 when none is. */
static inline int first_lane(__m128i stop)
{
    unsigned m = (unsigned)_mm_movemask_epi8(stop);
    return m ? __builtin_ctz(m) : 16;
}
#endif

/* Skip request-target bytes (VCHAR 0x21-0x7E, obs-text 0x80-0xFF): stop at
 * a byte <= 0x20 or at DEL. SSE2 compares bytes as signed, so "<= 0x20"
 * is asked as min_epu8(b, 0x20) == b, which is unsigned. */
static inline const unsigned char *skip_target_chars(const unsigned char *p,
                                                     const unsigned char *end)
{
#ifdef HTTP_SIMD
    const __m128i sp = _mm_set1_epi8(0x20), del = _mm_set1_epi8(0x7f);
    while (end - p >= 16) {
        __m128i b = _mm_loadu_si128((const __m128i *)p);
        __m128i stop = _mm_or_si128(_mm_cmpeq_epi8(_mm_min_epu8(b, sp), b), _mm_cmpeq_epi8(b, del));
        int i = first_lane(stop);
        p += i;
        if (i != 16) return p;
    }
#endif
    while (p < end && http_target_char[*p]) p++;
    return p;
}

/* Skip field-value bytes (HTAB, SP, VCHAR, obs-text); stops at CR, LF, any
 * other control byte, NUL or DEL: a byte < 0x20 other than HTAB, or 0x7F. */
static inline const unsigned char *skip_value_chars(const unsigned char *p,
                                                    const unsigned char *end)
{
#ifdef HTTP_SIMD
    const __m128i ctl = _mm_set1_epi8(0x1f), tab = _mm_set1_epi8(0x09), del = _mm_set1_epi8(0x7f);
    while (end - p >= 16) {
        __m128i b = _mm_loadu_si128((const __m128i *)p);
        __m128i below = _mm_cmpeq_epi8(_mm_min_epu8(b, ctl), b); /* b < 0x20 */
        __m128i stop = _mm_or_si128(_mm_andnot_si128(_mm_cmpeq_epi8(b, tab), below), _mm_cmpeq_epi8(b, del));
        int i = first_lane(stop);
        p += i;
        if (i != 16) return p;
    }
#endif
    while (p < end && http_field_vchar[*p]) p++;
    return p;
}

/* HTTP-version = "HTTP/" DIGIT "." DIGIT. Returns the minor version (0 or 1),
 * -505 for a well-formed version we do not speak (HTTP/2.0, HTTP/1.2, and the
 * bare major form "HTTP/2", "HTTP/3" that newer clients print), or -400 for
 * anything that is not a version at all ("http/1.1", "HTTP/1.10"). */
static int classify_version(const unsigned char *v, size_t n)
{
    if (n < 6 || v[0] != 'H' || v[1] != 'T' || v[2] != 'T' || v[3] != 'P' || v[4] != '/')
        return -400;
    unsigned char major = v[5];
    if (major < '0' || major > '9') return -400;
    if (n == 6) return major >= '2' ? -505 : -400;
    if (n != 8 || v[6] != '.' || v[7] < '0' || v[7] > '9') return -400;
    if (major != '1' || v[7] > '1') return -505;
    return v[7] - '0';
}

int http_parse_request(const char *buf, size_t len, size_t max_head,
                       struct http_request *req, int *status)
{
    const unsigned char *const start = (const unsigned char *)buf;
    /* Never look past max_head: a head that does not end inside it is too
     * long, whatever follows (this is what keeps the verdict split-proof). */
    const unsigned char *const end = start + (len < max_head ? len : max_head);
    const unsigned char *p = start;
    bool in_request_line = true;

    req->num_headers = 0;

    /* RFC 9112 §2.2: ignore empty lines before the request-line. */
    for (;;) {
        if (p == end) goto need_more;
        if (*p == '\r') {
            if (end - p < 2) goto need_more;
            if (p[1] != '\n') goto bad;
            p += 2;
            continue;
        }
        break;
    }

    /* method SP */
    const unsigned char *method = p;
    while (p < end && http_tchar[*p]) p++;
    if (p == end) goto need_more;
    if (p == method || *p != ' ') goto bad;
    req->method = (const char *)method;
    req->method_len = (size_t)(p - method);
    p++;

    /* request-target SP */
    const unsigned char *target = p;
    p = skip_target_chars(p, end);
    if (p == end) goto need_more;
    if (p == target || *p != ' ') goto bad;
    req->target = (const char *)target;
    req->target_len = (size_t)(p - target);
    p++;

    /* HTTP-version CRLF */
    const unsigned char *version = p;
    while (p < end && *p > ' ' && *p < 0x7f) p++;
    if (p == end) goto need_more;
    int minor = classify_version(version, (size_t)(p - version));
    if (minor == -505) {
        *status = 505;
        return HTTP_ERROR;
    }
    if (minor < 0 || *p != '\r') goto bad;
    if (end - p < 2) goto need_more;
    if (p[1] != '\n') goto bad;
    req->minor_version = minor;
    p += 2;
    in_request_line = false;

    /* *( field-line CRLF ) CRLF */
    for (;;) {
        if (p == end) goto need_more;
        if (*p == '\r') {
            if (end - p < 2) goto need_more;
            if (p[1] != '\n') goto bad;
            p += 2;
            return (int)(p - start);
        }
        /* A field line starting with SP/HTAB is obs-fold (RFC 9112 §5.2),
         * or whitespace before the first field (§2.2): both rejected. A
         * bare LF lands here too, as a non-token byte. */
        if (req->num_headers == HTTP_MAX_HEADERS) {
            *status = 431;
            return HTTP_ERROR;
        }
        const unsigned char *name = p;
        while (p < end && http_tchar[*p]) p++;
        if (p == end) goto need_more;
        /* No whitespace between name and colon (RFC 9112 §5.1). */
        if (p == name || *p != ':') goto bad;
        const unsigned char *name_end = p;
        p++;
        while (p < end && (*p == ' ' || *p == '\t')) p++;
        const unsigned char *value = p;
        p = skip_value_chars(p, end);
        if (p == end) goto need_more;
        if (*p != '\r') goto bad; /* NUL, CTL, DEL or a bare LF */
        if (end - p < 2) goto need_more;
        if (p[1] != '\n') goto bad;
        const unsigned char *value_end = p;
        while (value_end > value && (value_end[-1] == ' ' || value_end[-1] == '\t'))
            value_end--;
        struct http_header *h = &req->headers[req->num_headers++];
        h->name = (const char *)name;
        h->name_len = (size_t)(name_end - name);
        h->value = (const char *)value;
        h->value_len = (size_t)(value_end - value);
        p += 2;
    }

need_more:
    if (len < max_head) return HTTP_PARTIAL;
    *status = in_request_line ? 414 : 431;
    return HTTP_ERROR;
bad:
    *status = 400;
    return HTTP_ERROR;
}
