/* ip_allow.c — a list of peers by address (ip_allow.h). */
#include "ip_allow.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

bool ip_parse(const char *s, size_t len, int *family, unsigned char out[16])
{
    char buf[INET6_ADDRSTRLEN + 2];
    if (len >= 2 && s[0] == '[' && s[len - 1] == ']') { /* [::1] as Forwarded writes it */
        s++;
        len -= 2;
    }
    if (len == 0 || len >= sizeof buf)
        return false;
    memcpy(buf, s, len);
    buf[len] = '\0';
    if (inet_pton(AF_INET, buf, out) == 1) {
        *family = AF_INET;
        return true;
    }
    if (inet_pton(AF_INET6, buf, out) == 1) {
        /* ::ffff:a.b.c.d is the IPv4 peer of a dual-stack listener. */
        static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        if (memcmp(out, mapped, 12) == 0) {
            memmove(out, out + 12, 4);
            *family = AF_INET;
        } else {
            *family = AF_INET6;
        }
        return true;
    }
    return false;
}

int ip_allow_parse(struct ip_allow *a, const char *list, char *err, size_t errcap)
{
    a->n_nets = 0;
    a->any = false;
    a->unix_peers = false;
    const char *p = list;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        while (len && (*p == ' ' || *p == '\t')) {
            p++;
            len--;
        }
        while (len && (p[len - 1] == ' ' || p[len - 1] == '\t'))
            len--;
        if (len == 1 && *p == '*') {
            a->any = true;
        } else if (len == 4 && strncasecmp(p, "unix", 4) == 0) {
            a->unix_peers = true;
        } else if (len) {
            const char *slash = memchr(p, '/', len);
            size_t alen = slash ? (size_t)(slash - p) : len;
            struct ip_net *n = &a->nets[a->n_nets];
            if (a->n_nets == IP_ALLOW_MAX_NETS || !ip_parse(p, alen, &n->family, n->addr)) {
                snprintf(err, errcap, "'%.*s' is not an IP address, a CIDR network, 'unix' or '*'%s",
                         (int)len, p, a->n_nets == IP_ALLOW_MAX_NETS ? " (or too many)" : "");
                return -1;
            }
            unsigned max = n->family == AF_INET ? 32 : 128;
            n->bits = max;
            if (slash) {
                /* Digits only: strtoul would also take "/ 8", "/+8" and "/-0". */
                const char *d = slash + 1;
                unsigned long b = 0;
                while (d < p + len && *d >= '0' && *d <= '9' && b <= max)
                    b = b * 10 + (unsigned long)(*d++ - '0');
                if (d != p + len || d == slash + 1 || b > max) {
                    snprintf(err, errcap, "'%.*s': the prefix length must be 0 to %u", (int)len, p, max);
                    return -1;
                }
                n->bits = (unsigned)b;
            }
            a->n_nets++;
        }
        if (!end)
            break;
        p = end + 1;
    }
    return 0;
}

static bool in_net(const struct ip_net *n, int family, const unsigned char *addr)
{
    if (n->family != family)
        return false;
    unsigned full = n->bits / 8, rest = n->bits % 8;
    if (memcmp(n->addr, addr, full) != 0)
        return false;
    if (!rest)
        return true;
    unsigned char mask = (unsigned char)(0xff << (8 - rest));
    return (n->addr[full] & mask) == (addr[full] & mask);
}

bool ip_allow_in_nets(const struct ip_allow *a, const char *s, size_t len)
{
    int family;
    unsigned char addr[16];
    if (!ip_parse(s, len, &family, addr))
        return false;
    for (unsigned i = 0; i < a->n_nets; i++)
        if (in_net(&a->nets[i], family, addr))
            return true;
    return false;
}

bool ip_allow_peer(const struct ip_allow *a, const char *peer)
{
    if (!*peer) /* a unix: socket's peer has no address */
        return a->unix_peers || a->any;
    return a->any || ip_allow_in_nets(a, peer, strlen(peer));
}
