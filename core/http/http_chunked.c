/* http_chunked.c — streaming decoder for the chunked transfer coding
 * (RFC 9112 §7.1).
 *
 * A byte-at-a-time state machine for the framing (size lines, CRLFs,
 * trailers) and a bulk copy for chunk data, so it can stop and resume at any
 * byte boundary: all it remembers between calls is the state, the bytes left
 * in the current chunk and the lengths of the current line and trailer
 * section (which bound what a peer can make us scan). Output never runs
 * ahead of input, so decoding in place (out == in) works: memmove handles
 * the overlap when the data moves down over consumed framing bytes. */
#include "http_parser.h"

#include "http_chars.h"

#include <string.h>

enum {
    S_SIZE_FIRST,  /* at the first hex digit of a chunk-size */
    S_SIZE,        /* more hex digits, or what ends the size */
    S_SIZE_BWS,    /* whitespace after the size: only ';' may follow */
    S_EXT,         /* chunk-ext: tolerated, checked only for control bytes */
    S_SIZE_LF,     /* CR seen after the size line */
    S_DATA,
    S_DATA_CR,     /* CRLF must follow the chunk data */
    S_DATA_LF,
    S_TRAILER_START, /* at a trailer field line or the final CRLF */
    S_TRAILER_NAME,
    S_TRAILER_VALUE,
    S_TRAILER_LF,
    S_END_LF,      /* CR of the final empty line seen */
    S_DONE,
    S_ERROR_400,   /* errors are sticky: a broken stream stays broken */
    S_ERROR_431,
};

void http_chunked_init(struct http_chunked *d)
{
    d->state = S_SIZE_FIRST;
    d->remaining = 0;
    d->line_bytes = 0;
    d->trailer_bytes = 0;
}

int http_chunked_decode(struct http_chunked *d, const char *in, size_t in_len,
                        size_t *in_used, char *out, size_t out_cap, size_t *out_len,
                        int *status)
{
    const unsigned char *s = (const unsigned char *)in;
    size_t i = 0, o = 0;
    int st = d->state;

    while (st != S_DONE && st < S_ERROR_400) {
        if (st == S_DATA) {
            uint64_t n = d->remaining;
            if (n > in_len - i) n = in_len - i;
            if (n > out_cap - o) n = out_cap - o;
            if (n == 0) break; /* input used up or output full */
            memmove(out + o, in + i, (size_t)n);
            i += (size_t)n;
            o += (size_t)n;
            d->remaining -= n;
            if (d->remaining == 0) st = S_DATA_CR;
            continue;
        }
        if (i == in_len) break;
        unsigned char c = s[i++];
        /* Line limits count the bytes before CRLF; a wrong CR/LF fails below. */
        if (st < S_SIZE_LF && c != '\r' &&
            ++d->line_bytes > HTTP_CHUNKED_MAX_LINE)
            goto bad;

        switch (st) {
        case S_SIZE_FIRST:
        case S_SIZE: {
            int h = http_hex_value(c);
            if (h >= 0) {
                /* 16 * size must stay below 2^63 */
                if (d->remaining >> 59) goto bad;
                d->remaining = d->remaining << 4 | (uint64_t)h;
                st = S_SIZE;
            } else if (st == S_SIZE_FIRST) {
                goto bad; /* empty size, or a sign, space, "x" ... */
            } else if (c == '\r') {
                st = S_SIZE_LF;
            } else if (c == ';') {
                st = S_EXT;
            } else if (c == ' ' || c == '\t') {
                st = S_SIZE_BWS;
            } else {
                goto bad;
            }
            break;
        }
        case S_SIZE_BWS:
            if (c == ';') st = S_EXT;
            else if (c != ' ' && c != '\t') goto bad;
            break;
        case S_EXT:
            if (c == '\r') st = S_SIZE_LF;
            else if (!http_field_vchar[c]) goto bad;
            break;
        case S_SIZE_LF:
            if (c != '\n') goto bad;
            d->line_bytes = 0;
            st = d->remaining ? S_DATA : S_TRAILER_START;
            break;
        case S_DATA_CR:
            if (c != '\r') goto bad;
            st = S_DATA_LF;
            break;
        case S_DATA_LF:
            if (c != '\n') goto bad;
            st = S_SIZE_FIRST;
            break;
        case S_TRAILER_START:
        case S_TRAILER_NAME:
        case S_TRAILER_VALUE:
        case S_TRAILER_LF:
        case S_END_LF:
            if (++d->trailer_bytes > HTTP_CHUNKED_MAX_TRAILERS) {
                st = S_ERROR_431;
                goto out;
            }
            if (c != '\r' && c != '\n' && ++d->line_bytes > HTTP_CHUNKED_MAX_LINE) goto bad;
            switch (st) {
            case S_TRAILER_START:
                if (c == '\r') st = S_END_LF;
                else if (http_tchar[c]) st = S_TRAILER_NAME; /* SP here: obs-fold */
                else goto bad;
                break;
            case S_TRAILER_NAME:
                if (c == ':') st = S_TRAILER_VALUE;
                else if (!http_tchar[c]) goto bad; /* incl. space before ':' */
                break;
            case S_TRAILER_VALUE:
                if (c == '\r') st = S_TRAILER_LF;
                else if (!http_field_vchar[c]) goto bad;
                break;
            case S_TRAILER_LF:
                if (c != '\n') goto bad;
                d->line_bytes = 0;
                st = S_TRAILER_START;
                break;
            default: /* S_END_LF */
                if (c != '\n') goto bad;
                st = S_DONE;
                break;
            }
            break;
        default:
            goto bad; /* unreachable: S_DATA and final states leave the loop */
        }
    }
    goto out;

bad:
    st = S_ERROR_400;
out:
    d->state = st;
    *in_used = i;
    *out_len = o;
    if (st == S_DONE) return 1;
    if (st == S_ERROR_400 || st == S_ERROR_431) {
        *status = st == S_ERROR_400 ? 400 : 431;
        return HTTP_ERROR;
    }
    return 0;
}
