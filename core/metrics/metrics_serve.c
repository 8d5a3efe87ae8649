/* metrics_serve.c — the thread that serves --metrics-bind.
 *
 * A listener of its own (bound by the server's binder, ../server/listen.c,
 * and handed over) and a thread of its own: nothing a metrics client does
 * (a huge head, a slow read, a flood) reaches the app's listener or a loop
 * thread. The thread polls its listener and at most MAX_CONNS clients,
 * each closed at its deadline, so a slow client holds a slot, never the
 * thread. A request is one head of at most HEAD_MAX bytes, parsed by the
 * server's own parser (../http/), answered and closed (no keep-alive, no
 * body); the answer's head is the loop's (../http/response_head.c). Twice
 * a second the thread samples every worker's slot (metrics_history.c).
 *
 * Requests to it are hostile too. A peer not in --metrics-allow-ips
 * (loopback and unix: by default) gets 403, counted. And a browser on the
 * same machine is a client: a page of another origin may reach a loopback
 * port by rebinding its own name to 127.0.0.1, and then reads what it
 * fetches. Its requests carry that name in Host, so a listener bound to
 * loopback answers only Host values that name it (its bound address or
 * localhost, any port: a tunnel may change the port, a rebinding page
 * cannot change the name) and 421 to others. A listener bound to another
 * address takes any Host (a scraper names it as it likes): there the
 * allow-list is the guard (docs/instruments.md says what that leaves). */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../lib/clock.h"
#include "../base/log.h"
#include "../base/options.h"
#include "../http/buffer.h"
#include "../http/http_parser.h"
#include "../http/ip_allow.h"
#include "../http/response_head.h"
#include "metrics.h"
#include "metrics_internal.h"

#define MAX_CONNS 32
#define HEAD_MAX 4096          /* a request head longer than this: 431 (414 for its request line) */
#define HEAD_DEADLINE_MS 2000  /* from accept to a complete head */
#define SEND_DEADLINE_MS 5000  /* from the head to the last byte written */
#define LINGER_MS 2000         /* after the answer, reading what the client still sends ... */
#define LINGER_MAX (64 * 1024) /* ... up to this much, so that a close does not reset the answer */
#define ACCEPT_PAUSE_MS 100    /* out of descriptors: the loop's pause (../conn/loop.c) */

extern const char cserve_dashboard_html[];
extern const unsigned cserve_dashboard_html_len;

enum client_state { C_FREE, C_HEAD, C_WAIT, C_SEND, C_LINGER };
enum endpoint { EP_PAGE, EP_METRICS, EP_JSON };

struct client {
    int fd;
    enum client_state state;
    uint64_t deadline_ms;
    char *in;               /* HEAD_MAX bytes, an allocation of its own: a read past it is caught (ASan) */
    size_t in_len;
    size_t discarded;       /* C_LINGER: bytes read and dropped */
    struct buffer out;      /* C_SEND: the answer */
    size_t out_off;
    bool head_only;
    bool refused;           /* the peer is not in --metrics-allow-ips: 403 to its head */
    bool loopback_peer;     /* Host is checked for it (host_allowed) */
    enum endpoint wait_for; /* C_WAIT: /stats.json?wait=1, answered after the next sample */
};

/* The metrics thread's state: one listener per process. */
static struct {
    int listen_fd, wake_fd;
    pthread_t thread;
    bool running;
    atomic_bool stop;
    pthread_mutex_t fork_lock; /* start/stop against a fork on another thread */
    bool paused;               /* stopped for a fork, to start again after it */
    uint64_t accept_paused_until;
    bool accept_logged;        /* the pause was logged: once until an accept succeeds */
    bool any_host;             /* not bound to loopback: no Host check (see the top) */
    struct ip_allow allow;     /* --metrics-allow-ips */
    uint64_t refused;          /* connections refused for it (this thread's alone) */
    int family;                /* else the address it is bound to */
    unsigned char addr[16];
    char described[NI_MAXHOST + NI_MAXSERV + 16];
    struct client clients[MAX_CONNS];
    struct metrics_view view;
} listener = {.listen_fd = -1, .wake_fd = -1, .fork_lock = PTHREAD_MUTEX_INITIALIZER};

/* ---- Host ---- */

/* The listener's own address, for the Host check and the start-up line. */
static void learn_address(void)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    listener.any_host = true;
    snprintf(listener.described, sizeof listener.described, "%s", listener.view.opt->metrics_bind);
    if (getsockname(listener.listen_fd, (struct sockaddr *)&ss, &len) != 0)
        return;
    if (ss.ss_family == AF_INET)
        memcpy(listener.addr, &((struct sockaddr_in *)&ss)->sin_addr, 4);
    else if (ss.ss_family == AF_INET6)
        memcpy(listener.addr, &((struct sockaddr_in6 *)&ss)->sin6_addr, 16);
    else
        return;
    listener.family = ss.ss_family;
    listener.any_host = ss.ss_family == AF_INET ? listener.addr[0] != 127
                                                : !IN6_IS_ADDR_LOOPBACK((struct in6_addr *)listener.addr);
    char host[NI_MAXHOST], serv[NI_MAXSERV];
    if (getnameinfo((struct sockaddr *)&ss, len, host, sizeof host, serv, sizeof serv,
                    NI_NUMERICHOST | NI_NUMERICSERV) == 0)
        snprintf(listener.described, sizeof listener.described, listener.family == AF_INET6 ? "http://[%s]:%s" : "http://%s:%s",
                 host, serv);
}

/* Host (or an absolute-form target's authority) names this listener:
 * localhost or its bound address (IPv6 in brackets), with or without a
 * port. A listener bound beyond loopback (0.0.0.0, [::]) still checks a
 * loopback peer, a browser on this host that a rebinding page may steer:
 * for it Host must be localhost or a loopback address. */
static bool host_allowed(const char *h, size_t n, bool loopback_peer)
{
    if (listener.any_host && !loopback_peer)
        return true;
    if (!h || !n)
        return false;
    const char *name = h, *rest;
    size_t name_len;
    bool bracket = h[0] == '[';
    if (bracket) {
        const char *close = memchr(h, ']', n);
        if (!close)
            return false;
        name = h + 1;
        name_len = (size_t)(close - name);
        rest = close + 1;
    } else {
        const char *colon = memchr(h, ':', n);
        name_len = colon ? (size_t)(colon - h) : n;
        rest = h + name_len;
    }
    size_t rest_len = (size_t)(h + n - rest);
    if (rest_len) {
        if (rest[0] != ':' || rest_len > 6)
            return false;
        for (size_t i = 1; i < rest_len; i++)
            if (rest[i] < '0' || rest[i] > '9')
                return false;
    }
    if (!bracket && http_token_eq(name, name_len, "localhost"))
        return true;
    char text[INET6_ADDRSTRLEN];
    unsigned char a[16];
    if (name_len >= sizeof text)
        return false;
    memcpy(text, name, name_len);
    text[name_len] = '\0';
    if (listener.any_host) {
        if (bracket)
            return inet_pton(AF_INET6, text, a) == 1 && IN6_IS_ADDR_LOOPBACK((struct in6_addr *)a);
        return inet_pton(AF_INET, text, a) == 1 && a[0] == 127;
    }
    if (listener.family == AF_INET6)
        return bracket && inet_pton(AF_INET6, text, a) == 1 && memcmp(a, listener.addr, 16) == 0;
    return !bracket && inet_pton(AF_INET, text, a) == 1 && memcmp(a, listener.addr, 4) == 0;
}

static bool is_loopback_peer(const struct sockaddr_storage *peer)
{
    if (peer->ss_family == AF_INET)
        return ((const unsigned char *)&((const struct sockaddr_in *)peer)->sin_addr)[0] == 127;
    if (peer->ss_family != AF_INET6)
        return false;
    const struct in6_addr *a = &((const struct sockaddr_in6 *)peer)->sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
}

/* A unix: socket's peer is "" to the list; a TCP peer its address. Each
 * refused connection is counted; the first is logged, the rest only
 * counted (a scanner would flood the log). */
static bool peer_allowed(const struct sockaddr_storage *peer)
{
    char text[INET6_ADDRSTRLEN] = "";
    if (peer->ss_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)peer)->sin_addr, text, sizeof text);
    else if (peer->ss_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)peer)->sin6_addr, text, sizeof text);
    if (ip_allow_peer(&listener.allow, text))
        return true;
    if (listener.refused++ == 0)
        log_warn("metrics: refusing %s, not in --metrics-allow-ips (%s): answered 403; further refusals "
                 "are counted in cserve_metrics_refused_total", text[0] ? text : "a unix: peer",
                 listener.view.opt->metrics_allow_ips);
    return false;
}

/* ---- the clients ---- */

static void client_close(struct client *c)
{
    close(c->fd);
    free(c->in);
    buffer_free(&c->out);
    *c = (struct client){.fd = -1};
}

static void respond(struct client *c, int status, const char *type, const char *body, size_t body_len,
                    const char *extra)
{
    char line[64], fields[256];
    int ln = snprintf(line, sizeof line, "%d %s", status, http_reason_phrase(status));
    int fn = snprintf(fields, sizeof fields,
                      "Content-Type: %s\r\nContent-Length: %zu\r\nCache-Control: no-store\r\n%s", type,
                      body_len, extra ? extra : "");
    struct buffer *out = &c->out;
    bool ok = buffer_reserve(out, (size_t)ln + (size_t)fn + 2 * RESPONSE_HEAD_FIXED);
    if (ok) {
        response_head_start(out, line, (size_t)ln);
        ok = buffer_append(out, fields, (size_t)fn);
    }
    if (ok) {
        response_head_end(out, true, 1);
        ok = c->head_only || buffer_append(out, body, body_len);
    }
    if (!ok) {
        client_close(c);
        return;
    }
    c->state = C_SEND;
    c->out_off = 0;
    c->deadline_ms = clock_coarse_ms() + SEND_DEADLINE_MS;
}

static void respond_status(struct client *c, int status, const char *extra)
{
    char body[64];
    int n = snprintf(body, sizeof body, "%d %s\n", status, http_reason_phrase(status));
    respond(c, status, "text/plain; charset=utf-8", body, (size_t)n, extra);
}

static void answer(struct client *c, enum endpoint ep)
{
    if (ep == EP_PAGE) {
        respond(c, 200, "text/html; charset=utf-8", cserve_dashboard_html, cserve_dashboard_html_len, NULL);
        return;
    }
    char *body = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&body, &len);
    if (!f) {
        client_close(c);
        return;
    }
    metrics_view_refresh(&listener.view);
    listener.view.refused = listener.refused;
    if (ep == EP_METRICS)
        metrics_render_prometheus(f, &listener.view);
    else
        metrics_render_json(f, &listener.view);
    if (fclose(f) != 0) {
        free(body);
        client_close(c);
        return;
    }
    respond(c, 200, ep == EP_METRICS ? "text/plain; version=0.0.4; charset=utf-8" : "application/json", body,
            len, NULL);
    free(body);
}

static bool query_has(const struct http_target *t, const char *param)
{
    size_t plen = strlen(param);
    for (size_t i = 0; i < t->query_len;) {
        const char *amp = memchr(t->query + i, '&', t->query_len - i);
        size_t end = amp ? (size_t)(amp - t->query) : t->query_len;
        if (end - i == plen && memcmp(t->query + i, param, plen) == 0)
            return true;
        i = end + 1;
    }
    return false;
}

/* A complete head: framing errors as the loop answers them, then the Host
 * check, the method and the path. A /stats.json?wait=1 is held for the
 * next sample (at most METRICS_TICK_MS), so that a page polling it gets
 * each snapshot once, as soon as it is taken. */
static void on_head(struct client *c, const struct http_request *req)
{
    struct http_framing fr;
    struct http_target t;
    bool get = req->method_len == 3 && memcmp(req->method, "GET", 3) == 0;
    c->head_only = req->method_len == 4 && memcmp(req->method, "HEAD", 4) == 0;
    int status = http_request_framing(req, &fr);
    if (status) {
        respond_status(c, status, NULL);
        return;
    }
    if (http_split_target(req->method, req->method_len, req->target, req->target_len, &t) != 0) {
        respond_status(c, 400, NULL);
        return;
    }
    if (c->refused) {
        respond_status(c, 403, NULL);
        return;
    }
    const char *host = fr.host;
    size_t host_len = fr.host_len;
    http_target_authority(req->target, req->target_len, &host, &host_len); /* RFC 9112 §3.2.2 */
    if (!host_allowed(host, host_len, c->loopback_peer)) {
        respond_status(c, 421, NULL);
        return;
    }
    if (!get && !c->head_only) {
        respond_status(c, 405, "Allow: GET, HEAD\r\n");
        return;
    }
    enum endpoint ep;
    if (t.path_len == 1 && t.path[0] == '/')
        ep = EP_PAGE;
    else if (t.path_len == 8 && memcmp(t.path, "/metrics", 8) == 0)
        ep = EP_METRICS;
    else if (t.path_len == 11 && memcmp(t.path, "/stats.json", 11) == 0)
        ep = EP_JSON;
    else {
        respond_status(c, 404, NULL);
        return;
    }
    if (ep == EP_JSON && query_has(&t, "wait=1")) {
        c->state = C_WAIT;
        c->wait_for = ep;
        c->deadline_ms = clock_coarse_ms() + HEAD_DEADLINE_MS;
        return;
    }
    answer(c, ep);
}

/* Read the head; parse only when a line end arrived (a client sending a
 * byte at a time costs a memchr per byte, not a parse per byte), or when
 * the buffer is full (the parser then answers 414 or 431). */
static void read_head(struct client *c)
{
    while (c->state == C_HEAD) {
        ssize_t n = recv(c->fd, c->in + c->in_len, HEAD_MAX - c->in_len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0) {
            client_close(c);
            return;
        }
        bool line_end = memchr(c->in + c->in_len, '\n', (size_t)n) != NULL;
        c->in_len += (size_t)n;
        if (!line_end && c->in_len < HEAD_MAX)
            continue;
        struct http_request req;
        int status = 0;
        int rc = http_parse_request(c->in, c->in_len, HEAD_MAX, &req, &status);
        if (rc == HTTP_ERROR)
            respond_status(c, status, NULL);
        else if (rc > 0)
            on_head(c, &req);
    }
}

/* After the answer: read and drop what the client still sends (the rest of
 * a head too large, a body), so that closing with unread bytes does not
 * reset the connection before the client has read the answer. */
static void linger(struct client *c)
{
    char sink[4096];
    for (;;) {
        ssize_t n = recv(c->fd, sink, sizeof sink, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0 || (c->discarded += (size_t)n) > LINGER_MAX) {
            client_close(c);
            return;
        }
    }
}

static void on_writable(struct client *c)
{
    while (c->out_off < c->out.len) {
        ssize_t n = send(c->fd, c->out.data + c->out_off, c->out.len - c->out_off, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN)
                client_close(c);
            return;
        }
        c->out_off += (size_t)n;
    }
    buffer_free(&c->out);
    shutdown(c->fd, SHUT_WR);
    c->state = C_LINGER;
    c->deadline_ms = clock_coarse_ms() + LINGER_MS;
    linger(c);
}

static void on_accept(void)
{
    for (;;) {
        struct client *c = NULL;
        for (unsigned i = 0; i < MAX_CONNS && !c; i++)
            if (listener.clients[i].state == C_FREE)
                c = &listener.clients[i];
        if (!c)
            return; /* full: the rest wait in the backlog */
        struct sockaddr_storage peer;
        socklen_t peer_len = sizeof peer;
        int fd = accept4(listener.listen_fd, (struct sockaddr *)&peer, &peer_len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* The listener stays readable: polling it again at once
                 * would spin. */
                if (!listener.accept_logged)
                    log_warn("metrics: accept: %s; pausing its accepts for %d ms at a time", strerror(errno),
                             ACCEPT_PAUSE_MS);
                listener.accept_logged = true;
                listener.accept_paused_until = clock_coarse_ms() + ACCEPT_PAUSE_MS;
            }
            return;
        }
        listener.accept_logged = false;
        char *in = malloc(HEAD_MAX);
        if (!in) {
            close(fd);
            return;
        }
        *c = (struct client){.fd = fd, .state = C_HEAD, .in = in,
                             .deadline_ms = clock_coarse_ms() + HEAD_DEADLINE_MS,
                             .refused = !peer_allowed(&peer),
                             .loopback_peer = is_loopback_peer(&peer)};
    }
}

static void *serve(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "cserve-metrics");
    struct pollfd pfd[MAX_CONNS + 2];
    struct client *who[MAX_CONNS + 2];
    uint64_t next_sample = 0;
    while (!atomic_load_explicit(&listener.stop, memory_order_relaxed)) {
        uint64_t now = clock_coarse_ms();
        if (now >= next_sample) {
            metrics_history_sample(&listener.view);
            next_sample = now + METRICS_TICK_MS;
            for (unsigned i = 0; i < MAX_CONNS; i++) {
                struct client *c = &listener.clients[i];
                if (c->state == C_WAIT) {
                    answer(c, c->wait_for);
                    if (c->state == C_SEND)
                        on_writable(c);
                }
            }
        }
        int timeout = (int)(next_sample - now);
        unsigned n = 0, busy = 0;
        pfd[n++] = (struct pollfd){.fd = listener.wake_fd, .events = POLLIN};
        for (unsigned i = 0; i < MAX_CONNS; i++) {
            struct client *c = &listener.clients[i];
            if (c->state == C_FREE)
                continue;
            if (now >= c->deadline_ms) { /* slow: whatever it was doing */
                client_close(c);
                continue;
            }
            if (c->deadline_ms - now < (uint64_t)timeout)
                timeout = (int)(c->deadline_ms - now);
            busy++;
            if (c->state == C_WAIT)
                continue; /* nothing to read or write until the sample */
            who[n] = c;
            pfd[n++] = (struct pollfd){.fd = c->fd, .events = c->state == C_SEND ? POLLOUT : POLLIN};
        }
        unsigned lst = n;
        if (busy < MAX_CONNS) {
            if (now < listener.accept_paused_until) {
                if (listener.accept_paused_until - now < (uint64_t)timeout)
                    timeout = (int)(listener.accept_paused_until - now);
            } else {
                pfd[n++] = (struct pollfd){.fd = listener.listen_fd, .events = POLLIN};
            }
        }
        int r = poll(pfd, n, timeout > 0 ? timeout : 1);
        if (r <= 0)
            continue;
        for (unsigned i = 1; i < lst; i++) {
            struct client *c = who[i];
            if (!pfd[i].revents || c->state == C_FREE)
                continue;
            if (c->state == C_HEAD)
                read_head(c);
            else if (c->state == C_SEND)
                on_writable(c);
            else if (c->state == C_LINGER)
                linger(c);
            if (c->state == C_SEND && c->out_off == 0)
                on_writable(c); /* a fresh answer: try it at once */
        }
        if (lst < n && (pfd[lst].revents & POLLIN))
            on_accept();
    }
    return NULL;
}

/* ---- the thread, and forks ---- */

static void thread_stop(void)
{
    atomic_store_explicit(&listener.stop, true, memory_order_relaxed);
    uint64_t one = 1;
    if (write(listener.wake_fd, &one, sizeof one) < 0) {
        /* cannot fail on an eventfd below its maximum; the poll timeout
         * would end the wait anyway */
    }
    pthread_join(listener.thread, NULL);
    listener.running = false;
}

static int thread_start(void)
{
    uint64_t v;
    if (read(listener.wake_fd, &v, sizeof v) < 0) {
        /* nothing was pending */
    }
    atomic_store_explicit(&listener.stop, false, memory_order_relaxed);
    if (pthread_create(&listener.thread, NULL, serve, NULL) != 0)
        return -1;
    listener.running = true;
    return 0;
}

/* A fork (a worker started, an app's os.fork) happens with this thread
 * stopped and joined: the child then has no lock this thread could have
 * held, and the process forks single-threaded where it otherwise is (the
 * supervisor; TSan refuses threads in a child forked with more than one).
 * Its clients and history stay as they are; it resumes in the parent. */
static void before_fork(void)
{
    pthread_mutex_lock(&listener.fork_lock);
    listener.paused = listener.running;
    if (listener.running)
        thread_stop();
}

static void after_fork_parent(void)
{
    if (listener.paused && thread_start() != 0)
        log_error("metrics: cannot restart the metrics thread after a fork");
    listener.paused = false;
    pthread_mutex_unlock(&listener.fork_lock);
}

/* A forked worker must not keep the metrics listener (nor its clients)
 * open: the port would outlive the process that serves it. */
static void after_fork_child(void)
{
    if (listener.listen_fd >= 0)
        close(listener.listen_fd);
    if (listener.wake_fd >= 0)
        close(listener.wake_fd);
    for (unsigned i = 0; i < MAX_CONNS; i++)
        if (listener.clients[i].state != C_FREE)
            close(listener.clients[i].fd);
    listener.listen_fd = listener.wake_fd = -1;
    listener.running = listener.paused = false;
    pthread_mutex_unlock(&listener.fork_lock);
}

int metrics_start(const struct options *opt, unsigned slots, int listen_fd)
{
    listener.listen_fd = listen_fd;
    for (unsigned i = 0; i < MAX_CONNS; i++)
        listener.clients[i] = (struct client){.fd = -1};
    if (!metrics_nslots() && metrics_shm_create(slots) != 0) {
        log_error("--metrics-bind: shared memory: %s", strerror(errno));
        return -1;
    }
    listener.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (metrics_history_init(&listener.view, opt) != 0 || listener.wake_fd < 0) {
        log_error("--metrics-bind: %s", strerror(errno));
        return -1;
    }
    char why[160];
    if (ip_allow_parse(&listener.allow, opt->metrics_allow_ips, why, sizeof why) != 0) {
        log_error("--metrics-allow-ips: %s", why); /* checked at start: not reached */
        return -1;
    }
    learn_address();
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
    if (thread_start() != 0) {
        log_error("--metrics-bind: cannot start its thread");
        return -1;
    }
    log_info("metrics: serving /metrics, /stats.json and the dashboard on %s to %s", listener.described,
             opt->metrics_allow_ips[0] ? opt->metrics_allow_ips : "no peer (--metrics-allow-ips is empty)");
    return 0;
}

int metrics_listen_fd(void)
{
    return listener.listen_fd;
}

void metrics_stop(void)
{
    pthread_mutex_lock(&listener.fork_lock);
    bool running = listener.running;
    if (running)
        thread_stop();
    pthread_mutex_unlock(&listener.fork_lock);
    if (!running)
        return;
    for (unsigned i = 0; i < MAX_CONNS; i++)
        if (listener.clients[i].state != C_FREE)
            client_close(&listener.clients[i]);
    close(listener.listen_fd); /* a unix: path is the binder's to remove (listen_cleanup) */
    close(listener.wake_fd);
    listener.listen_fd = listener.wake_fd = -1;
    metrics_history_free(&listener.view);
}
