/* ip_allow.h — a list of peers by address: IPs, CIDR networks, "unix" (a
 * unix: socket's peer, which has no address) and "*" (any peer). Pure, no
 * I/O: the caller owns the parsed list. --forwarded-allow-ips (whose proxy
 * fields are believed) and --metrics-allow-ips (who may read the metrics)
 * are both one. */
#ifndef CSERVE_IP_ALLOW_H
#define CSERVE_IP_ALLOW_H

#include <stdbool.h>
#include <stddef.h>

#define IP_ALLOW_MAX_NETS 32

struct ip_net {
    int family;             /* AF_INET or AF_INET6 */
    unsigned char addr[16];
    unsigned bits;          /* prefix length */
};

struct ip_allow {
    struct ip_net nets[IP_ALLOW_MAX_NETS];
    unsigned n_nets;
    bool any;        /* '*' */
    bool unix_peers; /* 'unix' */
};

/* The text address s (IPv4, IPv6, [IPv6]) into family and out; an
 * IPv4-mapped IPv6 address (::ffff:a.b.c.d, a dual-stack listener's IPv4
 * peer) is taken as the IPv4 one. Returns whether s is an address. */
bool ip_parse(const char *s, size_t len, int *family, unsigned char out[16]);
/* A comma-separated list into a; "" lists none. Returns 0, or -1 with why
 * in err. */
int ip_allow_parse(struct ip_allow *a, const char *list, char *err, size_t errcap);
/* Whether the text address s (IPv4, IPv6, [IPv6], ::ffff:IPv4 taken as
 * IPv4) is in one of a's networks; '*' and 'unix' are not networks. */
bool ip_allow_in_nets(const struct ip_allow *a, const char *s, size_t len);
/* Whether a lists peer: the text address of a TCP peer, or "" for a unix:
 * socket's peer. */
bool ip_allow_peer(const struct ip_allow *a, const char *peer);

#endif
