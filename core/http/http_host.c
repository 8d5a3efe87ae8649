/* http_host.c — is a Host field value, or an absolute-form target's
 * authority, a valid uri-host [ ":" port ] (RFC 9110 §4.2, §7.2; RFC 3986
 * §3.2.2, §3.2.3)? RFC 9112 §3.2 makes anything else a 400: a value such
 * as "a b" or "evil.example/x?y@z" must not reach the app as the host its
 * URLs are built from.
 *
 * An ordinary name or IPv4 address costs one table lookup a byte (the
 * reg-name loop), as the head parser's own loops do; only '%', '[' and the
 * port leave that loop. */
#include "http_parser.h"

#include <arpa/inet.h>
#include <string.h>

#include "http_chars.h"

/* IPvFuture = "v" 1*HEXDIG "." 1*( unreserved / sub-delims / ":" ) */
static bool ipvfuture_valid(const char *s, size_t len)
{
    if (len < 4 || (s[0] != 'v' && s[0] != 'V'))
        return false;
    size_t i = 1;
    while (i < len && http_hex_value((unsigned char)s[i]) >= 0)
        i++;
    if (i == 1 || i >= len - 1 || s[i] != '.')
        return false;
    for (i++; i < len; i++)
        if (!http_host_char[(unsigned char)s[i]] && s[i] != ':')
            return false;
    return true;
}

/* IP-literal = "[" ( IPv6address / IPvFuture ) "]", brackets removed. An
 * IPv6 zone ("%25eth0", RFC 6874) is not part of an http URI's host. */
static bool ip_literal_valid(const char *s, size_t len)
{
    if (len && (s[0] == 'v' || s[0] == 'V'))
        return ipvfuture_valid(s, len);
    char buf[INET6_ADDRSTRLEN];
    unsigned char addr[16];
    if (len == 0 || len >= sizeof buf)
        return false;
    memcpy(buf, s, len);
    buf[len] = '\0';
    return inet_pton(AF_INET6, buf, addr) == 1;
}

/* port = *DIGIT (RFC 3986 §3.2.3), and one a TCP connection can have. */
static bool port_valid(const char *s, size_t len)
{
    unsigned v = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned d = (unsigned char)s[i] - (unsigned)'0';
        if (d > 9)
            return false;
        v = v * 10 + d;
        if (v > 65535)
            return false;
    }
    return true;
}

bool http_host_valid(const char *s, size_t len)
{
    if (len == 0)
        return true; /* RFC 9110 §7.2: the target has no authority */
    size_t i = 0;
    if (s[0] == '[') {
        const char *close = memchr(s, ']', len);
        if (!close || !ip_literal_valid(s + 1, (size_t)(close - s) - 1))
            return false;
        i = (size_t)(close - s) + 1;
    } else {
        /* reg-name = *( unreserved / pct-encoded / sub-delims ) */
        for (;;) {
            while (i < len && http_host_char[(unsigned char)s[i]])
                i++;
            if (i + 2 < len && s[i] == '%' && http_hex_value((unsigned char)s[i + 1]) >= 0 &&
                http_hex_value((unsigned char)s[i + 2]) >= 0) {
                i += 3;
                continue;
            }
            break;
        }
        if (i == 0)
            return false; /* ":80": a port without a host (RFC 9110 §4.2.1) */
    }
    if (i == len)
        return true;
    return s[i] == ':' && port_valid(s + i + 1, len - i - 1);
}
