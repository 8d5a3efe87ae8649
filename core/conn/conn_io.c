/* conn_io.c — a connection's system calls, in one place so the rest of
 * conn*.c is bytes in, verdicts and bytes out: the fuzzers replace this file
 * and drive the real connection code without a socket. */
#include <sys/epoll.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn_io.h"

ssize_t conn_io_recv(int fd, void *buf, size_t len) { return recv(fd, buf, len, 0); }

ssize_t conn_io_writev(int fd, const struct iovec *iov, int cnt)
{
    if (cnt == 1) /* send: MSG_NOSIGNAL, and a little cheaper than writev */
        return send(fd, iov[0].iov_base, iov[0].iov_len, MSG_NOSIGNAL);
    struct msghdr msg = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)cnt};
    return sendmsg(fd, &msg, MSG_NOSIGNAL);
}

ssize_t conn_io_sendfile(int fd, int file_fd, off_t *off, size_t len)
{
    return sendfile(fd, file_fd, off, len);
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
