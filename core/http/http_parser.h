/* http_parser.h — HTTP/1.1 request heads, framing and chunked bodies (RFC 9112).
 *
 * The header is the contract. Every parser here returns pointer+length views
 * into the caller's buffer and copies nothing; the caller keeps the buffer
 * unchanged for as long as it uses the views. Nothing allocates.
 *
 * Strictness is deliberate: a request is framed exactly one way or rejected
 * (no request smuggling). Lines end in CRLF; a bare CR or bare LF is an error. */
#ifndef CSERVE_HTTP_PARSER_H
#define CSERVE_HTTP_PARSER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HTTP_MAX_HEADERS 100 /* more header fields than this: 431 */

enum { HTTP_PARTIAL = -2, HTTP_ERROR = -1 };

struct http_header {
    const char *name;   /* token, as sent (case preserved) */
    size_t name_len;
    const char *value;  /* leading and trailing SP/HTAB trimmed; may be empty */
    size_t value_len;
};

struct http_request {
    const char *method;
    size_t method_len;
    const char *target;  /* request-target as sent */
    size_t target_len;
    int minor_version;   /* HTTP/1.<minor_version>: 0 or 1 */
    size_t num_headers;
    struct http_header headers[HTTP_MAX_HEADERS];
};

/* Parse one request head (request-line, header fields, empty line) from
 * buf[0..len). Returns the head's length in bytes (> 0) when complete;
 * HTTP_PARTIAL when more bytes are needed and the head is still under
 * max_head bytes; HTTP_ERROR with *status set to the status to answer with:
 *   400 malformed request-line or field (whitespace before the colon, obs-fold,
 *       control characters or NUL, bare CR/LF, empty or non-token name/method),
 *   414 request-line longer than max_head,
 *   431 head longer than max_head, or more than HTTP_MAX_HEADERS fields,
 *   505 a version other than HTTP/1.0 or HTTP/1.1 (HTTP/2.0, HTTP/3 ...);
 *       a version that is not HTTP-version syntax at all is 400.
 * Leading empty lines (CRLF) before the request-line are skipped (RFC 9112
 * §2.2) and counted in the returned length. */
int http_parse_request(const char *buf, size_t len, size_t max_head,
                       struct http_request *req, int *status);

enum http_body_kind { HTTP_BODY_NONE, HTTP_BODY_LENGTH, HTTP_BODY_CHUNKED };

struct http_framing {
    enum http_body_kind body;
    uint64_t content_length; /* HTTP_BODY_LENGTH only (0 means no body: body NONE) */
    bool keep_alive;         /* 1.1 unless "Connection: close"; 1.0 only with "keep-alive" */
    bool expect_continue;    /* "Expect: 100-continue" (1.1 only) */
    const char *host;        /* Host field value, or NULL */
    size_t host_len;
};

/* Interpret the fields that frame the message and the connection (RFC 9112
 * §6, §9.3; RFC 9110 §8.6, §10.1.1). Returns 0, or the status to answer with:
 *   400 Content-Length and Transfer-Encoding together; Content-Length not a
 *       plain decimal (signs, spaces inside, overflow), or duplicates/list
 *       members that differ (identical ones are one value); Transfer-Encoding
 *       whose final coding is not chunked, or chunked more than once, or on an
 *       HTTP/1.0 request; HTTP/1.1 without exactly one Host, or more than one
 *       Host in any version, or a Host that is not uri-host [":" port]
 *       (http_host_valid);
 *   501 a transfer coding other than chunked (gzip, deflate, compress, unknown);
 *   417 an Expect other than 100-continue. */
int http_request_framing(const struct http_request *req, struct http_framing *out);

/* The request-target split for WSGI (RFC 9112 §3.2). Views into the target. */
struct http_target {
    const char *path;  /* absolute path, still percent-encoded; "*" for asterisk-form */
    size_t path_len;
    const char *query; /* after the first '?', without it; empty if none */
    size_t query_len;
    bool has_query;
};

/* origin-form ("/p?q"); absolute-form ("http://host[:port]/p?q", scheme http
 * or https, case-insensitive; an empty path is "/"; the authority as
 * http_host_valid says, and not empty); asterisk-form ("*") only with
 * OPTIONS. Returns 0, or 400 for anything else (authority-form, a relative
 * path, a fragment '#', bytes outside VCHAR, userinfo, an invalid host). */
int http_split_target(const char *method, size_t method_len, const char *target,
                      size_t target_len, struct http_target *out);

/* The authority ("host[:port]") of a target http_split_target accepted in
 * absolute-form; false for the other forms. RFC 9112 §3.2.2: it overrides
 * the Host field. */
bool http_target_authority(const char *target, size_t target_len, const char **authority,
                           size_t *authority_len);

/* Whether host[0..len) is uri-host [":" port] (RFC 9110 §7.2, RFC 3986
 * §3.2.2): a reg-name (unreserved, sub-delims, %XX), an IPv4 address, or an
 * IP-literal in brackets (IPv6, IPvFuture); a port of digits up to 65535.
 * The empty value is valid (a target without an authority); a port without
 * a host (":80") is not. */
bool http_host_valid(const char *host, size_t len);

/* Percent-decode in[0..len) into out (out may equal in). An invalid escape
 * ("%zz", "%4" at the end) is copied as it is. Returns the output length. */
size_t http_percent_decode(const char *in, size_t len, char *out);

/* Streaming decoder for the chunked transfer coding, with trailers discarded
 * (after syntax checks). Chunk extensions are parsed and ignored. */
struct http_chunked {
    int state;          /* private */
    uint64_t remaining; /* private: data bytes left in the current chunk */
    size_t line_bytes;  /* private: bytes of the current size/trailer line */
    size_t trailer_bytes;
};

#define HTTP_CHUNKED_MAX_LINE 4096      /* a chunk-size line or trailer field longer: 400 */
#define HTTP_CHUNKED_MAX_TRAILERS 16384 /* trailer section longer: 431 */

void http_chunked_init(struct http_chunked *d);

/* Decode from in[0..in_len) into out[0..out_cap). out may equal in (decoding
 * never writes ahead of what it has read). Sets *in_used (bytes consumed) and
 * *out_len (data bytes written). Returns:
 *    1 the last chunk and the trailer section are consumed: the body is
 *      complete and in[*in_used..] belongs to the next request;
 *    0 in was used up or out is full: call again with more input or room;
 *   HTTP_ERROR with *status = 400 (bad size: sign, space, non-hex, overflow
 *      beyond 2^63; missing CRLF after data; bare LF; bad trailer field)
 *      or 431 (trailers too long). */
int http_chunked_decode(struct http_chunked *d, const char *in, size_t in_len,
                        size_t *in_used, char *out, size_t out_cap, size_t *out_len,
                        int *status);

/* ASCII case-insensitive comparison of a view with a lower-case literal. */
bool http_token_eq(const char *s, size_t len, const char *lower_literal);

#endif
