#include "listen.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"
#include "options.h"

static int listen_unix(const struct options *opt)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    snprintf(sun.sun_path, sizeof sun.sun_path, "%s", opt->bind_unix);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    unlink(opt->bind_unix); /* a stale socket file from an earlier run */
    if (bind(fd, (struct sockaddr *)&sun, sizeof sun) != 0 || listen(fd, opt->backlog) != 0) {
        log_error("cannot listen on unix:%s: %s", opt->bind_unix, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

int listen_open(const struct options *opt, bool reuseport)
{
    if (opt->bind_unix)
        return listen_unix(opt);
    char port[16];
    snprintf(port, sizeof port, "%d", opt->bind_port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV}, *res;
    int err = getaddrinfo(opt->bind_host, port, &hints, &res);
    if (err) {
        log_error("cannot resolve %s: %s", opt->bind_host, gai_strerror(err));
        return -1;
    }
    int fd = -1;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0)
            continue;
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (reuseport)
            setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, opt->backlog) == 0)
            break;
        log_error("cannot listen on %s:%s: %s", opt->bind_host, port, strerror(errno));
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    return fd;
}
