/* options.c — parse and validate the command line (gunicorn/Granian naming). */
#include "options.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../handoffs/handoff.h"

#ifndef CSERVE_ALLOC /* the Makefile says which malloc it linked */
#define CSERVE_ALLOC "?"
#endif
#ifndef CSERVE_PYTHON_LINK /* ... and whether libpython is static or shared */
#define CSERVE_PYTHON_LINK "?"
#endif
#include "interp.h"
#include "log.h"

enum {
    OPT_BIND = 'b', OPT_WORKERS = 'w', OPT_HELP = 'h', OPT_VERSION = 'V',
    OPT_CHDIR = 256, OPT_THREADS, OPT_HANDOFF, OPT_SPIN, OPT_LOOP_SPIN, OPT_LOOP_DOZE, OPT_QUEUE, OPT_INLINE, OPT_APP,
    OPT_BACKLOG, OPT_MAX_HEADER, OPT_MAX_BODY, OPT_HEADER_TIMEOUT, OPT_KEEPALIVE_TIMEOUT,
    OPT_IO_TIMEOUT, OPT_GRACEFUL_TIMEOUT, OPT_ACCESS_LOG, OPT_LOG_LEVEL, OPT_STATS,
    OPT_STATS_JSON, OPT_STATS_WINDOW, OPT_SOCKET_MODE, OPT_USER, OPT_GROUP, OPT_VIRTUALENV,
};

static const struct option long_options[] = {
    {"bind", required_argument, NULL, OPT_BIND},
    {"chdir", required_argument, NULL, OPT_CHDIR},
    {"socket-mode", required_argument, NULL, OPT_SOCKET_MODE},
    {"user", required_argument, NULL, OPT_USER},
    {"group", required_argument, NULL, OPT_GROUP},
    {"virtualenv", required_argument, NULL, OPT_VIRTUALENV},
    {"workers", required_argument, NULL, OPT_WORKERS},
    {"blocking-threads", required_argument, NULL, OPT_THREADS},
    {"handoff", required_argument, NULL, OPT_HANDOFF},
    {"spin", required_argument, NULL, OPT_SPIN},
    {"loop-spin", required_argument, NULL, OPT_LOOP_SPIN},
    {"loop-doze", required_argument, NULL, OPT_LOOP_DOZE},
    {"queue-size", required_argument, NULL, OPT_QUEUE},
    {"inline", no_argument, NULL, OPT_INLINE},
    {"app", required_argument, NULL, OPT_APP},
    {"backlog", required_argument, NULL, OPT_BACKLOG},
    {"max-header-size", required_argument, NULL, OPT_MAX_HEADER},
    {"max-body-size", required_argument, NULL, OPT_MAX_BODY},
    {"header-timeout", required_argument, NULL, OPT_HEADER_TIMEOUT},
    {"keepalive-timeout", required_argument, NULL, OPT_KEEPALIVE_TIMEOUT},
    {"io-timeout", required_argument, NULL, OPT_IO_TIMEOUT},
    {"graceful-timeout", required_argument, NULL, OPT_GRACEFUL_TIMEOUT},
    {"access-log", optional_argument, NULL, OPT_ACCESS_LOG},
    {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
    {"stats", no_argument, NULL, OPT_STATS},
    {"stats-json", required_argument, NULL, OPT_STATS_JSON},
    {"stats-window", required_argument, NULL, OPT_STATS_WINDOW},
    {"version", no_argument, NULL, OPT_VERSION},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

static void usage(FILE *out)
{
    fprintf(out,
"usage: cserve [options] [MODULE:CALLABLE]\n"
"\n"
"An instrumented WSGI server: one epoll loop thread does all socket I/O and\n"
"HTTP/1.1 parsing, Python runs on pool threads, and a pluggable handoff sits\n"
"between them. Without MODULE:CALLABLE it serves apps/hello.py:application.\n"
"\n"
"Where and what:\n"
"  -b, --bind ADDR            HOST:PORT or unix:PATH (default 127.0.0.1:8000)\n"
"      --chdir DIR            chdir to DIR and put it first on sys.path before importing\n"
"      --socket-mode MODE     octal permissions of a unix: socket, e.g. 660 so a proxy in\n"
"                             the socket's group can connect (default: from the umask).\n"
"                             A unix: bind refuses a path holding a non-socket or a live\n"
"                             socket, replaces a stale one and removes its own at exit\n"
"      --user USER            after binding, serve as USER (name or uid; needs root):\n"
"                             bind port 80 as root, import and run the app as USER\n"
"      --group GROUP          ... and as GROUP (default: USER's primary group; required\n"
"                             when USER is a uid with no passwd entry)\n"
"      --virtualenv DIR       use the virtualenv DIR: its sys.prefix and site-packages, as\n"
"                             DIR/bin/python sees them (default: $VIRTUAL_ENV, else the\n"
"                             virtualenv cserve is installed in). It must be made by the\n"
"                             Python cserve embeds (see --version)\n"
"\n"
"A listening socket passed by systemd (LISTEN_FDS, LISTEN_PID; socket activation)\n"
"is used instead of --bind.\n"
"      --app native-hello     serve the hello bytes from C, no Python: the loop's ceiling\n"
"      --inline               run the app on the loop thread: no pool, no handoff\n"
"\n"
"Threads and processes:\n"
"  -w, --workers N            worker processes, each with its own SO_REUSEPORT listener,\n"
"                             loop and pool; N > 1 adds a supervisor (default 1)\n"
"      --blocking-threads N   Python pool threads per worker (default 1)\n"
"      --handoff NAME         how requests cross from the loop to the pool (default ring):\n");
    for (const struct handoff_ops *const *b = handoff_backends; *b; b++)
        fprintf(out, "                               %-8s %s\n", (*b)->name, (*b)->summary);
    fprintf(out,
"      --spin N | Nus         ring: spin budget before a pool thread parks, in pause\n"
"                             iterations or microseconds; 0 parks at once (default:\n"
"                             adaptive, learnt from the waits each thread sees)\n"
"      --loop-spin US         ring: microseconds the loop polls for completions before it\n"
"                             sleeps while requests are at the app; 0 never (default:\n"
"                             adaptive; it spins only where a core is spare)\n"
"      --loop-doze US         ring: the longest the loop waits on a timer for the next\n"
"                             completion of a pool thread that has a queue, instead of\n"
"                             being woken by it (which costs the pool a syscall); 0 never\n"
"                             (default 50; a doze is a quarter of the pool's pace, or a\n"
"                             16th of the work queued ahead of a pool that is fast)\n"
"      --queue-size N         jobs queued per pool thread before backpressure (default 1024)\n"
"\n"
"Limits (what a client gets when it hits one, in brackets):\n"
"      --backlog N            listen(2) backlog (default 1024)\n"
"      --max-header-size B    request line + header fields, bytes (default 16384) [431/414]\n"
"      --max-body-size B      request body, bytes (default 1073741824) [413]\n"
"      --header-timeout S     seconds to deliver a complete request head (default 10) [closed]\n"
"      --keepalive-timeout S  seconds an idle keep-alive connection is kept (default 5) [closed]\n"
"      --io-timeout S         seconds an upload, a response write or the app may stall (default 60) [closed]\n"
"      --graceful-timeout S   seconds to finish in-flight requests on SIGTERM/SIGINT (default 30)\n"
"\n"
"Logs and instruments:\n"
"      --access-log[=FILE]    one line per request (stderr without FILE)\n"
"      --log-level LEVEL      debug, info, warning or error (default info)\n"
"      --stats                per-thread table on stderr at exit and on SIGUSR1\n"
"      --stats-json FILE      the same as JSON, written at exit and on SIGUSR1\n"
"      --stats-window S       start the measurement window S seconds after start-up;\n"
"                             SIGUSR2 starts a new window at any time\n"
"\n"
"  -V, --version              print the version and exit\n"
"  -h, --help                 print this help and exit\n");
}

static void die_usage(const char *fmt, const char *arg) __attribute__((noreturn));
static void die_usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "cserve: error: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (see cserve --help)\n");
    exit(2);
}

static unsigned long parse_count(const char *opt, const char *s, unsigned long lo, unsigned long hi)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || v < lo || v > hi) {
        fprintf(stderr, "cserve: error: %s needs a whole number from %lu to %lu, not '%s'\n",
                opt, lo, hi, s);
        exit(2);
    }
    return v;
}

static unsigned parse_seconds_ms(const char *opt, const char *s)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v > 0) || v > 86400.0 * 365) {
        fprintf(stderr, "cserve: error: %s needs a positive number of seconds, not '%s'\n", opt, s);
        exit(2);
    }
    return (unsigned)ceil(v * 1000.0);
}

static void parse_bind(struct options *o, const char *s)
{
    if (strncmp(s, "unix:", 5) == 0) {
        if (!s[5] || strlen(s + 5) >= 108)
            die_usage("--bind unix:PATH needs a path shorter than 108 bytes: '%s'", s);
        o->bind_unix = s + 5;
        return;
    }
    const char *colon = strrchr(s, ':');
    if (!colon)
        die_usage("--bind needs HOST:PORT or unix:PATH, not '%s'", s);
    size_t hlen = (size_t)(colon - s);
    const char *host = s;
    if (hlen >= 2 && s[0] == '[' && s[hlen - 1] == ']') { /* [::1]:8000 */
        host++;
        hlen -= 2;
    }
    if (hlen >= sizeof o->bind_host)
        die_usage("--bind host is too long: '%s'", s);
    memcpy(o->bind_host, host, hlen);
    o->bind_host[hlen] = '\0';
    if (hlen == 0)
        strcpy(o->bind_host, "0.0.0.0");
    o->bind_port = (int)parse_count("--bind port", colon + 1, 0, 65535);
}

static void parse_spin(struct options *o, const char *s)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || v < 0 || v > 1000000000L)
        die_usage("--spin needs N (iterations) or Nus (microseconds), not '%s'", s);
    if (*end == '\0') {
        o->spin_iters = v;
        o->spin_ns = 0;
    } else if (strcmp(end, "us") == 0) {
        o->spin_ns = v * 1000;
        o->spin_iters = v == 0 ? 0 : -1;
    } else {
        die_usage("--spin needs N (iterations) or Nus (microseconds), not '%s'", s);
    }
}

void options_parse(struct options *o, int argc, char **argv)
{
    memset(o, 0, sizeof *o);
    strcpy(o->bind_host, "127.0.0.1");
    o->bind_port = 8000;
    o->workers = 1;
    o->blocking_threads = 1;
    o->handoff = handoff_backends[0];
    o->spin_iters = -1;
    o->loop_spin_ns = -1; /* adaptive (the ring's before_sleep); --loop-spin overrides */
    o->queue_capacity = 1024;
    o->backlog = 1024;
    o->max_header_size = 16384;
    o->max_body_size = 1073741824ULL;
    o->header_timeout_ms = 10000;
    o->keepalive_timeout_ms = 5000;
    o->io_timeout_ms = 60000;
    o->graceful_timeout_ms = 30000;
    o->socket_mode = -1;

    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":b:w:hV", long_options, NULL)) != -1) {
        switch (c) {
        case OPT_BIND: parse_bind(o, optarg); break;
        case OPT_CHDIR: o->chdir_dir = optarg; break;
        case OPT_SOCKET_MODE: {
            char *end;
            errno = 0;
            long m = strtol(optarg, &end, 8);
            if (errno || end == optarg || *end || m < 0 || m > 0777)
                die_usage("--socket-mode needs octal permissions from 0 to 777 (e.g. 660), not '%s'", optarg);
            o->socket_mode = (int)m;
            break;
        }
        case OPT_USER: o->user = optarg; break;
        case OPT_GROUP: o->group = optarg; break;
        case OPT_VIRTUALENV: o->virtualenv = optarg; break;
        case OPT_WORKERS: o->workers = (unsigned)parse_count("--workers", optarg, 1, 256); break;
        case OPT_THREADS:
            o->blocking_threads = (unsigned)parse_count("--blocking-threads", optarg, 1, 256);
            break;
        case OPT_HANDOFF:
            o->handoff = handoff_find(optarg);
            if (!o->handoff)
                die_usage("unknown --handoff '%s' (ring, dgram, condvar or eventfd)", optarg);
            break;
        case OPT_SPIN: parse_spin(o, optarg); break;
        case OPT_LOOP_SPIN:
            o->loop_spin_ns = (long)parse_count("--loop-spin", optarg, 0, 1000000) * 1000;
            break;
        case OPT_LOOP_DOZE: {
            long us = (long)parse_count("--loop-doze", optarg, 0, 1000000);
            o->loop_doze_ns = us ? us * 1000 : -1;
            break;
        }
        case OPT_QUEUE: {
            unsigned long q = parse_count("--queue-size", optarg, 2, 1u << 20);
            if (q & (q - 1))
                die_usage("--queue-size must be a power of two, not '%s'", optarg);
            o->queue_capacity = (unsigned)q;
            break;
        }
        case OPT_INLINE: o->inline_app = true; break;
        case OPT_APP:
            if (strcmp(optarg, "native-hello") == 0)
                o->native_hello = true;
            else if (strchr(optarg, ':'))
                o->app_spec = optarg;
            else
                die_usage("--app needs native-hello or MODULE:CALLABLE, not '%s'", optarg);
            break;
        case OPT_BACKLOG: o->backlog = (int)parse_count("--backlog", optarg, 1, INT_MAX); break;
        case OPT_MAX_HEADER:
            o->max_header_size = parse_count("--max-header-size", optarg, 256, 1u << 24);
            break;
        case OPT_MAX_BODY:
            o->max_body_size = parse_count("--max-body-size", optarg, 0, ULONG_MAX);
            break;
        case OPT_HEADER_TIMEOUT: o->header_timeout_ms = parse_seconds_ms("--header-timeout", optarg); break;
        case OPT_KEEPALIVE_TIMEOUT:
            o->keepalive_timeout_ms = parse_seconds_ms("--keepalive-timeout", optarg);
            break;
        case OPT_IO_TIMEOUT: o->io_timeout_ms = parse_seconds_ms("--io-timeout", optarg); break;
        case OPT_GRACEFUL_TIMEOUT:
            o->graceful_timeout_ms = parse_seconds_ms("--graceful-timeout", optarg);
            break;
        case OPT_ACCESS_LOG:
            o->access_log = true;
            o->access_log_file = optarg;
            break;
        case OPT_LOG_LEVEL:
            if (log_set_level(optarg) != 0)
                die_usage("--log-level needs debug, info, warning or error, not '%s'", optarg);
            break;
        case OPT_STATS: o->stats = true; break;
        case OPT_STATS_JSON: o->stats_json = optarg; break;
        case OPT_STATS_WINDOW: o->stats_window_s = parse_seconds_ms("--stats-window", optarg) / 1000.0; break;
        case OPT_VERSION:
            interp_select(o); /* the virtualenv this start would use, checked */
            printf("cserve " CSERVE_VERSION " (%s, libpython %s; malloc: %s)\n", interp_describe(),
                   CSERVE_PYTHON_LINK, CSERVE_ALLOC);
            exit(0);
        case OPT_HELP: usage(stdout); exit(0);
        case ':': die_usage("option '%s' needs a value", argv[optind - 1]);
        default: die_usage("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) {
        if (optind + 1 < argc)
            die_usage("one app only, but got '%s' too", argv[optind + 1]);
        if (o->app_spec || o->native_hello)
            die_usage("the app is given twice: '%s'", argv[optind]);
        if (!strchr(argv[optind], ':'))
            die_usage("the app must be MODULE:CALLABLE, not '%s'", argv[optind]);
        o->app_spec = argv[optind];
    }
    if (o->socket_mode >= 0 && !o->bind_unix)
        die_usage("%s", "--socket-mode applies to --bind unix:PATH only");
    if (o->native_hello && o->inline_app)
        die_usage("%s", "--app native-hello and --inline exclude each other");
}
