/* http_forwarded.h — a trusted proxy's word on the client (RFC 7239
 * Forwarded, X-Forwarded-{Proto,For,Host}): pure, no I/O. */
#ifndef CSERVE_HTTP_FORWARDED_H
#define CSERVE_HTTP_FORWARDED_H

#include <stdbool.h>
#include <stddef.h>

#include "http_parser.h"

struct span {
    const char *p; /* a view into the request; len 0: none */
    size_t len;
};

struct forwarded {
    struct span proto;  /* "http" or "https" */
    bool https;
    struct span client; /* an IP address, brackets removed */
    struct span host;   /* host[:port], only host characters */
};

/* --forwarded-allow-ips: IPs, CIDR networks, "unix" (a unix: socket's
 * peer, whose address is ""), "*" (any peer); "" trusts none. Returns 0,
 * or -1 with why in err. */
int forwarded_trust_parse(const char *list, char *err, size_t errcap);
/* --forwarded-headers: which fields a trusted peer's word is read from:
 * x-forwarded-for, x-forwarded-proto, x-forwarded-host, or forwarded (RFC
 * 7239; not with the others). Until called: x-forwarded-for and
 * x-forwarded-proto. Returns 0, or -1 with why in err. */
int forwarded_fields_parse(const char *list, char *err, size_t errcap);
bool forwarded_trusted(const char *peer);
/* What the request's fields say, when peer is trusted (returns false and
 * leaves *out empty otherwise). Spans point into the request; host, when
 * set, is host[:port] (http_host_valid). */
bool forwarded_read(const struct http_request *req, const char *peer, struct forwarded *out);

#endif
