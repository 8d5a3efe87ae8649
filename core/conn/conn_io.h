/* conn_io.h — the only system calls a connection makes after accept
 * (conn_io.c); the connection fuzzer and the corpus test link their own
 * versions (tests/fuzz/conn_harness.c). */
#ifndef CSERVE_CONN_IO_H
#define CSERVE_CONN_IO_H

#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

ssize_t conn_io_recv(int fd, void *buf, size_t len);
ssize_t conn_io_writev(int fd, const struct iovec *iov, int cnt);
ssize_t conn_io_sendfile(int fd, int file_fd, off_t *off, size_t len);
void conn_io_shutdown(int fd);
void conn_io_close(int fd);
/* Close a socket the loop registered, deleting its registration first. */
void conn_io_close_socket(int epfd, int fd);

#endif
