/* access_log.c — the access log. The loop writes it when a response's last
 * byte is written; each line is built in a buffer and written with one
 * write(2) on an O_APPEND descriptor, so the workers of --workers, sharing
 * the file, never interleave inside a line. Request bytes are the client's:
 * quoted fields escape '"', '\' and every byte outside printable ASCII. */
#include "access_log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../lib/clock.h"
#include "../base/log.h"
#include "../base/signals.h"
#include "../conn/loop.h"
#include "../http/http_forwarded.h"
#include "../http/http_parser.h"

static int log_fd = -1;
static const char *log_path; /* NULL: stderr */
static enum access_log_format log_format;
static const struct forwarded_policy *log_forwarded; /* the server's, as open or adopt was given it */

int access_log_format_parse(const char *name)
{
    if (!strcmp(name, "combined"))
        return ACCESS_LOG_COMBINED;
    if (!strcmp(name, "common"))
        return ACCESS_LOG_COMMON;
    if (!strcmp(name, "json"))
        return ACCESS_LOG_JSON;
    return -1;
}

/* A relative path made absolute against the current directory (after
 * --chdir): with one worker the app runs in this process, and its os.chdir
 * must not move the file a reopen (SIGWINCH) makes. */
static const char *absolute(const char *path)
{
    static char abs_path[PATH_MAX];
    char cwd[PATH_MAX];
    if (!path || path[0] == '/' || !getcwd(cwd, sizeof cwd) ||
        (size_t)snprintf(abs_path, sizeof abs_path, "%s/%s", cwd, path) >= sizeof abs_path)
        return path;
    return abs_path;
}

static int open_path(const char *path)
{
    return open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0640);
}

/* "-" is standard output, as for most Unix tools: the stream a container or
 * systemd collects; like stderr it is never reopened. */
static bool is_stdout(const char *path)
{
    return path && strcmp(path, "-") == 0;
}

int access_log_open(const char *path, enum access_log_format format, const struct forwarded_policy *forwarded)
{
    log_format = format;
    log_forwarded = forwarded;
    if (!path || is_stdout(path)) {
        log_path = NULL;
        log_fd = path ? STDOUT_FILENO : STDERR_FILENO;
        return 0;
    }
    log_path = absolute(path);
    log_fd = open_path(path);
    return log_fd < 0 ? -1 : 0;
}

int access_log_fd(void)
{
    return log_path ? log_fd : -1;
}

void access_log_adopt(int fd, const char *path, enum access_log_format format,
                      const struct forwarded_policy *forwarded)
{
    log_format = format;
    log_forwarded = forwarded;
    log_path = is_stdout(path) ? NULL : absolute(path);
    log_fd = fd >= 0 ? fd : is_stdout(path) ? STDOUT_FILENO : STDERR_FILENO;
}

void access_log_reopen(void)
{
    if (!log_path)
        return;
    int fd = open_path(log_path);
    if (fd < 0) {
        log_error("access log: cannot reopen %s: %s; still writing to the old file", log_path, strerror(errno));
        return;
    }
    /* dup2 keeps the descriptor number: nothing else holds the old one. */
    if (log_fd >= 0 && dup2(fd, log_fd) >= 0) {
        close(fd);
    } else {
        if (log_fd >= 0)
            close(log_fd);
        log_fd = fd;
    }
    log_info("access log: reopened %s", log_path);
}

struct line {
    char buf[8192];
    size_t len;
    bool cut; /* ran out of room: the rest of a field is dropped */
};

static void put(struct line *l, const char *s, size_t n)
{
    size_t room = sizeof l->buf - 1 - l->len; /* 1 kept for the newline */
    if (n > room) {
        n = room;
        l->cut = true;
    }
    memcpy(l->buf + l->len, s, n);
    l->len += n;
}

static void puts_(struct line *l, const char *s)
{
    put(l, s, strlen(s));
}

/* Escaped for a quoted CLF field or a JSON string, in at most cap bytes:
 * a longer field ends in "..." after a whole escape, so the line keeps its
 * closing quote and the fields after it. The caps of one line's fields
 * add up to less than the line's buffer. */
static void put_escaped(struct line *l, const char *s, size_t n, bool json, size_t cap)
{
    static const char hex[] = "0123456789abcdef";
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        char e[6];
        size_t len;
        if (ch == '"' || ch == '\\') {
            e[0] = '\\', e[1] = (char)ch, len = 2;
        } else if (ch >= 0x20 && ch < 0x7f) {
            e[0] = (char)ch, len = 1;
        } else if (json) {
            e[0] = '\\', e[1] = 'u', e[2] = '0', e[3] = '0', e[4] = hex[ch >> 4], e[5] = hex[ch & 15], len = 6;
        } else {
            e[0] = '\\', e[1] = 'x', e[2] = hex[ch >> 4], e[3] = hex[ch & 15], len = 4;
        }
        if (used + len > cap - 3) {
            put(l, "...", 3);
            return;
        }
        put(l, e, len);
        used += len;
    }
}

#define CAP_METHOD 64
#define CAP_TARGET 4096
#define CAP_HEADER 1024 /* Referer, User-Agent */

static const struct http_header *field(const struct http_request *req, const char *lower)
{
    for (size_t i = 0; i < req->num_headers; i++)
        if (http_token_eq(req->headers[i].name, req->headers[i].name_len, lower))
            return &req->headers[i];
    return NULL;
}

static void put_field_quoted(struct line *l, const struct http_request *req, const char *name, bool json)
{
    const struct http_header *h = req ? field(req, name) : NULL;
    if (h)
        put_escaped(l, h->value, h->value_len, json, CAP_HEADER);
    else if (!json)
        puts_(l, "-");
}

void access_log_write(const struct loop_response *r)
{
    if (log_fd < 0)
        return;
    const struct http_request *req = r->req;
    const char *peer = r->peer;
    struct forwarded f;
    char client[64];
    if (req && forwarded_read(log_forwarded, req, peer, &f) && f.client.len && f.client.len < sizeof client) {
        memcpy(client, f.client.p, f.client.len);
        client[f.client.len] = '\0';
    } else {
        snprintf(client, sizeof client, "%s", *peer ? peer : "-");
    }
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct tm tm;
    gmtime_r(&now.tv_sec, &tm);
    unsigned long long us = r->end_ns > r->head_ns && r->head_ns ? (r->end_ns - r->head_ns) / 1000 : 0;
    char num[192];
    struct line l = {.len = 0};
    if (log_format == ACCESS_LOG_JSON) {
        strftime(num, sizeof num, "%Y-%m-%dT%H:%M:%S", &tm);
        puts_(&l, "{\"time\": \"");
        puts_(&l, num);
        snprintf(num, sizeof num, ".%03ldZ\", \"client\": \"", now.tv_nsec / 1000000);
        puts_(&l, num);
        puts_(&l, client);
        if (req) {
            puts_(&l, "\", \"method\": \"");
            put_escaped(&l, req->method, req->method_len, true, CAP_METHOD);
            puts_(&l, "\", \"target\": \"");
            put_escaped(&l, req->target, req->target_len, true, CAP_TARGET);
            snprintf(num, sizeof num, "\", \"protocol\": \"HTTP/1.%d", req->minor_version);
            puts_(&l, num);
        } else { /* no head parsed: the line as the client sent it */
            puts_(&l, "\", \"method\": \"\", \"target\": \"\", \"protocol\": \"\", \"request\": \"");
            put_escaped(&l, r->line, r->line_len, true, CAP_TARGET);
        }
        snprintf(num, sizeof num, "\", \"status\": %d, \"bytes\": %llu, \"duration_us\": %llu, \"referer\": \"",
                 r->status, (unsigned long long)r->body_bytes, us);
        puts_(&l, num);
        put_field_quoted(&l, req, "referer", true);
        puts_(&l, "\", \"user_agent\": \"");
        put_field_quoted(&l, req, "user-agent", true);
        puts_(&l, "\"}");
    } else {
        puts_(&l, client);
        strftime(num, sizeof num, " - - [%d/%b/%Y:%H:%M:%S +0000] \"", &tm);
        puts_(&l, num);
        if (req) {
            put_escaped(&l, req->method, req->method_len, false, CAP_METHOD);
            puts_(&l, " ");
            put_escaped(&l, req->target, req->target_len, false, CAP_TARGET);
            snprintf(num, sizeof num, " HTTP/1.%d", req->minor_version);
            puts_(&l, num);
        } else { /* no head parsed: the line as the client sent it, as Apache's %r */
            put_escaped(&l, r->line, r->line_len, false, CAP_TARGET);
        }
        if (r->body_bytes)
            snprintf(num, sizeof num, "\" %d %llu", r->status, (unsigned long long)r->body_bytes);
        else
            snprintf(num, sizeof num, "\" %d -", r->status);
        puts_(&l, num);
        if (log_format == ACCESS_LOG_COMBINED) {
            puts_(&l, " \"");
            put_field_quoted(&l, req, "referer", false);
            puts_(&l, "\" \"");
            put_field_quoted(&l, req, "user-agent", false);
            snprintf(num, sizeof num, "\" %llu", us);
            puts_(&l, num);
        }
    }
    if (l.cut && log_format == ACCESS_LOG_JSON) {
        /* never half a JSON object: say what was cut instead */
        l.len = 0;
        l.cut = false;
        snprintf(num, sizeof num, "{\"client\": \"%s\", \"status\": %d, \"truncated\": true}", client, r->status);
        puts_(&l, num);
    }
    l.buf[l.len++] = '\n';
    ssize_t n = write(log_fd, l.buf, l.len);
    (void)n; /* a full disk loses log lines, never requests */
}

static void on_response(void *ctx, const struct loop_response *r)
{
    (void)ctx;
    access_log_write(r);
}

static void on_signal(void *ctx, struct loop *l, const struct server_signal *si)
{
    (void)ctx, (void)l;
    if (si->signo == SIGWINCH)
        access_log_reopen();
}

int access_log_attach(struct loop *l)
{
    static const struct loop_hook hook = {.response = on_response, .signal = on_signal};
    return loop_hook_add(l, &hook);
}
