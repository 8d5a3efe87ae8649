/* pipeload: a cheap HTTP/1.1 load generator for the loop-bound experiments.
 *
 *   pipeload [-t THREADS] [-c CONNS] [-p DEPTH] [-d SECONDS] [-n REQUESTS]
 *            [-B] [-b COOKIE_BYTES] [-k CHUNKS [-K CHUNK_BYTES]] http://HOST:PORT/PATH
 *
 * Each connection writes a preformatted batch of DEPTH identical requests in
 * one write, then reads until every response of the batch is complete, then
 * writes the next batch: a closed loop of DEPTH requests per connection, as
 * wrk with experiments/wrk/pipeline.lua or heads.lua, at a fraction of wrk's
 * CPU per request (no Lua, no per-request callbacks, one read per burst of
 * responses). Its point is the client's cost per request: with the loop
 * alone on a core, the loop bounds the server only where its cost per
 * request exceeds the pool's and the client's together.
 *
 * A response is complete when its head (status line and headers, ended by
 * an empty line) and Content-Length bytes of body have arrived; 1xx heads
 * are interim, 204 and 304 have no body. A response framed any other way
 * (chunked, no Content-Length, two different lengths), a head over 64 KiB,
 * a malformed status line or a response nobody asked for is a protocol
 * error: the connection is closed, counted and opened again, and the
 * batch's unanswered requests are counted as lost. Statuses are counted by
 * value.
 *
 * -B sends experiments/wrk/heads.lua's browser-like head (with -b, its
 * Cookie of COOKIE_BYTES bytes, made the same way); without it, wrk's own
 * two-line head (the request line and Host). -n stops after REQUESTS
 * responses (the last batches are shortened so the count is exact), or at
 * -d seconds, whichever is first. -k sends each request as a POST with a
 * chunked body of CHUNKS chunks of one byte ("1\r\nx\r\n" each, then the
 * last chunk): the server's loop decodes every chunk, while the client's
 * cost is one more copy of bytes made once and the app's is nothing (it
 * need not read the body), so the loop's cost per request grows alone.
 * -K makes each chunk CHUNK_BYTES long ("400\r\n", 1,024 x's, "\r\n"):
 * an upload in KiB-sized chunks, as a client streaming a file sends it,
 * which an app that reads its body pays for too.
 *
 * Output: wrk's summary lines, so the harness reads both clients alike ("N
 * requests in S", "Requests/sec:", "Latency" of a batch from its write to
 * its last response, "Socket errors:" with protocol errors counted as read
 * errors, "Non-2xx or 3xx responses:"), then one line "pipeload-json: {...}"
 * with every count. Exit status 0 when at least one response completed and
 * (with -n) all of them did, 1 otherwise, 2 on a usage error. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RBUF 65536 /* one read; also the largest response head accepted */
#define MAX_DEPTH 1024
#define MAX_CONNS 65536
#define MAX_THREADS 64
#define MAX_COOKIE (1L << 20)
#define MAX_CHUNKS (1L << 20)
#define MAX_CHUNK_BYTES (1L << 16)
#define MAX_BODY (64L << 20)    /* -k x -K: a request's body, at most */
#define MAX_BATCH (256UL << 20) /* a batch, -p requests, at most */
#define LAST_CHUNK "0\r\n\r\n"
#define MAX_STATUS 1000
#define RETRY_NS 10000000L /* a refused connect is tried again after 10 ms */

struct opts {
    int threads, conns, depth, browser;
    long cookie;
    long chunks; /* -k: a chunked body of this many chunks (0: GET, no body) */
    long chunk_bytes; /* -K: each chunk's size (default 1) */
    double seconds;
    long long total; /* -n: responses to complete, 0: run for -d */
    char host[256], port[16], path[4096];
};

struct stats {
    long long responses, status[MAX_STATUS], batches, bytes;
    long long err_connect, err_read, err_write, err_protocol, lost;
    double lat_sum, lat_sq, lat_max; /* µs per batch */
};

struct conn {
    int fd;
    size_t len;          /* unread bytes in buf */
    long long body_left; /* body bytes still due for the current response */
    int in_body, status, close_after, outstanding;
    size_t wpos, wlen; /* progress of the current batch's write */
    struct timespec sent, retry_at;
    char buf[RBUF];
};

struct worker {
    pthread_t th;
    int ep, nconn;
    struct conn *cs;
    struct stats st;
};

static struct opts O = {.threads = 1, .conns = 16, .depth = 16, .seconds = 10.0, .chunk_bytes = 1};
static char *batch; /* DEPTH copies of the request */
static size_t req_len;
static struct addrinfo *addr;
static atomic_llong issued, completed;
static struct timespec deadline;

static void ts_add_ns(struct timespec *t, long long ns)
{
    t->tv_sec += ns / 1000000000LL;
    t->tv_nsec += ns % 1000000000LL;
    if (t->tv_nsec >= 1000000000L) {
        t->tv_sec++;
        t->tv_nsec -= 1000000000L;
    }
}

static double us_between(const struct timespec *a, const struct timespec *b)
{
    return (double)(b->tv_sec - a->tv_sec) * 1e6 + (double)(b->tv_nsec - a->tv_nsec) / 1e3;
}

static int past(const struct timespec *t)
{
    struct timespec n;
    clock_gettime(CLOCK_MONOTONIC, &n);
    return n.tv_sec > t->tv_sec || (n.tv_sec == t->tv_sec && n.tv_nsec >= t->tv_nsec);
}

/* ------------------------------------------------------------ the request */

/* The Cookie value heads.lua makes: "_c001=bbb…; _c002=ccc…", cut to n bytes. */
static void append_cookie(char *dst, size_t *len, long n)
{
    long made = 0;
    for (int i = 1; made < n; i++) {
        char part[64];
        int k = snprintf(part, sizeof part, "%s_c%03d=", i > 1 ? "; " : "", i);
        memset(part + k, 'a' + i % 26, 40);
        k += 40;
        for (int j = 0; j < k && made < n; j++, made++)
            dst[(*len)++] = part[j];
    }
}

static const char BROWSER[] =
    "User-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/120.0.0.0 Safari/537.36\r\n"
    "Accept: text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8\r\n"
    "Accept-Language: en-GB,en-US;q=0.9,en;q=0.8\r\n"
    "Accept-Encoding: gzip, deflate, br\r\n"
    "Cache-Control: max-age=0\r\n"
    "Sec-Fetch-Dest: document\r\n"
    "Sec-Fetch-Mode: navigate\r\n"
    "Sec-Fetch-Site: none\r\n"
    "Upgrade-Insecure-Requests: 1\r\n";

static int make_batch(void)
{
    size_t cap = 512 + sizeof BROWSER + (size_t)O.cookie + strlen(O.path) + strlen(O.host) +
                 (size_t)O.chunks * ((size_t)O.chunk_bytes + 24) + sizeof LAST_CHUNK;
    char *one = malloc(cap);
    if (!one)
        return -1;
    size_t len = (size_t)snprintf(one, cap, "%s %s HTTP/1.1\r\nHost: %s:%s\r\n", O.chunks ? "POST" : "GET", O.path,
                                  O.host, O.port);
    if (O.chunks) {
        static const char te[] = "Transfer-Encoding: chunked\r\n";
        memcpy(one + len, te, sizeof te - 1);
        len += sizeof te - 1;
    }
    if (O.browser) {
        memcpy(one + len, BROWSER, sizeof BROWSER - 1);
        len += sizeof BROWSER - 1;
        if (O.cookie > 0) {
            memcpy(one + len, "Cookie: ", 8);
            len += 8;
            append_cookie(one, &len, O.cookie);
            memcpy(one + len, "\r\n", 2);
            len += 2;
        }
    }
    memcpy(one + len, "\r\n", 2);
    len += 2;
    for (long i = 0; i < O.chunks; i++) {
        len += (size_t)snprintf(one + len, cap - len, "%lx\r\n", O.chunk_bytes);
        memset(one + len, 'x', (size_t)O.chunk_bytes);
        len += (size_t)O.chunk_bytes;
        memcpy(one + len, "\r\n", 2);
        len += 2;
    }
    if (O.chunks) {
        memcpy(one + len, LAST_CHUNK, sizeof LAST_CHUNK - 1);
        len += sizeof LAST_CHUNK - 1;
    }
    req_len = len;
    if (len > MAX_BATCH / (size_t)O.depth) { /* -p times the request: refused rather than an OOM */
        free(one);
        return -1;
    }
    batch = malloc(len * (size_t)O.depth);
    if (batch)
        for (int i = 0; i < O.depth; i++)
            memcpy(batch + (size_t)i * len, one, len);
    free(one);
    return batch ? 0 : -1;
}

/* --------------------------------------------------------- the response */

static int token_in(const char *v, size_t n, const char *tok)
{
    size_t t = strlen(tok);
    for (size_t i = 0; i + t <= n; i++)
        if (strncasecmp(v + i, tok, t) == 0 && (i == 0 || v[i - 1] == ' ' || v[i - 1] == ',' || v[i - 1] == '\t') &&
            (i + t == n || v[i + t] == ' ' || v[i + t] == ',' || v[i + t] == '\t' || v[i + t] == '\r'))
            return 1;
    return 0;
}

/* One response head p[0..n), n counting its final empty line. Sets *status,
 * *clen (-1 where absent), *chunked and *close_conn; -1 where the status
 * line or a Content-Length is malformed, or two lengths differ. */
static int parse_head(const char *p, size_t n, int *status, long long *clen, int *chunked, int *close_conn)
{
    *clen = -1;
    *chunked = *close_conn = 0;
    if (n < 14 || memcmp(p, "HTTP/1.", 7) != 0 || (p[7] != '0' && p[7] != '1') || p[8] != ' ')
        return -1;
    if (p[9] < '1' || p[9] > '9' || p[10] < '0' || p[10] > '9' || p[11] < '0' || p[11] > '9' ||
        (p[12] != ' ' && p[12] != '\r'))
        return -1;
    *status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
    *close_conn = p[7] == '0'; /* HTTP/1.0: closed unless kept alive */
    const char *end = p + n - 2, *line = memchr(p, '\n', n);
    if (!line)
        return -1;
    for (line++; line < end;) {
        const char *eol = memchr(line, '\n', (size_t)(end - line) + 1);
        if (!eol)
            return -1;
        const char *colon = memchr(line, ':', (size_t)(eol - line));
        if (!colon)
            return -1;
        size_t name = (size_t)(colon - line);
        const char *v = colon + 1;
        while (v < eol && (*v == ' ' || *v == '\t'))
            v++;
        size_t vn = (size_t)(eol - v);
        while (vn && (v[vn - 1] == '\r' || v[vn - 1] == ' ' || v[vn - 1] == '\t'))
            vn--;
        if (name == 14 && strncasecmp(line, "Content-Length", 14) == 0) {
            long long x = 0;
            if (vn == 0 || vn > 15)
                return -1;
            for (size_t i = 0; i < vn; i++) {
                if (v[i] < '0' || v[i] > '9')
                    return -1;
                x = x * 10 + (v[i] - '0');
            }
            if (*clen >= 0 && *clen != x)
                return -1;
            *clen = x;
        } else if (name == 17 && strncasecmp(line, "Transfer-Encoding", 17) == 0) {
            *chunked |= token_in(v, vn, "chunked");
        } else if (name == 10 && strncasecmp(line, "Connection", 10) == 0) {
            if (token_in(v, vn, "close"))
                *close_conn = 1;
            else if (token_in(v, vn, "keep-alive"))
                *close_conn = 0;
        }
        line = eol + 1;
    }
    return 0;
}

/* ------------------------------------------------------- the connections */

/* The next batch's size: DEPTH, or (-n) what is left to issue; 0: none. */
static int take_batch(void)
{
    if (!O.total)
        return past(&deadline) ? 0 : O.depth;
    long long have = atomic_load(&issued);
    for (;;) {
        long long left = O.total - have;
        if (left <= 0 || past(&deadline))
            return 0;
        int k = left < O.depth ? (int)left : O.depth;
        if (atomic_compare_exchange_weak(&issued, &have, have + k))
            return k;
    }
}

static void conn_close(struct worker *w, struct conn *c)
{
    if (c->fd >= 0) {
        epoll_ctl(w->ep, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
    }
    c->fd = -1;
    /* A batch cut short: with -n its unanswered requests are issued again. */
    if (c->outstanding) {
        w->st.lost += c->outstanding;
        if (O.total)
            atomic_fetch_sub(&issued, c->outstanding);
    }
    c->outstanding = 0;
    clock_gettime(CLOCK_MONOTONIC, &c->retry_at);
}

static int events(struct worker *w, struct conn *c, int op, uint32_t ev)
{
    struct epoll_event e = {.events = ev, .data.ptr = c};
    return epoll_ctl(w->ep, op, c->fd, &e);
}

static int flush_write(struct worker *w, struct conn *c)
{
    while (c->wpos < c->wlen) {
        ssize_t n = send(c->fd, batch + c->wpos, c->wlen - c->wpos, MSG_NOSIGNAL);
        if (n > 0) {
            c->wpos += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return events(w, c, EPOLL_CTL_MOD, EPOLLIN | EPOLLOUT);
        w->st.err_write++;
        return -1;
    }
    return events(w, c, EPOLL_CTL_MOD, EPOLLIN);
}

/* Write the next batch, if there is one; -1 when the write failed. */
static int next_batch(struct worker *w, struct conn *c)
{
    int k = take_batch();
    if (!k)
        return 0;
    c->outstanding = k;
    c->wpos = 0;
    c->wlen = req_len * (size_t)k;
    clock_gettime(CLOCK_MONOTONIC, &c->sent);
    return flush_write(w, c);
}

static void conn_open(struct worker *w, struct conn *c)
{
    int one = 1;
    c->len = 0;
    c->body_left = 0;
    c->in_body = c->close_after = c->outstanding = 0;
    c->fd = socket(addr->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    /* Blocking connect (loopback: immediate), then non-blocking I/O. */
    if (c->fd < 0 || connect(c->fd, addr->ai_addr, addr->ai_addrlen) < 0 ||
        fcntl(c->fd, F_SETFL, O_NONBLOCK) < 0 || events(w, c, EPOLL_CTL_ADD, EPOLLIN) < 0) {
        w->st.err_connect++;
        if (c->fd >= 0)
            close(c->fd);
        c->fd = -1;
        clock_gettime(CLOCK_MONOTONIC, &c->retry_at);
        ts_add_ns(&c->retry_at, RETRY_NS);
        return;
    }
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (next_batch(w, c) < 0)
        conn_close(w, c);
}

/* A response is complete: count it; at the batch's end, write the next. */
static int complete(struct worker *w, struct conn *c)
{
    w->st.responses++;
    w->st.status[c->status]++;
    atomic_fetch_add_explicit(&completed, 1, memory_order_relaxed);
    if (--c->outstanding == 0) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        double us = us_between(&c->sent, &now);
        w->st.batches++;
        w->st.lat_sum += us;
        w->st.lat_sq += us * us;
        if (us > w->st.lat_max)
            w->st.lat_max = us;
    }
    if (c->close_after) /* the server closes: the rest of the batch is lost */
        return 1;
    if (c->outstanding == 0)
        return next_batch(w, c) < 0 ? 1 : 0;
    return 0;
}

/* Consume what buf holds. 0: go on; 1: close (the server's wish, or a
 * failed write); -1: a protocol error. */
static int consume(struct worker *w, struct conn *c)
{
    size_t off = 0;
    int rc = 0;
    while (off < c->len && rc == 0) {
        if (c->in_body) {
            size_t avail = c->len - off;
            size_t take = (long long)avail < c->body_left ? avail : (size_t)c->body_left;
            off += take;
            c->body_left -= (long long)take;
            if (c->body_left)
                break;
            c->in_body = 0;
            rc = complete(w, c);
            continue;
        }
        char *head = c->buf + off, *end = memmem(head, c->len - off, "\r\n\r\n", 4);
        if (!end) {
            if (off == 0 && c->len == RBUF)
                return -1; /* a head larger than the buffer */
            break;
        }
        size_t hlen = (size_t)(end + 4 - head);
        long long clen;
        int chunked, close_conn;
        if (parse_head(head, hlen, &c->status, &clen, &chunked, &close_conn) < 0)
            return -1;
        off += hlen;
        if (c->status < 200)
            continue; /* interim: the final response follows */
        if (c->outstanding == 0 || c->status >= MAX_STATUS)
            return -1;
        c->close_after = close_conn;
        if (c->status == 204 || c->status == 304)
            clen = 0;
        else if (chunked || clen < 0)
            return -1;
        c->body_left = clen;
        if (clen > 0)
            c->in_body = 1;
        else
            rc = complete(w, c);
    }
    memmove(c->buf, c->buf + off, c->len - off);
    c->len -= off;
    return rc;
}

static void on_readable(struct worker *w, struct conn *c)
{
    for (;;) {
        ssize_t n = recv(c->fd, c->buf + c->len, RBUF - c->len, 0);
        if (n > 0) {
            c->len += (size_t)n;
            w->st.bytes += n;
            int rc = consume(w, c);
            if (rc < 0)
                w->st.err_protocol++;
            if (rc)
                conn_close(w, c);
            return; /* level-triggered: epoll says when there is more */
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        /* EOF or an error: a read error where a response was due */
        if (c->outstanding || c->len || n < 0)
            w->st.err_read++;
        conn_close(w, c);
        return;
    }
}

static int done(struct worker *w)
{
    if (past(&deadline))
        return 1;
    if (!O.total || atomic_load(&issued) < O.total)
        return 0;
    for (int i = 0; i < w->nconn; i++)
        if (w->cs[i].outstanding)
            return 0;
    return 1;
}

static void *run(void *arg)
{
    struct worker *w = arg;
    struct epoll_event ev[256];
    for (int i = 0; i < w->nconn; i++) {
        w->cs[i].fd = -1;
        conn_open(w, &w->cs[i]);
    }
    while (!done(w)) {
        int n = epoll_wait(w->ep, ev, 256, 10);
        for (int i = 0; i < n; i++) {
            struct conn *c = ev[i].data.ptr;
            if (c->fd < 0)
                continue;
            if ((ev[i].events & EPOLLOUT) && c->wpos < c->wlen && flush_write(w, c) < 0) {
                conn_close(w, c);
                continue;
            }
            if (ev[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
                on_readable(w, c);
        }
        for (int i = 0; i < w->nconn; i++) { /* reopen what the server or an error closed */
            struct conn *c = &w->cs[i];
            if (c->fd < 0 && past(&c->retry_at) && !past(&deadline))
                conn_open(w, c);
            else if (c->fd >= 0 && !c->outstanding && c->wpos >= c->wlen && next_batch(w, c) < 0)
                conn_close(w, c); /* -n: a connection idle while others gave requests back */
        }
    }
    for (int i = 0; i < w->nconn; i++)
        if (w->cs[i].fd >= 0) {
            w->cs[i].outstanding = 0; /* cut off by the end of the run: not lost */
            conn_close(w, &w->cs[i]);
        }
    return NULL;
}

/* ------------------------------------------------------------- the main */

static void usage(void)
{
    fprintf(stderr, "usage: pipeload [-t THREADS] [-c CONNS] [-p DEPTH] [-d SECONDS] [-n REQUESTS] [-B] "
                    "[-b COOKIE_BYTES] [-k CHUNKS [-K CHUNK_BYTES]] http://HOST:PORT/PATH\n");
    exit(2);
}

static long num_arg(const char *s, long lo, long hi)
{
    char *e;
    errno = 0;
    long v = strtol(s, &e, 10);
    if (errno || *e || v < lo || v > hi)
        usage();
    return v;
}

static void parse_url(const char *u)
{
    if (strncmp(u, "http://", 7) != 0)
        usage();
    u += 7;
    const char *slash = strchr(u, '/'), *hend, *colon;
    size_t auth = slash ? (size_t)(slash - u) : strlen(u);
    if (u[0] == '[') { /* [v6]:port */
        hend = memchr(u, ']', auth);
        if (!hend)
            usage();
        if ((size_t)(hend - u - 1) >= sizeof O.host)
            usage();
        memcpy(O.host, u + 1, (size_t)(hend - u - 1));
        colon = hend + 1 < u + auth && hend[1] == ':' ? hend + 1 : NULL;
    } else {
        colon = memchr(u, ':', auth);
        size_t hl = colon ? (size_t)(colon - u) : auth;
        if (hl == 0 || hl >= sizeof O.host)
            usage();
        memcpy(O.host, u, hl);
    }
    size_t pl = colon ? (size_t)(u + auth - colon - 1) : 2;
    if (pl == 0 || pl >= sizeof O.port)
        usage();
    memcpy(O.port, colon ? colon + 1 : "80", pl);
    const char *path = slash ? slash : "/";
    if (strlen(path) >= sizeof O.path)
        usage();
    strcpy(O.path, path);
}

static void fmt_time(char *out, size_t n, double us)
{
    if (us < 1000)
        snprintf(out, n, "%.2fus", us);
    else if (us < 1e6)
        snprintf(out, n, "%.2fms", us / 1e3);
    else
        snprintf(out, n, "%.2fs", us / 1e6);
}

int main(int argc, char **argv)
{
    int opt;
    while ((opt = getopt(argc, argv, "t:c:p:d:n:b:Bk:K:")) != -1) {
        switch (opt) {
        case 't': O.threads = (int)num_arg(optarg, 1, MAX_THREADS); break;
        case 'c': O.conns = (int)num_arg(optarg, 1, MAX_CONNS); break;
        case 'p': O.depth = (int)num_arg(optarg, 1, MAX_DEPTH); break;
        case 'd': {
            char *e;
            O.seconds = strtod(optarg, &e);
            if (*e == 's')
                e++;
            if (*e || !(O.seconds > 0 && O.seconds <= 86400))
                usage();
            break;
        }
        case 'n': O.total = num_arg(optarg, 1, 1L << 40); break;
        case 'b': O.cookie = num_arg(optarg, 0, MAX_COOKIE); break;
        case 'B': O.browser = 1; break;
        case 'k': O.chunks = num_arg(optarg, 1, MAX_CHUNKS); break;
        case 'K': O.chunk_bytes = num_arg(optarg, 1, MAX_CHUNK_BYTES); break;
        default: usage();
        }
    }
    if (optind != argc - 1 || O.threads > O.conns || (O.cookie && !O.browser) ||
        (O.chunk_bytes > 1 && !O.chunks) || O.chunks * O.chunk_bytes > MAX_BODY)
        usage();
    parse_url(argv[optind]);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM};
    int gai = getaddrinfo(O.host, O.port, &hints, &addr);
    if (gai) {
        fprintf(stderr, "pipeload: %s:%s: %s\n", O.host, O.port, gai_strerror(gai));
        return 2;
    }
    if (make_batch() < 0) {
        fprintf(stderr, "pipeload: a batch of %d requests is too large or out of memory\n", O.depth);
        return 2;
    }
    struct worker *ws = calloc((size_t)O.threads, sizeof *ws);
    if (!ws)
        return 2;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    deadline = t0;
    ts_add_ns(&deadline, (long long)(O.seconds * 1e9));
    for (int i = 0; i < O.threads; i++) {
        struct worker *w = &ws[i];
        w->nconn = O.conns / O.threads + (i < O.conns % O.threads);
        w->cs = calloc((size_t)w->nconn, sizeof *w->cs);
        w->ep = epoll_create1(EPOLL_CLOEXEC);
        if (!w->cs || w->ep < 0 || pthread_create(&w->th, NULL, run, w) != 0) {
            fprintf(stderr, "pipeload: cannot start thread %d\n", i);
            return 2;
        }
    }
    struct stats s = {0};
    for (int i = 0; i < O.threads; i++) {
        pthread_join(ws[i].th, NULL);
        struct stats *t = &ws[i].st;
        s.responses += t->responses;
        s.batches += t->batches;
        s.bytes += t->bytes;
        s.err_connect += t->err_connect;
        s.err_read += t->err_read;
        s.err_write += t->err_write;
        s.err_protocol += t->err_protocol;
        s.lost += t->lost;
        s.lat_sum += t->lat_sum;
        s.lat_sq += t->lat_sq;
        if (t->lat_max > s.lat_max)
            s.lat_max = t->lat_max;
        for (int k = 0; k < MAX_STATUS; k++)
            s.status[k] += t->status[k];
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = us_between(&t0, &t1) / 1e6;
    double mean = s.batches ? s.lat_sum / (double)s.batches : 0;
    double sd = s.batches ? sqrt(fmax(0.0, s.lat_sq / (double)s.batches - mean * mean)) : 0;
    long long non2xx = 0;
    for (int k = 0; k < MAX_STATUS; k++)
        if (k < 200 || k > 399)
            non2xx += s.status[k];
    char a[32], b[32], c[32], d[32];
    fmt_time(a, sizeof a, mean);
    fmt_time(b, sizeof b, sd);
    fmt_time(c, sizeof c, s.lat_max);
    fmt_time(d, sizeof d, secs * 1e6);
    printf("Running %.0fs test @ %s\n", O.seconds, argv[optind]);
    printf("  %d threads and %d connections, %d requests per batch (pipeload)\n", O.threads, O.conns, O.depth);
    printf("  Thread Stats   Avg      Stdev     Max\n    Latency   %s   %s   %s\n", a, b, c);
    printf("  %lld requests in %s, %.2fMB read\n", s.responses, d, (double)s.bytes / 1048576.0);
    if (s.err_connect || s.err_read || s.err_write || s.err_protocol)
        printf("  Socket errors: connect %lld, read %lld, write %lld, timeout 0\n", s.err_connect,
               s.err_read + s.err_protocol, s.err_write);
    if (non2xx)
        printf("  Non-2xx or 3xx responses: %lld\n", non2xx);
    printf("Requests/sec: %.2f\n", secs > 0 ? (double)s.responses / secs : 0.0);
    printf("pipeload-json: {\"requests\": %lld, \"seconds\": %.6f, \"batches\": %lld, \"batch_latency_us\": %.3f, "
           "\"bytes\": %lld, \"errors\": {\"connect\": %lld, \"read\": %lld, \"write\": %lld, \"protocol\": %lld}, "
           "\"lost\": %lld, \"threads\": %d, \"connections\": %d, \"depth\": %d, \"statuses\": {",
           s.responses, secs, s.batches, mean, s.bytes, s.err_connect, s.err_read, s.err_write, s.err_protocol,
           s.lost, O.threads, O.conns, O.depth);
    const char *sep = "";
    for (int k = 0; k < MAX_STATUS; k++)
        if (s.status[k]) {
            printf("%s\"%d\": %lld", sep, k, s.status[k]);
            sep = ", ";
        }
    printf("}}\n");
    fflush(stdout);
    for (int i = 0; i < O.threads; i++) {
        close(ws[i].ep);
        free(ws[i].cs);
    }
    free(ws);
    free(batch);
    freeaddrinfo(addr);
    return s.responses > 0 && (!O.total || s.responses == O.total) ? 0 : 1;
}
