/* http_forwarded.h — a trusted proxy's word on the client (RFC 7239
 * Forwarded, X-Forwarded-{Proto,For,Host}): pure, no I/O. */
#ifndef CSERVE_HTTP_FORWARDED_H
#define CSERVE_HTTP_FORWARDED_H

#include <stdbool.h>
#include <stddef.h>

#include "http_parser.h"
#include "ip_allow.h"

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

/* The trust policy: whom to believe and which of their fields to read.
 * The caller owns it (the server parses the options into one at start-up
 * and hands a pointer to each reader); this file keeps none of its own, so
 * it stays pure. A zeroed policy believes no one. */
enum forwarded_field {
    FORWARDED_XFF = 1,     /* X-Forwarded-For */
    FORWARDED_XPROTO = 2,  /* X-Forwarded-Proto */
    FORWARDED_XHOST = 4,   /* X-Forwarded-Host */
    FORWARDED_RFC7239 = 8, /* Forwarded */
};

struct forwarded_policy {
    struct ip_allow peers; /* --forwarded-allow-ips */
    unsigned fields;       /* enum forwarded_field bits */
};

/* --forwarded-allow-ips into p's peers: IPs, CIDR networks, "unix" (a
 * unix: socket's peer, whose address is ""), "*" (any peer); "" trusts
 * none. Returns 0, or -1 with why in err. */
int forwarded_trust_parse(struct forwarded_policy *p, const char *list, char *err, size_t errcap);
/* --forwarded-headers into p's fields: which fields a trusted peer's word
 * is read from: x-forwarded-for, x-forwarded-proto, x-forwarded-host, or
 * forwarded (RFC 7239; not with the others). The option's default is
 * x-forwarded-for and x-forwarded-proto. Returns 0, or -1 with why in err
 * (p's fields unchanged). */
int forwarded_fields_parse(struct forwarded_policy *p, const char *list, char *err, size_t errcap);
/* Whether p believes peer; a NULL p believes no one. */
bool forwarded_trusted(const struct forwarded_policy *p, const char *peer);
/* What the request's fields say, when p trusts peer (returns false and
 * leaves *out empty otherwise; a NULL p trusts none). Spans point into the
 * request; host, when set, is host[:port] (http_host_valid). */
bool forwarded_read(const struct forwarded_policy *p, const struct http_request *req, const char *peer,
                    struct forwarded *out);

#endif
