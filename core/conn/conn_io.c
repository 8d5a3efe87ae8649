/* conn_io.c — a connection's system calls, in one place so the rest of
 * conn*.c is bytes in, verdicts and bytes out: the fuzzers replace this file
 * and drive the real connection code without a socket. */
#include <sys/epoll.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn_io.h"
#include "../metrics/metrics.h"

/* Bytes in and out are counted here (metrics.h): a plain add on the loop
 * thread, the only caller. */
ssize_t conn_io_recv(int fd, void *buf, size_t len)
{
    ssize_t n = recv(fd, buf, len, 0);
    if (n > 0)
        counter_add(&metrics_counts.bytes_in, (uint64_t)n);
    return n;
}

ssize_t conn_io_writev(int fd, const struct iovec *iov, int cnt)
{
    ssize_t n;
    if (cnt == 1) { /* send: MSG_NOSIGNAL, and a little cheaper than writev */
        n = send(fd, iov[0].iov_base, iov[0].iov_len, MSG_NOSIGNAL);
    } else {
        struct msghdr msg = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)cnt};
        n = sendmsg(fd, &msg, MSG_NOSIGNAL);
    }
    if (n > 0)
        counter_add(&metrics_counts.bytes_out, (uint64_t)n);
    return n;
}

ssize_t conn_io_sendfile(int fd, int file_fd, off_t *off, size_t len)
{
    ssize_t n = sendfile(fd, file_fd, off, len);
    if (n > 0)
        counter_add(&metrics_counts.bytes_out, (uint64_t)n);
    return n;
}

void conn_io_shutdown(int fd) { shutdown(fd, SHUT_WR); }

void conn_io_close(int fd) { close(fd); }

/* An epoll registration belongs to the open file description, not to the
 * descriptor: if the app forked, a child's copy keeps the socket open after
 * close(), and its events would still name the connection the loop frees.
 * Deleting first means no event can ever arrive for it. */
void conn_io_close_socket(int epfd, int fd)
{
    epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
    close(fd);
}
