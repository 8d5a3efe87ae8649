/* listen.h — the listening socket. */
#ifndef CSERVE_LISTEN_H
#define CSERVE_LISTEN_H

#include <stdbool.h>

struct options;

/* A non-blocking listening socket for opt's --bind; reuseport lets several
 * worker processes each have their own (the kernel spreads connections).
 * Returns the fd, or -1 after logging why. */
int listen_open(const struct options *opt, bool reuseport);

#endif
