/* options.c — parse and validate the command line (gunicorn/Granian naming). */
#include "options_parse.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../../handoffs/handoff.h"
#include "../../handoffs/ring_order.h" /* RING_DOZE_MAX_NS, RING_HOLD_MAX_NS: the defaults */

#ifndef CSERVE_ALLOC /* the Makefile says which malloc it linked */
#define CSERVE_ALLOC "?"
#endif
#ifndef CSERVE_PYTHON_LINK /* ... and whether libpython is static or shared */
#define CSERVE_PYTHON_LINK "?"
#endif
#include "../services/access_log.h"
#include "../python/interp.h"
#include "../base/log.h"
#include "option_names.h"
#include "../python/config_toml.h"

enum {
    OPT_BIND = 'b', OPT_WORKERS = 'w', OPT_HELP = 'h', OPT_VERSION = 'V',
    OPT_CHDIR = 256, OPT_THREADS, OPT_HANDOFF, OPT_SPIN, OPT_LOOP_SPIN, OPT_LOOP_DOZE, OPT_LOOP_HOLD, OPT_QUEUE, OPT_INLINE, OPT_APP,
    OPT_BACKLOG, OPT_MAX_HEADER, OPT_MAX_BODY, OPT_HEADER_TIMEOUT, OPT_KEEPALIVE_TIMEOUT,
    OPT_IO_TIMEOUT, OPT_GRACEFUL_TIMEOUT, OPT_ACCESS_LOG, OPT_LOG_LEVEL, OPT_STATS,
    OPT_STATS_JSON, OPT_STATS_WINDOW, OPT_SOCKET_MODE, OPT_USER, OPT_GROUP, OPT_VIRTUALENV,
    OPT_MAX_REQUESTS, OPT_MAX_REQUESTS_JITTER, OPT_WORKERS_LIFETIME, OPT_WORKERS_MAX_RSS, OPT_PID_FILE,
    OPT_CHECK_CONFIG, OPT_FORWARDED_ALLOW_IPS, OPT_FORWARDED_HEADERS, OPT_ROOT_PATH, OPT_APP_TIMEOUT, OPT_ACCESS_LOG_FORMAT,
    OPT_RELOAD, OPT_METRICS_BIND, OPT_METRICS_ALLOW_IPS, OPT_CONFIG, OPT_PRELOAD,
    OPT_END /* one past the last: the size of source_of[] */
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
    {"loop-hold", required_argument, NULL, OPT_LOOP_HOLD},
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
    {"access-log-format", required_argument, NULL, OPT_ACCESS_LOG_FORMAT},
    {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
    {"stats", no_argument, NULL, OPT_STATS},
    {"stats-json", required_argument, NULL, OPT_STATS_JSON},
    {"stats-window", required_argument, NULL, OPT_STATS_WINDOW},
    {"metrics-bind", required_argument, NULL, OPT_METRICS_BIND},
    {"metrics-allow-ips", required_argument, NULL, OPT_METRICS_ALLOW_IPS},
    {"max-requests", required_argument, NULL, OPT_MAX_REQUESTS},
    {"max-requests-jitter", required_argument, NULL, OPT_MAX_REQUESTS_JITTER},
    {"workers-lifetime", required_argument, NULL, OPT_WORKERS_LIFETIME},
    {"workers-max-rss", required_argument, NULL, OPT_WORKERS_MAX_RSS},
    {"pid-file", required_argument, NULL, OPT_PID_FILE},
    {"check-config", no_argument, NULL, OPT_CHECK_CONFIG},
    {"config", required_argument, NULL, OPT_CONFIG},
    {"forwarded-allow-ips", required_argument, NULL, OPT_FORWARDED_ALLOW_IPS},
    {"forwarded-headers", required_argument, NULL, OPT_FORWARDED_HEADERS},
    {"root-path", required_argument, NULL, OPT_ROOT_PATH},
    {"app-timeout", required_argument, NULL, OPT_APP_TIMEOUT},
    {"reload", no_argument, NULL, OPT_RELOAD},
    {"preload", no_argument, NULL, OPT_PRELOAD},
    {"version", no_argument, NULL, OPT_VERSION},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

static void usage(FILE *out)
{
    fprintf(out,
"usage: cserve [options] [MODULE:CALLABLE | path/to/file.py:CALLABLE]\n"
"\n"
"An instrumented WSGI server: one epoll loop thread does all socket I/O and\n"
"HTTP/1.1 parsing, Python runs on pool threads, and a pluggable handoff sits\n"
"between them. MODULE is imported from the current directory (see --chdir) or\n"
"sys.path; a file.py is imported from its own folder. Without an app it serves\n"
"apps/hello.py:application.\n"
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
"      --forwarded-allow-ips LIST  the proxies in front, whose --forwarded-headers are\n"
"                             believed: IPs, CIDR networks, 'unix' (peers on a unix:\n"
"                             socket), '*' (any peer). Default: none, as any client can\n"
"                             send those fields (the nginx recipe passes 'unix')\n"
"      --forwarded-headers LIST  the fields those proxies set, the only ones read:\n"
"                             x-forwarded-for (REMOTE_ADDR: its rightmost address not\n"
"                             itself a listed proxy), x-forwarded-proto (the scheme),\n"
"                             x-forwarded-host (the host), or instead forwarded (RFC\n"
"                             7239: for, proto, host). Default:\n"
"                             x-forwarded-for,x-forwarded-proto\n"
"      --root-path PREFIX     the app is mounted at PREFIX: SCRIPT_NAME, and stripped from\n"
"                             PATH_INFO when a path starts with it (e.g. /api)\n"
"\n"
"A listening socket passed by systemd (LISTEN_FDS, LISTEN_PID; socket activation)\n"
"is used instead of --bind.\n"
"      --inline               run the app on the loop thread: no pool, no handoff\n"
"\n"
"Threads and processes:\n"
"  -w, --workers N            worker processes, each with its own SO_REUSEPORT listener,\n"
"                             loop and pool; N > 1 adds a supervisor (default 1)\n"
"      --blocking-threads N   Python pool threads per worker (default 1); auto[:MAX]: start\n"
"                             with one and add or retire threads as the measured load\n"
"                             needs, up to MAX (default 64, at most 256); a thread costs\n"
"                             its stack (RLIMIT_STACK, 8 MiB reserved, ~100 KiB used)\n"
"      --handoff NAME         how requests cross from the loop to the pool (default ring):\n");
    for (const struct handoff_ops *const *b = handoff_backends; *b; b++)
        fprintf(out, "                               %-8s %s\n", (*b)->name, (*b)->summary);
    fprintf(out,
"\n"
"Limits (what a client gets when it hits one, in brackets):\n"
"      --backlog N            listen(2) backlog (default 1024)\n"
"      --max-header-size B    request line + header fields, bytes (default 16384) [431/414]\n"
"      --max-body-size B      request body, bytes (default 1073741824; with --inline\n"
"                             1048576: it reads the whole body before the app) [413]\n"
"      --header-timeout S     seconds to deliver a complete request head (default 10) [closed]\n"
"      --keepalive-timeout S  seconds an idle keep-alive connection is kept (default 5) [closed]\n"
"      --io-timeout S         seconds an upload, a response write or the app may stall (default 60) [closed]\n"
"      --graceful-timeout S   seconds to finish in-flight requests on SIGTERM/SIGINT (default 30)\n"
"\n"
"Reload and recycling (a new worker serves before the old one stops accepting;\n"
"with one worker, the process then supervises its successor):\n"
"  SIGHUP                     start new workers that import the app afresh; a new\n"
"                             worker that fails to start leaves the old ones serving\n"
"      --preload              with --workers N: import the app once, in the supervisor,\n"
"                             and fork the workers with it (they share its memory, and\n"
"                             whatever its import opened). Default: each worker imports it\n"
"      --max-requests N       replace a worker after it served N requests (default 0: never)\n"
"      --max-requests-jitter J  ... after N plus a random 0..J, so workers differ (default 0)\n"
"      --workers-lifetime S   replace a worker S seconds after it started (default: never)\n"
"      --workers-max-rss MB   replace a worker whose resident memory passes MB (default: never)\n"
"      --app-timeout S        a pool thread in the app on one request for S seconds: log\n"
"                             every thread's Python stack, answer 503 to the requests\n"
"                             waiting on it, replace the worker (default 30; 0: off;\n"
"                             not with --inline or native-hello, which have no pool threads)\n"
"      --reload               for development: a .py file changed in the app's folders\n"
"                             reloads the worker, as SIGHUP does (one worker only)\n"
"      --pid-file FILE        write the server's pid to FILE, held while it runs: a\n"
"                             second server with the same FILE refuses to start;\n"
"                             removed at exit if it still holds this pid\n"
"      --check-config         print the effective configuration, each value with where it\n"
"                             came from (default, command line, CSERVE_<NAME>), check\n"
"                             what a start checks (the addresses are this host's, the\n"
"                             files and sockets can be made), import the app, exit: 2\n"
"                             for what a start would refuse, but for what a server\n"
"                             running now holds (its port, live socket, pid file)\n"
"      --config FILE          read options from FILE, in TOML: each key a long option's\n"
"                             name, its value the option's (blocking-threads = 4,\n"
"                             access-log = \"-\", a flag true or false, a list an array,\n"
"                             app = \"MODULE:CALLABLE\"); CSERVE_<NAME> and the command\n"
"                             line win over it. A reload's new workers read it again;\n"
"                             what the first process set up (the sockets, --workers,\n"
"                             --user) takes a restart\n"
"\n"
"Logs and instruments:\n"
"      --access-log [FILE]    one line per request to FILE (stderr without one; '-' is\n"
"                             stdout), opened before --user drops root; SIGWINCH reopens\n"
"                             it (logrotate). A word after it in the app's form\n"
"                             (MODULE:CALLABLE) is the app, not FILE (--access-log=FILE\n"
"                             is never read so)\n"
"      --access-log-format F  combined (the default: Apache's, then the microseconds from\n"
"                             the head to the last byte written), common or json; the\n"
"                             client is the one a trusted proxy names (--forwarded-allow-ips)\n"
"      --log-level LEVEL      debug, info, warning or error (default info)\n"
"      --stats                per-thread table on stderr at exit and on SIGUSR1\n"
"      --stats-json FILE      the same as JSON, written at exit and on SIGUSR1 (a file,\n"
"                             rewritten whole: not '-')\n"
"      --metrics-bind ADDR    serve /metrics (Prometheus), /stats.json and a live dashboard\n"
"                             (/) on ADDR: HOST:PORT or unix:PATH (default: off)\n"
"      --metrics-allow-ips LIST  the peers --metrics-bind serves: IPs, CIDR networks,\n"
"                             'unix', '*'; others get 403, counted (default: loopback and\n"
"                             unix: 127.0.0.0/8,::1,unix)\n"
"\n"
"  -V, --version              print the version and exit\n"
"  -h, --help                 print this help and exit\n"
"\n"
"For experiments (what the measurements vary; a deployment leaves them at their\n"
"defaults):\n"
"      --app native-hello     serve the hello bytes from C, no Python: the loop's ceiling\n"
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
"      --loop-hold US         ring: the longest the loop sleeps without watching its\n"
"                             sockets while every pool thread has work queued, to take\n"
"                             what came meanwhile in one pass; 0 never (default 2000;\n"
"                             a hold ends before the queued work would run out;\n"
"                             at most 1000000)\n"
"      --queue-size N         jobs queued per pool thread before backpressure (default 1024)\n"
"      --stats-window S       start the measurement window S seconds after start-up;\n"
"                             SIGUSR2 starts a new window at any time\n"
"\n"
"A long option is given by its whole name: one cut short or mistyped (--worker)\n"
"is refused, naming the option meant.\n"
"\n"
"Every long option may also be set as CSERVE_<NAME>, its name in capitals with\n"
"'_' for '-' (CSERVE_WORKERS=4, CSERVE_ACCESS_LOG=/var/log/cserve.log; a flag\n"
"option takes 1/true/yes/on or 0/false/no/off, and so does CSERVE_ACCESS_LOG for\n"
"stderr or off; CSERVE_APP=MODULE:CALLABLE). An\n"
"option on the command line wins over its variable, and a variable over the\n"
"--config file (CSERVE_CONFIG names one too); given twice, the last wins.\n"
"A CSERVE_ variable that is no option's (a typo: CSERVE_WORKER) is ignored with a\n"
"warning naming the closest option's, not refused: other tools may keep their own\n"
"CSERVE_ variables in the same environment.\n"
"\n"
"Exit status: 2 when cserve refuses to start (a bad option or variable, an app\n"
"that does not import, an address in use, a file it cannot open: one line\n"
"before it serves), 1 when the server itself fails, 0 after a clean stop.\n");
}

/* The variable, or the config file and its key, being parsed, named in
 * error messages (empty: the command line). */
static char env_source[PATH_MAX + 128];
static bool parsing_file; /* env_source names the config file's key */
static const char *config_path; /* --config FILE, or CSERVE_CONFIG's */

/* Where each option's value came from, for --check-config. */
enum source { FROM_DEFAULT, FROM_COMMAND_LINE, FROM_ENVIRONMENT, FROM_FILE };
static unsigned char source_of[OPT_END];

static void note_source(int opt)
{
    if (opt >= 0 && opt < OPT_END)
        source_of[opt] = !env_source[0] ? FROM_COMMAND_LINE : parsing_file ? FROM_FILE : FROM_ENVIRONMENT;
}

/* One error line, naming the variable the value came from; exit 2. */
static void die_with(const char *what, const char *hint) __attribute__((noreturn));
static void die_with(const char *what, const char *hint)
{
    log_error("%s%s%s%s%s", what, !env_source[0] ? "" : parsing_file ? " (from --config " : " (from the environment: ",
              env_source, env_source[0] ? ")" : "", hint);
    exit(2);
}

static void die_usage(const char *fmt, const char *arg) __attribute__((noreturn));
static void die_usage(const char *fmt, const char *arg)
{
    char what[2048];
    snprintf(what, sizeof what, fmt, arg);
    die_with(what, " (see cserve --help)");
}

static unsigned long parse_count(const char *opt, const char *s, unsigned long lo, unsigned long hi)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || v < lo || v > hi) {
        char what[512];
        snprintf(what, sizeof what, "%s needs a whole number from %lu to %lu, not '%.200s'", opt, lo, hi, s);
        die_with(what, "");
    }
    return v;
}

/* --blocking-threads N, auto or auto:MAX (MAX: the most it starts). */
static void parse_threads(struct options *o, const char *s)
{
    o->threads_auto = strncmp(s, "auto", 4) == 0 && (s[4] == '\0' || s[4] == ':');
    if (!o->threads_auto)
        o->blocking_threads = (unsigned)parse_count("--blocking-threads", s, 1, 256);
    else if (s[4] == ':')
        o->blocking_threads = (unsigned)parse_count("--blocking-threads auto:MAX", s + 5, 1, 256);
    else
        o->blocking_threads = AUTO_THREADS_MAX_DEFAULT;
}

static unsigned parse_seconds_ms(const char *opt, const char *s)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    /* Kept in milliseconds in an unsigned: at most about 49 days. */
    const double max_s = (double)UINT_MAX / 1000.0;
    if (errno || end == s || *end || !(v > 0) || v > max_s) {
        char what[512];
        snprintf(what, sizeof what, "%s needs a positive number of seconds up to %.0f, not '%.200s'", opt,
                 floor(max_s), s);
        die_with(what, "");
    }
    return (unsigned)ceil(v * 1000.0);
}

/* Where --bind and --socket-mode came from: a unix socket's mode from the
 * environment does not stop a TCP --bind on the command line. */
static bool bind_from_cli, socket_mode_from_env;

static void parse_bind(struct options *o, const char *s)
{
    bind_from_cli = env_source[0] == '\0';
    if (strncmp(s, "unix:", 5) == 0) {
        if (!s[5] || strlen(s + 5) >= 108)
            die_usage("--bind unix:PATH needs a path shorter than 108 bytes: '%s'", s);
        o->bind_unix = s + 5;
        return;
    }
    const char *colon = strrchr(s, ':');
    if (!colon)
        die_usage("--bind needs HOST:PORT or unix:PATH, not '%s'", s);
    o->bind_unix = NULL; /* the last --bind wins, and the command line over CSERVE_BIND */
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

/* --metrics-bind's form; whether HOST resolves is listen.c's
 * (listen_metrics_check), as that needs the resolver. An empty unix: path
 * would bind an abstract socket (its name all NUL bytes), reachable by any
 * local user whatever the file modes: refused. */
static void parse_metrics_bind(struct options *o, const char *s)
{
    o->metrics_bind = s;
    o->metrics_unix = NULL;
    if (strncmp(s, "unix:", 5) == 0) {
        if (!s[5])
            die_usage("--metrics-bind unix:PATH needs a path (an empty one would be an abstract socket, "
                      "open to every local user): '%s'", s);
        if (strlen(s + 5) >= 108)
            die_usage("--metrics-bind unix:PATH needs a path shorter than 108 bytes: '%s'", s);
        o->metrics_unix = s + 5;
        return;
    }
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s)
        die_usage("--metrics-bind needs HOST:PORT or unix:PATH, not '%s'", s);
    size_t hlen = (size_t)(colon - s);
    const char *host = s;
    if (hlen >= 2 && s[0] == '[' && s[hlen - 1] == ']') { /* [::1]:9109 */
        host++;
        hlen -= 2;
    }
    if (hlen == 0 || hlen >= sizeof o->metrics_host)
        die_usage("--metrics-bind needs HOST:PORT or unix:PATH, not '%s'", s);
    memcpy(o->metrics_host, host, hlen);
    o->metrics_host[hlen] = '\0';
    o->metrics_port = (int)parse_count("--metrics-bind port", colon + 1, 0, 65535);
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

/* The app's form, MODULE:CALLABLE or path/to/file.py:CALLABLE: a ':' and
 * after the last one a dotted name. A log file's name rarely ends so; one
 * that does is given as --access-log=FILE. */
static bool app_form(const char *s)
{
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s || !colon[1] || (colon[1] >= '0' && colon[1] <= '9'))
        return false;
    for (const char *p = colon + 1; *p; p++)
        if (!(isalnum((unsigned char)*p) || *p == '_' || *p == '.' || (unsigned char)*p >= 0x80))
            return false;
    return true;
}

static bool app_from_env; /* the app so far is CSERVE_APP's: a positional one replaces it */
static bool body_size_set; /* --max-body-size given: --inline keeps it */
/* --app-timeout's default, as gunicorn's --timeout: on wherever there are
 * pool threads to watch; --inline and native-hello have none, and only an
 * --app-timeout given by name is refused there. */
#define APP_TIMEOUT_DEFAULT_MS 30000
static bool app_timeout_set;

/* getopt_long takes any unambiguous start of a long option's name
 * (--blocking-thread for --blocking-threads): a typo near one option is
 * read as it, and an option added later changes what an abbreviation
 * meant. So every long option is matched whole here first, walking argv as
 * getopt will (an option's value is skipped, "--" ends the options), and a
 * near miss is refused with the name meant. */
static const char *require_whole_names(int argc, char **argv)
{
    const char *config = NULL; /* --config's value, the last one: the file is read before the rest */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0)
            break;
        if (a[0] != '-' || a[1] == '\0') /* an operand, or "-" */
            continue;
        if (a[1] != '-') { /* -b and -w take the rest of the word, or the next one */
            const char *v = a + 1 + strspn(a + 1, "hV");
            if ((*v == 'b' || *v == 'w') && v[1] == '\0')
                i++;
            continue;
        }
        size_t len = strcspn(a + 2, "=");
        const struct option *lo = option_named(long_options, a + 2, len);
        if (lo) {
            if (lo->val == OPT_CONFIG)
                config = a[2 + len] ? a + 3 + len : i + 1 < argc ? argv[i + 1] : NULL;
            if (lo->has_arg == required_argument && !a[2 + len])
                i++;
            continue;
        }
        char typed[64];
        snprintf(typed, sizeof typed, "%.*s", (int)(len < sizeof typed - 1 ? len : sizeof typed - 1), a + 2);
        const struct option *meant = option_closest(long_options, typed);
        char what[256];
        if (meant)
            snprintf(what, sizeof what, "unknown option '--%s': did you mean --%s?", typed, meant->name);
        else
            snprintf(what, sizeof what, "unknown option '--%s'", typed);
        die_with(what, " (see cserve --help)");
    }
    return config;
}

/* One getopt pass over argv (the command line, or one variable made into
 * "--name=value"); returns the index of the first operand. */
static int parse_args(struct options *o, int argc, char **argv)
{
    require_whole_names(argc, argv);
    optind = 0; /* glibc: start afresh (a second pass) */
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":b:w:hV", long_options, NULL)) != -1) {
        note_source(c);
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
            socket_mode_from_env = env_source[0] != '\0';
            break;
        }
        case OPT_USER: o->user = optarg; break;
        case OPT_GROUP: o->group = optarg; break;
        case OPT_VIRTUALENV: o->virtualenv = optarg; break;
        case OPT_WORKERS: o->workers = (unsigned)parse_count("--workers", optarg, 1, 256); break;
        case OPT_THREADS: parse_threads(o, optarg); break;
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
        case OPT_LOOP_HOLD: {
            long us = (long)parse_count("--loop-hold", optarg, 0, 1000000);
            o->loop_hold_ns = us ? us * 1000 : -1;
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
            if (strcmp(optarg, "native-hello") == 0) {
                o->native_hello = true;
                o->app_spec = NULL;
            } else if (strchr(optarg, ':')) {
                o->app_spec = optarg;
                o->native_hello = false;
            } else
                die_usage("--app needs native-hello or MODULE:CALLABLE, not '%s'", optarg);
            /* --app on the command line and a positional app are two apps */
            app_from_env = env_source[0] != '\0';
            break;
        case OPT_BACKLOG: o->backlog = (int)parse_count("--backlog", optarg, 1, INT_MAX); break;
        case OPT_MAX_HEADER:
            o->max_header_size = parse_count("--max-header-size", optarg, 256, 1u << 24);
            break;
        case OPT_MAX_BODY:
            o->max_body_size = parse_count("--max-body-size", optarg, 0, ULONG_MAX);
            body_size_set = true;
            break;
        case OPT_HEADER_TIMEOUT: o->header_timeout_ms = parse_seconds_ms("--header-timeout", optarg); break;
        case OPT_KEEPALIVE_TIMEOUT:
            o->keepalive_timeout_ms = parse_seconds_ms("--keepalive-timeout", optarg);
            break;
        case OPT_IO_TIMEOUT: o->io_timeout_ms = parse_seconds_ms("--io-timeout", optarg); break;
        case OPT_GRACEFUL_TIMEOUT:
            o->graceful_timeout_ms = parse_seconds_ms("--graceful-timeout", optarg);
            break;
        case OPT_ACCESS_LOG_FORMAT: {
            int f = access_log_format_parse(optarg);
            if (f < 0)
                die_usage("--access-log-format needs combined, common or json, not '%s'", optarg);
            o->access_log_format = f;
            break;
        }
        case OPT_ACCESS_LOG:
            /* The argument is optional, so getopt takes only
             * --access-log=FILE; "--access-log FILE" would leave FILE to be
             * read as the app. The next word is FILE unless it is an
             * option or has the app's form; "-" (stdout) is FILE. */
            if (!optarg && optind < argc && (argv[optind][0] != '-' || strcmp(argv[optind], "-") == 0) &&
                !app_form(argv[optind]))
                optarg = argv[optind++];
            o->access_log = true;
            o->access_log_file = optarg;
            break;
        case OPT_LOG_LEVEL:
            if (log_set_level(optarg) != 0)
                die_usage("--log-level needs debug, info, warning or error, not '%s'", optarg);
            break;
        case OPT_STATS: o->stats = true; break;
        case OPT_STATS_JSON:
            /* Not a stream: rewritten whole at each SIGUSR1 and merged from
             * each worker's part, beside it. */
            if (strcmp(optarg, "-") == 0)
                die_usage("--stats-json needs a file, not '%s' (standard output): it is rewritten whole at each "
                          "SIGUSR1 (--stats writes the table to stderr)", optarg);
            o->stats_json = optarg;
            break;
        case OPT_METRICS_BIND: parse_metrics_bind(o, optarg); break;
        case OPT_METRICS_ALLOW_IPS: o->metrics_allow_ips = optarg; break;
        case OPT_MAX_REQUESTS:
            o->max_requests = parse_count("--max-requests", optarg, 0, 1ul << 40);
            break;
        case OPT_MAX_REQUESTS_JITTER:
            o->max_requests_jitter = parse_count("--max-requests-jitter", optarg, 0, 1ul << 40);
            break;
        case OPT_WORKERS_LIFETIME:
            o->workers_lifetime_ms = parse_seconds_ms("--workers-lifetime", optarg);
            break;
        case OPT_WORKERS_MAX_RSS:
            o->workers_max_rss_mb = (unsigned)parse_count("--workers-max-rss", optarg, 0, 1u << 24);
            break;
        case OPT_PID_FILE:
            if (strcmp(optarg, "-") == 0)
                die_usage("--pid-file needs a file, not '%s'", optarg);
            o->pid_file = optarg;
            break;
        case OPT_RELOAD: o->reload = true; break;
        case OPT_PRELOAD: o->preload = true; break;
        case OPT_APP_TIMEOUT:
            /* 0: off, the one way to turn the default off */
            o->app_timeout_ms = strcmp(optarg, "0") == 0 ? 0 : parse_seconds_ms("--app-timeout", optarg);
            app_timeout_set = true;
            break;
        case OPT_CHECK_CONFIG: o->check_config = true; break;
        case OPT_CONFIG: break; /* read first, before the variables (options_parse) */
        case OPT_FORWARDED_ALLOW_IPS: o->forwarded_allow_ips = optarg; break;
        case OPT_FORWARDED_HEADERS: o->forwarded_headers = optarg; break;
        case OPT_ROOT_PATH:
            if (optarg[0] != '/' || strpbrk(optarg, "?#%"))
                die_usage("--root-path needs a path starting with '/', without ?, # or %%: '%s'", optarg);
            o->root_path = optarg;
            break;
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
    return optind;
}

/* 1 for 1/true/yes/on, 0 for ""/0/false/no/off, -1 for anything else. */
static int env_flag_word(const char *v)
{
    if (!strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcasecmp(v, "on"))
        return 1;
    if (!*v || !strcmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "no") || !strcasecmp(v, "off"))
        return 0;
    return -1;
}

static bool env_flag(const char *name, const char *v)
{
    int w = env_flag_word(v);
    if (w >= 0)
        return w == 1;
    snprintf(env_source, sizeof env_source, "%s", name);
    die_usage("a flag option's variable takes 1/true/yes/on or 0/false/no/off, not '%s'", v);
}

/* CSERVE_<NAME> of a long option into name (an empty name: not a variable). */
static void env_name_of(const struct option *lo, char *name, size_t cap)
{
    name[0] = '\0';
    if (lo->val == OPT_HELP || lo->val == OPT_VERSION)
        return;
    size_t k = (size_t)snprintf(name, cap, "CSERVE_");
    for (const char *p = lo->name; *p && k + 1 < cap; p++)
        name[k++] = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
    name[k] = '\0';
}

/* The "--name=value" strings made from variables: the options point into
 * them (optarg) for the process's life, so they are kept here. */
static char *volatile env_args[64]; /* volatile: never read, yet kept */

/* CSERVE_<NAME> for every long option but --help and --version. */
static void parse_env(struct options *o, const char *argv0)
{
    size_t kept = 0;
    for (const struct option *lo = long_options; lo->name; lo++) {
        char name[64];
        env_name_of(lo, name, sizeof name);
        if (!name[0])
            continue;
        const char *v = getenv(name);
        if (!v)
            continue;
        /* getopt keeps pointers into argv (optarg): the string must live on. */
        char *arg = NULL;
        if (lo->has_arg == no_argument) {
            if (!env_flag(name, v))
                continue;
            arg = strdup(lo->name);
        } else if (lo->has_arg == optional_argument && (!*v || env_flag_word(v) >= 0)) {
            /* CSERVE_ACCESS_LOG=1 is the flag alone (stderr), =0 leaves it
             * off; any other value is the option's argument (a file). */
            if (env_flag_word(v) == 0)
                continue;
            arg = strdup(lo->name);
        } else if (asprintf(&arg, "%s=%s", lo->name, v) < 0) {
            arg = NULL;
        }
        char *dashed = NULL;
        if (!arg || asprintf(&dashed, "--%s", arg) < 0)
            exit(1);
        free(arg);
        if (kept < sizeof env_args / sizeof *env_args)
            env_args[kept++] = dashed;
        char *args[3] = {(char *)argv0, dashed, NULL};
        snprintf(env_source, sizeof env_source, "%s", name);
        if (parse_args(o, 2, args) < 2)
            die_usage("'%s' is not a value this option takes", v);
    }
    env_source[0] = '\0';
}

/* The options a file's array is the value of: lists joined with ','. */
static bool takes_list(int opt)
{
    return opt == OPT_FORWARDED_ALLOW_IPS || opt == OPT_FORWARDED_HEADERS || opt == OPT_METRICS_ALLOW_IPS;
}

/* --config FILE, in TOML: each top-level key a long option's name, its
 * value the option's (a boolean for a flag, an array for a list). Read
 * before the variables and the command line, which win over it. */
static void parse_file(struct options *o, const char *path, const char *argv0)
{
    static struct config_entry *entries; /* the options point into them */
    static char **args;                  /* ... and into these */
    size_t n;
    char why[1024];
    if (config_toml_read(path, &entries, &n, why, sizeof why) != 0) {
        log_error("--config %s: %s", path, why);
        exit(2);
    }
    args = calloc(n + 1, sizeof *args);
    if (!args)
        exit(1);
    parsing_file = true;
    for (size_t i = 0; i < n; i++) {
        const struct config_entry *e = &entries[i];
        snprintf(env_source, sizeof env_source, "%s, key %s", path, e->key);
        const struct option *lo = option_named(long_options, e->key, strlen(e->key));
        if (!lo || lo->val == OPT_HELP || lo->val == OPT_VERSION || lo->val == OPT_CONFIG ||
            lo->val == OPT_CHECK_CONFIG) {
            const struct option *meant = lo ? NULL : option_closest(long_options, e->key);
            char what[512];
            snprintf(what, sizeof what, "--config %s: %s '%.100s'%s%s%s", path,
                     lo ? "a file does not set" : "unknown key", e->key, meant ? ": did you mean " : "",
                     meant ? meant->name : "", meant ? "?" : "");
            env_source[0] = '\0';
            die_with(what, " (its keys are the long options' names: see cserve --help)");
        }
        const char *bad = NULL;
        if (e->kind == 't' || e->kind == 'o')
            bad = "needs a value, not %s";
        else if (lo->has_arg == no_argument && e->kind != 'b')
            bad = "is a flag: true or false, not '%s'";
        else if (lo->has_arg == required_argument && e->kind == 'b')
            bad = "needs a value, not %s";
        else if (e->kind == 'a' && !takes_list(lo->val))
            bad = "takes one value, not an array ('%s')";
        if (bad) {
            char fmt[128];
            snprintf(fmt, sizeof fmt, "%s %s", e->key, bad);
            die_usage(fmt, e->value);
        }
        if (e->kind == 'b' && strcmp(e->value, "false") == 0)
            continue; /* a flag left off, as by default */
        char *arg = NULL;
        if (e->kind == 'b' ? asprintf(&arg, "--%s", lo->name) < 0 : asprintf(&arg, "--%s=%s", lo->name, e->value) < 0)
            exit(1);
        args[i] = arg;
        char *argv2[3] = {(char *)argv0, arg, NULL};
        if (parse_args(o, 2, argv2) < 2)
            die_usage("'%s' is not a value this option takes", e->value);
    }
    parsing_file = false;
    env_source[0] = '\0';
}

/* Variables cserve reads that are no option's: the one a supervisor hands
 * an exec'd worker (lifecycle.h) and, in a test build (TEST_HOOKS=1), the
 * test suite's fault hooks (the fault handoff core/server/worker.c installs,
 * and core/python/pool.c). A release build reads no hook, so it warns of
 * them as of any stray variable. */
static const char *const not_options[] = {
#if CSERVE_TEST_HOOKS
    "CSERVE_FAULT_SUBMIT", "CSERVE_TEST_FAIL_POOL_THREAD",
#endif
    "CSERVE_EXEC_WORKER"};

void options_check_environment(void)
{
    extern char **environ;
    for (char **e = environ; *e; e++) {
        if (strncmp(*e, "CSERVE_", 7) != 0)
            continue;
        char var[64];
        size_t n = strcspn(*e, "=");
        snprintf(var, sizeof var, "%.*s", (int)(n < sizeof var - 1 ? n : sizeof var - 1), *e);
        bool known = false;
        for (size_t i = 0; i < sizeof not_options / sizeof *not_options; i++)
            known |= strcmp(var, not_options[i]) == 0;
        /* The option's own spelling: CSERVE_BLOCKING_THREAD is --blocking-thread. */
        char typed[64];
        size_t k = 0;
        for (const char *p = var + 7; *p && k + 1 < sizeof typed; p++)
            typed[k++] = *p == '_' ? '-' : (char)tolower((unsigned char)*p);
        typed[k] = '\0';
        char name[64];
        const struct option *named = option_named(long_options, typed, k);
        if (named) {
            env_name_of(named, name, sizeof name);
            known |= strcmp(var, name) == 0; /* not CSERVE_help, nor CSERVE_HELP */
        }
        if (known)
            continue;
        const struct option *closest = option_closest(long_options, typed);
        if (closest)
            env_name_of(closest, name, sizeof name);
        if (closest && name[0])
            log_warn("%s is no option's variable: ignored. Did you mean %s (--%s)? (cserve --help lists them)", var,
                     name, closest->name);
        else
            log_warn("%s is no option's variable: ignored (cserve --help lists them)", var);
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
    o->forwarded_allow_ips = "";
    o->metrics_allow_ips = "127.0.0.0/8,::1,unix";
    o->forwarded_headers = "x-forwarded-for,x-forwarded-proto";

    /* Lowest first: the file, the variables, the command line. */
    config_path = require_whole_names(argc, argv);
    if (!config_path && getenv("CSERVE_CONFIG") && *getenv("CSERVE_CONFIG"))
        config_path = getenv("CSERVE_CONFIG");
    if (config_path)
        parse_file(o, config_path, argv[0]);
    parse_env(o, argv[0]);
    int first = parse_args(o, argc, argv);
    if (first < argc) {
        if (first + 1 < argc)
            die_usage("one app only, but got '%s' too", argv[first + 1]);
        if ((o->app_spec || o->native_hello) && !app_from_env)
            die_usage("the app is given twice: '%s'", argv[first]);
        if (!strchr(argv[first], ':'))
            die_usage("the app must be MODULE:CALLABLE or path/to/file.py:CALLABLE, not '%s'", argv[first]);
        o->app_spec = argv[first];
        o->native_hello = false;
        source_of[OPT_APP] = FROM_COMMAND_LINE;
    }
    if (o->socket_mode >= 0 && !o->bind_unix && socket_mode_from_env && bind_from_cli) {
        o->socket_mode = -1; /* CSERVE_SOCKET_MODE was for the unix socket the command line replaced */
        source_of[OPT_SOCKET_MODE] = FROM_DEFAULT;
    }
    if (o->socket_mode >= 0 && !o->bind_unix)
        die_usage("%s", "--socket-mode applies to --bind unix:PATH only");
    if (o->native_hello && o->inline_app)
        die_usage("%s", "--app native-hello and --inline exclude each other");
    /* --inline holds a request's whole body in memory before the app runs
     * (the app runs on the loop thread and cannot wait for it), so its
     * default bounds that memory per connection; a larger limit is asked
     * for by name. */
    if (o->inline_app && !body_size_set)
        o->max_body_size = INLINE_MAX_BODY_DEFAULT;
    if (o->reload && (o->workers > 1 || o->native_hello))
        die_usage("%s", "--reload is for one worker serving a Python app (not --workers > 1, native-hello)");
    if (o->app_timeout_ms && (o->inline_app || o->native_hello))
        die_usage("%s", "--app-timeout needs pool threads: the loop watches them (not --inline, native-hello)");
    if (!app_timeout_set && !o->inline_app && !o->native_hello)
        o->app_timeout_ms = APP_TIMEOUT_DEFAULT_MS;
}

/* One "name: value (where it came from)" line of --check-config. */
static void item(FILE *out, const char *name, int opt, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void item(FILE *out, const char *name, int opt, const char *fmt, ...)
{
    fprintf(out, "%s: ", name);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(out, fmt, ap);
    va_end(ap);
    if (source_of[opt] == FROM_DEFAULT) {
        fprintf(out, " (default)\n");
    } else if (source_of[opt] == FROM_FILE) {
        fprintf(out, " (file: %s)\n", config_path);
    } else if (source_of[opt] == FROM_COMMAND_LINE) {
        fprintf(out, " (command line)\n");
    } else {
        char var[64] = "?";
        for (const struct option *lo = long_options; lo->name; lo++)
            if (lo->val == opt)
                env_name_of(lo, var, sizeof var);
        fprintf(out, " (environment: %s)\n", var);
    }
}

static const char *or_none(const char *s) { return s ? s : "-"; }

/* A duration in seconds, or "off" for 0 where 0 means never. */
static void seconds_or_off(char *buf, size_t cap, unsigned ms)
{
    if (ms)
        snprintf(buf, cap, "%.3f", ms / 1e3);
    else
        snprintf(buf, cap, "off");
}

void options_print(const struct options *o, FILE *out)
{
    if (o->bind_unix)
        item(out, "bind", OPT_BIND, "unix:%s", o->bind_unix);
    else
        item(out, "bind", OPT_BIND, "%s:%d", o->bind_host, o->bind_port);
    item(out, "config", OPT_CONFIG, "%s", or_none(config_path));
    item(out, "app", OPT_APP, "%s", o->native_hello ? "native-hello" : o->app_spec ? o->app_spec : "(the default app)");
    if (o->socket_mode >= 0)
        item(out, "socket-mode", OPT_SOCKET_MODE, "%03o", (unsigned)o->socket_mode);
    else
        item(out, "socket-mode", OPT_SOCKET_MODE, "-");
    item(out, "chdir", OPT_CHDIR, "%s", or_none(o->chdir_dir));
    item(out, "user", OPT_USER, "%s", or_none(o->user));
    item(out, "group", OPT_GROUP, "%s", or_none(o->group));
    /* The virtualenv start-up would use (interp_select ran), and why:
     * --virtualenv, else $VIRTUAL_ENV, else the one cserve is installed in. */
    const char *venv = interp_venv_dir();
    if (o->virtualenv)
        item(out, "virtualenv", OPT_VIRTUALENV, "%s", venv);
    else if (venv[0] && strcmp(interp_venv_source(), "VIRTUAL_ENV") == 0)
        fprintf(out, "virtualenv: %s (environment: VIRTUAL_ENV)\n", venv);
    else if (venv[0])
        fprintf(out, "virtualenv: %s (default: the virtualenv cserve is installed in)\n", venv);
    else
        fprintf(out, "virtualenv: - (default: none, the packages of the Python at %s)\n", interp_home());
    item(out, "inline", OPT_INLINE, "%s", o->inline_app ? "yes" : "no");
    item(out, "workers", OPT_WORKERS, "%u", o->workers);
    item(out, "blocking-threads", OPT_THREADS, "%s%u", o->threads_auto ? "auto:" : "", o->blocking_threads);
    item(out, "handoff", OPT_HANDOFF, "%s", o->handoff->name);
    /* The ring's knobs in the units their options take; -1 and 0 are
     * "adaptive" and "the default" inside, not values anyone typed. */
    if (o->spin_ns > 0)
        item(out, "spin", OPT_SPIN, "%ld us", o->spin_ns / 1000);
    else if (o->spin_iters >= 0)
        item(out, "spin", OPT_SPIN, "%ld iterations", o->spin_iters);
    else
        item(out, "spin", OPT_SPIN, "adaptive");
    if (o->loop_spin_ns < 0)
        item(out, "loop-spin", OPT_LOOP_SPIN, "adaptive");
    else
        item(out, "loop-spin", OPT_LOOP_SPIN, "%ld us%s", o->loop_spin_ns / 1000, o->loop_spin_ns ? "" : " (never)");
    if (o->loop_doze_ns < 0)
        item(out, "loop-doze", OPT_LOOP_DOZE, "0 us (never)");
    else
        item(out, "loop-doze", OPT_LOOP_DOZE, "%ld us", (o->loop_doze_ns ? o->loop_doze_ns : RING_DOZE_MAX_NS) / 1000);
    if (o->loop_hold_ns < 0)
        item(out, "loop-hold", OPT_LOOP_HOLD, "0 us (never)");
    else
        item(out, "loop-hold", OPT_LOOP_HOLD, "%ld us", (o->loop_hold_ns ? o->loop_hold_ns : RING_HOLD_MAX_NS) / 1000);
    item(out, "queue-size", OPT_QUEUE, "%u", o->queue_capacity);
    item(out, "backlog", OPT_BACKLOG, "%d", o->backlog);
    item(out, "max-header-size", OPT_MAX_HEADER, "%zu", o->max_header_size);
    if (o->inline_app && !body_size_set)
        fprintf(out, "max-body-size: %llu (default with --inline)\n", (unsigned long long)o->max_body_size);
    else
        item(out, "max-body-size", OPT_MAX_BODY, "%llu", (unsigned long long)o->max_body_size);
    item(out, "header-timeout", OPT_HEADER_TIMEOUT, "%.3f", o->header_timeout_ms / 1e3);
    item(out, "keepalive-timeout", OPT_KEEPALIVE_TIMEOUT, "%.3f", o->keepalive_timeout_ms / 1e3);
    item(out, "io-timeout", OPT_IO_TIMEOUT, "%.3f", o->io_timeout_ms / 1e3);
    item(out, "graceful-timeout", OPT_GRACEFUL_TIMEOUT, "%.3f", o->graceful_timeout_ms / 1e3);
    static const char *const formats[] = {"combined", "common", "json"};
    item(out, "access-log-format", OPT_ACCESS_LOG_FORMAT, "%s", formats[o->access_log_format]);
    const char *log = o->access_log_file;
    item(out, "access-log", OPT_ACCESS_LOG, "%s",
         !o->access_log ? "off" : !log ? "stderr" : strcmp(log, "-") == 0 ? "stdout (-)" : log);
    item(out, "log-level", OPT_LOG_LEVEL, "%s", log_level_name());
    item(out, "stats", OPT_STATS, "%s", o->stats ? "yes" : "no");
    item(out, "stats-json", OPT_STATS_JSON, "%s", or_none(o->stats_json));
    item(out, "stats-window", OPT_STATS_WINDOW, "%g", o->stats_window_s);
    item(out, "max-requests", OPT_MAX_REQUESTS, "%lu", o->max_requests);
    item(out, "max-requests-jitter", OPT_MAX_REQUESTS_JITTER, "%lu", o->max_requests_jitter);
    char buf[32];
    seconds_or_off(buf, sizeof buf, o->workers_lifetime_ms);
    item(out, "workers-lifetime", OPT_WORKERS_LIFETIME, "%s", buf);
    if (o->workers_max_rss_mb)
        item(out, "workers-max-rss", OPT_WORKERS_MAX_RSS, "%u", o->workers_max_rss_mb);
    else
        item(out, "workers-max-rss", OPT_WORKERS_MAX_RSS, "off");
    seconds_or_off(buf, sizeof buf, o->app_timeout_ms);
    item(out, "app-timeout", OPT_APP_TIMEOUT, "%s", buf);
    item(out, "pid-file", OPT_PID_FILE, "%s", or_none(o->pid_file));
    item(out, "reload", OPT_RELOAD, "%s", o->reload ? "yes" : "no");
    item(out, "preload", OPT_PRELOAD, "%s", o->preload ? "yes" : "no");
    item(out, "metrics-bind", OPT_METRICS_BIND, "%s", or_none(o->metrics_bind));
    item(out, "metrics-allow-ips", OPT_METRICS_ALLOW_IPS, "%s", *o->metrics_allow_ips ? o->metrics_allow_ips : "-");
    item(out, "forwarded-allow-ips", OPT_FORWARDED_ALLOW_IPS, "%s",
         *o->forwarded_allow_ips ? o->forwarded_allow_ips : "-");
    item(out, "forwarded-headers", OPT_FORWARDED_HEADERS, "%s", *o->forwarded_headers ? o->forwarded_headers : "-");
    item(out, "root-path", OPT_ROOT_PATH, "%s", or_none(o->root_path));
}
