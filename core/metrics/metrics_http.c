/* metrics_http.c — the thread that serves --metrics-bind.
 *
 * A listener of its own and a thread of its own: nothing a metrics client
 * does (a huge head, a slow read, a flood) reaches the app's listener or a
 * loop thread. The thread polls its listener and at most MAX_CONNS clients,
 * each closed at its deadline; a request is one head of at most HEAD_MAX
 * bytes, answered and closed (no keep-alive, no body). Twice a second it
 * reads every worker's slot (metrics.c) into a short history, from which the
 * verdict is computed over the last few seconds. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
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
#include <sys/un.h>
#include <unistd.h>

#include "../../handoffs/handoff.h"
#include "../../lib/clock.h"
#include "../base/log.h"
#include "metrics.h"
#include "metrics_internal.h"
#include "../base/options.h"
#include "verdict.h"

#define MAX_CONNS 32
#define HEAD_MAX 4096          /* a request head longer than this: 431 */
#define HEAD_DEADLINE_MS 2000  /* from accept to a complete head */
#define SEND_DEADLINE_MS 5000  /* from the head to the last byte written */
#define HISTORY 32             /* samples kept (METRICS_TICK_MS apart) */
#define VERDICT_WINDOW_S 3.0

extern const char cserve_dashboard_html[];
extern const unsigned cserve_dashboard_html_len;

struct client {
    int fd;
    uint64_t deadline_ms;
    size_t in_len;
    char in[HEAD_MAX];
    char *out;
    size_t out_len, out_off;
    bool waiting; /* /stats.json?wait=1: answered after the next sample */
};

/* One worker's figures in a history sample. */
struct wsample {
    bool ok;
    int64_t pid;
    double t, loop_cpu, pool_cpu;
    double pool_ready;  /* run delay of the pool threads together, seconds; < 0: unknown */
    uint64_t samples, queued, pool_threads;
};

struct hsample {
    double t;
    bool proc;
    uint64_t busy, total;
    struct wsample *w; /* [nslots] */
};

static struct {
    const struct options *opt;
    int listen_fd, wake_fd;
    char unix_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    pthread_t thread;
    bool running;
    atomic_bool stop;
    pthread_mutex_t fork_lock; /* start/stop against a fork on another thread */
    bool paused;               /* stopped for a fork, to start again after it */
    unsigned nslots;
    struct client clients[MAX_CONNS];
    struct hsample hist[HISTORY];
    unsigned hist_next, hist_count;
    struct metrics_data *data; /* [nslots], the latest reads */
    bool *have;                /* [nslots] */
    struct verdict verdict;
    struct verdict_input vin;
    unsigned vworker;          /* the busiest worker, whose figures decided */
} M = {.listen_fd = -1, .wake_fd = -1, .fork_lock = PTHREAD_MUTEX_INITIALIZER};

/* ---- the listener ---- */

static int bind_unix(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    unlink(path); /* a stale socket of an earlier run */
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, MAX_CONNS) != 0) {
        int err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    snprintf(M.unix_path, sizeof M.unix_path, "%s", path);
    return fd;
}

static bool loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family == AF_INET6)
        return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr);
    return false;
}

/* HOST:PORT on loopback only: the figures say much about the server, and
 * the listener has no authentication (put a proxy in front to publish it). */
static int bind_tcp(const char *spec, char *why, size_t cap)
{
    char host[256];
    const char *colon = strrchr(spec, ':');
    if (!colon || colon == spec || !colon[1] || (size_t)(colon - spec) >= sizeof host) {
        snprintf(why, cap, "'%s' is not HOST:PORT or unix:PATH", spec);
        return -1;
    }
    memcpy(host, spec, (size_t)(colon - spec));
    host[colon - spec] = '\0';
    if (host[0] == '[' && host[strlen(host) - 1] == ']') {
        memmove(host, host + 1, strlen(host));
        host[strlen(host) - 1] = '\0';
    }
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *res;
    int rc = getaddrinfo(host, colon + 1, &hints, &res);
    if (rc != 0) {
        snprintf(why, cap, "%s: %s", spec, gai_strerror(rc));
        return -1;
    }
    int fd = -1;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        if (!loopback(ai->ai_addr)) {
            snprintf(why, cap, "%s is not a loopback address (metrics are served on loopback only)", host);
            continue;
        }
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
            continue;
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, MAX_CONNS) == 0)
            break;
        snprintf(why, cap, "%s: %s", spec, strerror(errno));
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    return fd;
}

/* ---- reading the slots ---- */

static void take_sample(void)
{
    struct hsample *h = &M.hist[M.hist_next];
    h->t = clock_s();
    h->proc = metrics_proc_stat(&h->busy, &h->total);
    for (unsigned i = 0; i < M.nslots; i++) {
        struct metrics_data *d = &M.data[i];
        struct wsample *w = &h->w[i];
        M.have[i] = metrics_read_slot(i, d);
        w->ok = M.have[i];
        if (!w->ok)
            continue;
        w->pid = d->pid;
        w->t = d->t;
        w->loop_cpu = d->nthreads ? d->threads[0].cpu_s : 0;
        w->pool_cpu = 0;
        w->pool_ready = 0;
        for (uint64_t k = 1; k < d->nthreads; k++) {
            uint64_t ns;
            w->pool_cpu += d->threads[k].cpu_s;
            if (w->pool_ready >= 0 && metrics_run_delay((int)d->pid, (int)d->threads[k].tid, &ns))
                w->pool_ready += (double)ns / 1e9;
            else
                w->pool_ready = -1;
        }
        w->samples = d->samples;
        w->queued = d->samples_queued;
        w->pool_threads = d->pool_threads;
    }
    M.hist_next = (M.hist_next + 1) % HISTORY;
    if (M.hist_count < HISTORY)
        M.hist_count++;
}

static struct hsample *hist_at(unsigned back)
{
    return &M.hist[(M.hist_next + HISTORY - 1 - back) % HISTORY];
}

/* The verdict over the last VERDICT_WINDOW_S: for each worker, differences
 * between its newest sample and its newest one at least that old (or its
 * oldest, early on or after it was replaced: a new process's counters
 * start again from zero). */
static void decide(void)
{
    struct verdict_input in = {.machine_busy = -1};
    M.vworker = 0;
    if (M.hist_count >= 2) {
        struct hsample *now = hist_at(0), *then = NULL;
        for (unsigned b = 1; b < M.hist_count; b++) {
            if (!hist_at(b)->proc)
                break;
            then = hist_at(b);
            if (now->t - then->t >= VERDICT_WINDOW_S)
                break;
        }
        if (now->proc && then && now->total > then->total)
            in.machine_busy = (double)(now->busy - then->busy) / (double)(now->total - then->total);
        bool first = true;
        for (unsigned i = 0; i < M.nslots; i++) {
            struct wsample *b = &now->w[i], *a = NULL;
            if (!b->ok)
                continue;
            for (unsigned k = 1; k < M.hist_count; k++) {
                struct wsample *s = &hist_at(k)->w[i];
                if (!s->ok || s->pid != b->pid)
                    break;
                a = s;
                if (b->t - s->t >= VERDICT_WINDOW_S)
                    break;
            }
            if (!a || b->t <= a->t)
                continue;
            double dt = b->t - a->t;
            double lu = (b->loop_cpu - a->loop_cpu) / dt, pu = (b->pool_cpu - a->pool_cpu) / dt;
            double ready =
                a->pool_ready >= 0 && b->pool_ready >= a->pool_ready ? (b->pool_ready - a->pool_ready) / dt : 0;
            double q = b->samples > a->samples
                           ? (double)(b->queued - a->queued) / (double)(b->samples - a->samples) : 0;
            if (dt > in.window_s)
                in.window_s = dt;
            if (first || lu > in.loop_util) {
                in.loop_util = lu;
                M.vworker = i;
            }
            if (first || pu > in.pool_util) {
                in.pool_util = pu;
                in.pool_ready = ready;
            }
            /* Threads are short only if every worker's are. */
            if (b->pool_threads && (!in.pool_threads || q < in.queued_frac)) {
                in.queued_frac = q;
                in.pool_threads = (unsigned)b->pool_threads;
            }
            first = false;
        }
    }
    M.vin = in;
    verdict_decide(&in, &M.verdict);
}

/* ---- /metrics ---- */

static const char *const loop_names[] = {
#define NAME(n) #n,
    LOOP_STATS_COUNTERS(NAME)};
static const char *const pool_names[] = {POOL_STATS_COUNTERS(NAME)};
static const char *const hloop_names[] = {HANDOFF_LOOP_COUNTERS(NAME)};
static const char *const hworker_names[] = {HANDOFF_WORKER_COUNTERS(NAME)
#undef NAME
};

/* A label value: \, " and newline escaped (the text format's rule). */
static void label(FILE *f, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\' || *v == '"')
            fprintf(f, "\\%c", *v);
        else if (*v == '\n')
            fputs("\\n", f);
        else
            fputc(*v, f);
    }
}

static void thread_labels(FILE *f, const struct metrics_data *d, const struct metrics_thread *t)
{
    fprintf(f, "{worker=\"%llu\",thread=\"", (unsigned long long)d->worker);
    label(f, t->name);
    fprintf(f, "\",role=\"");
    label(f, t->role);
    fprintf(f, "\"}");
}

static void head(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static bool ns_counter(const char *n)
{
    size_t len = strlen(n);
    return len > 3 && strcmp(n + len - 3, "_ns") == 0;
}

/* A counter of the loop thread (k: index in loop[]) for every worker, then
 * the total over workers. */
static void loop_family(FILE *f, size_t k)
{
    char name[96];
    const char *n = loop_names[k];
    bool ns = ns_counter(n);
    if (ns)
        snprintf(name, sizeof name, "cserve_loop_%.*s_seconds_total", (int)strlen(n) - 3, n);
    else
        snprintf(name, sizeof name, "cserve_loop_%s_total", n);
    head(f, name, "counter", "the loop thread's counter of the same name (struct loop_stats)");
    double sum = 0;
    for (unsigned i = 0; i < M.nslots; i++) {
        if (!M.have[i] || !M.data[i].nthreads)
            continue;
        double v = (double)M.data[i].loop[k] / (ns ? 1e9 : 1);
        sum += v;
        fputs(name, f);
        thread_labels(f, &M.data[i], &M.data[i].threads[0]);
        fprintf(f, " %.17g\n", v);
    }
    fprintf(f, "%s{worker=\"all\",thread=\"all\",role=\"loop\"} %.17g\n", name, sum);
}

/* A per-thread value of role `role` for every worker, then the total. */
typedef double (*thread_value)(const struct metrics_data *d, const struct metrics_thread *t, size_t k);

static void thread_family(FILE *f, const char *name, const char *type, const char *help, const char *role,
                          thread_value get, size_t k, bool total)
{
    head(f, name, type, help);
    double sums[2] = {0, 0}; /* loop, pool */
    bool seen[2] = {false, false};
    for (unsigned i = 0; i < M.nslots; i++) {
        if (!M.have[i])
            continue;
        const struct metrics_data *d = &M.data[i];
        for (uint64_t j = 0; j < d->nthreads; j++) {
            const struct metrics_thread *t = &d->threads[j];
            if (role && strcmp(t->role, role) != 0)
                continue;
            if (!role && !t->name[0])
                continue;
            double v = get(d, t, k);
            sums[j != 0] += v;
            seen[j != 0] = true;
            fputs(name, f);
            thread_labels(f, d, t);
            fprintf(f, " %.17g\n", v);
        }
    }
    if (!total)
        return;
    static const char *const roles[2] = {"loop", "pool"};
    for (int r = 0; r < 2; r++)
        if (seen[r])
            fprintf(f, "%s{worker=\"all\",thread=\"all\",role=\"%s\"} %.17g\n", name, roles[r], sums[r]);
}

static double get_cpu(const struct metrics_data *d, const struct metrics_thread *t, size_t k)
{
    (void)d, (void)k;
    return t->cpu_s;
}
static double get_requests(const struct metrics_data *d, const struct metrics_thread *t, size_t k)
{
    (void)d, (void)k;
    return (double)t->requests;
}
static double get_pool(const struct metrics_data *d, const struct metrics_thread *t, size_t k)
{
    (void)d;
    return (double)t->pool[k];
}
static double get_hworker(const struct metrics_data *d, const struct metrics_thread *t, size_t k)
{
    (void)d;
    return (double)t->hworker[k];
}
static double get_hworker_gauge(const struct metrics_data *d, const struct metrics_thread *t, size_t k)
{
    (void)d;
    return (double)t->hworker_gauge[k];
}
static double get_queue(const struct metrics_data *d, const struct metrics_thread *t, size_t k)
{
    (void)d, (void)k;
    return (double)t->queue;
}
static double get_hloop(const struct metrics_data *d, const struct metrics_thread *t, size_t k)
{
    (void)t;
    return (double)d->hloop[k];
}

/* A per-worker value (no thread), then the total. */
static void worker_family(FILE *f, const char *name, const char *type, const char *help,
                          uint64_t (*get)(const struct metrics_data *d))
{
    head(f, name, type, help);
    uint64_t sum = 0;
    for (unsigned i = 0; i < M.nslots; i++) {
        if (!M.have[i])
            continue;
        uint64_t v = get(&M.data[i]);
        sum += v;
        fprintf(f, "%s{worker=\"%u\"} %llu\n", name, i, (unsigned long long)v);
    }
    fprintf(f, "%s{worker=\"all\"} %llu\n", name, (unsigned long long)sum);
}

static uint64_t get_bytes_in(const struct metrics_data *d) { return d->bytes_in; }
static uint64_t get_bytes_out(const struct metrics_data *d) { return d->bytes_out; }
static uint64_t get_conns(const struct metrics_data *d) { return d->conns_open; }

static void latency_series(FILE *f, const char *worker, const uint64_t *b, uint64_t ns)
{
    uint64_t cum = 0;
    for (unsigned k = 0; k <= METRICS_BUCKETS; k++) {
        cum += b[k];
        fprintf(f, "cserve_request_duration_seconds_bucket{worker=\"%s\",le=\"", worker);
        if (k < METRICS_BUCKETS)
            fprintf(f, "%g", (double)METRICS_BUCKET_US(k) / 1e6);
        else
            fputs("+Inf", f);
        fprintf(f, "\"} %llu\n", (unsigned long long)cum);
    }
    fprintf(f, "cserve_request_duration_seconds_sum{worker=\"%s\"} %.9f\n", worker, (double)ns / 1e9);
    fprintf(f, "cserve_request_duration_seconds_count{worker=\"%s\"} %llu\n", worker, (unsigned long long)cum);
}

static void render_metrics(FILE *f)
{
    head(f, "cserve_info", "gauge", "the server: version and handoff");
    fprintf(f, "cserve_info{version=\"%s\",handoff=\"", CSERVE_VERSION);
    label(f, M.opt->native_hello ? "none" : M.opt->inline_app ? "none (inline)" : M.opt->handoff->name);
    fprintf(f, "\"} 1\n");
    head(f, "cserve_worker_pid", "gauge", "the process serving each worker slot");
    for (unsigned i = 0; i < M.nslots; i++)
        if (M.have[i])
            fprintf(f, "cserve_worker_pid{worker=\"%u\"} %lld\n", i, (long long)M.data[i].pid);
    thread_family(f, "cserve_thread_cpu_seconds_total", "counter", "CPU time of each thread (its own CPU clock)",
                  NULL, get_cpu, 0, true);
    thread_family(f, "cserve_thread_requests_total", "counter",
                  "requests each thread finished (loop: responses written; pool: app calls)", NULL,
                  get_requests, 0, true);
    for (size_t k = 0; k < LOOP_C_N; k++)
        loop_family(f, k);
    for (size_t k = 1; k < POOL_C_N; k++) { /* [0] is requests, above */
        char name[96];
        snprintf(name, sizeof name, "cserve_pool_%s_total", pool_names[k]);
        thread_family(f, name, "counter", "the pool thread's counter of the same name (struct pool_stats)",
                      "pool", get_pool, k, true);
    }
    bool handoff = false;
    for (unsigned i = 0; i < M.nslots; i++)
        handoff |= M.have[i] && M.data[i].has_handoff;
    if (handoff) {
        for (size_t k = 0; k < HLOOP_C_N; k++) {
            char name[96];
            snprintf(name, sizeof name, "cserve_handoff_loop_%s_total", hloop_names[k]);
            thread_family(f, name, "counter", "the handoff's loop-side counter of the same name", "loop",
                          get_hloop, k, true);
        }
        for (size_t k = 0; k < HWORKER_C_N; k++) {
            char name[96];
            snprintf(name, sizeof name, "cserve_handoff_worker_%s_total", hworker_names[k]);
            thread_family(f, name, "counter", "the handoff's pool-side counter of the same name", "pool",
                          get_hworker, k, true);
        }
        head(f, "cserve_handoff_loop_spin_budget_nanoseconds", "gauge", "the loop's adaptive spin budget now");
        for (unsigned i = 0; i < M.nslots; i++)
            if (M.have[i] && M.data[i].has_handoff && M.data[i].nthreads) {
                fputs("cserve_handoff_loop_spin_budget_nanoseconds", f);
                thread_labels(f, &M.data[i], &M.data[i].threads[0]);
                fprintf(f, " %llu\n", (unsigned long long)M.data[i].hloop_gauge[0]);
            }
        thread_family(f, "cserve_handoff_worker_spin_budget_nanoseconds", "gauge",
                      "each pool thread's adaptive spin budget now", "pool", get_hworker_gauge, 0, false);
    }
    thread_family(f, "cserve_queue_depth", "gauge",
                  "requests submitted to each pool thread and not yet done (the one it runs included)", "pool",
                  get_queue, 0, true);

    head(f, "cserve_requests_total", "counter", "responses finished, by status class");
    uint64_t cls[METRICS_CLASSES] = {0};
    for (unsigned i = 0; i < M.nslots; i++) {
        if (!M.have[i])
            continue;
        for (unsigned c = 0; c < METRICS_CLASSES; c++) {
            cls[c] += M.data[i].status[c];
            fprintf(f, "cserve_requests_total{worker=\"%u\",class=\"%s\"} %llu\n", i, metrics_class_names[c],
                    (unsigned long long)M.data[i].status[c]);
        }
    }
    for (unsigned c = 0; c < METRICS_CLASSES; c++)
        fprintf(f, "cserve_requests_total{worker=\"all\",class=\"%s\"} %llu\n", metrics_class_names[c],
                (unsigned long long)cls[c]);

    head(f, "cserve_request_duration_seconds", "histogram",
         "from the request head complete to the last byte of the response written");
    uint64_t lat[METRICS_BUCKETS + 1] = {0}, lat_ns = 0;
    for (unsigned i = 0; i < M.nslots; i++) {
        if (!M.have[i])
            continue;
        char w[16];
        snprintf(w, sizeof w, "%u", i);
        latency_series(f, w, M.data[i].latency, M.data[i].latency_ns);
        for (unsigned k = 0; k <= METRICS_BUCKETS; k++)
            lat[k] += M.data[i].latency[k];
        lat_ns += M.data[i].latency_ns;
    }
    latency_series(f, "all", lat, lat_ns);

    worker_family(f, "cserve_received_bytes_total", "counter", "bytes read from clients", get_bytes_in);
    worker_family(f, "cserve_sent_bytes_total", "counter", "bytes written to clients", get_bytes_out);
    worker_family(f, "cserve_connections_open", "gauge", "client connections open", get_conns);

    head(f, "cserve_regime", "gauge",
         "which stage bounds the server over the last few seconds (1: the verdict); precedence: "
         "loop-bound, gil-bound, threads-short, machine-bound, not-loaded");
    for (int r = 0; r < REGIME_N; r++)
        fprintf(f, "cserve_regime{regime=\"%s\"} %d\n", verdict_name((enum regime)r),
                M.verdict.regime == (enum regime)r);
    head(f, "cserve_verdict_window_seconds", "gauge", "the window the verdict's figures cover");
    fprintf(f, "cserve_verdict_window_seconds %.3f\n", M.vin.window_s);
    head(f, "cserve_verdict_loop_utilisation", "gauge", "the busiest loop thread's share of a core");
    fprintf(f, "cserve_verdict_loop_utilisation %.4f\n", M.vin.loop_util);
    head(f, "cserve_verdict_pool_utilisation", "gauge",
         "the busiest worker's pool threads' CPU together, as a share of a core (the GIL held)");
    fprintf(f, "cserve_verdict_pool_utilisation %.4f\n", M.vin.pool_util);
    head(f, "cserve_verdict_pool_ready_ratio", "gauge",
         "the same pool threads' time runnable but not running (waiting for a CPU), as a share of a core");
    fprintf(f, "cserve_verdict_pool_ready_ratio %.4f\n", M.vin.pool_ready);
    head(f, "cserve_verdict_queued_ratio", "gauge",
         "share of samples in which every pool thread had a request waiting");
    fprintf(f, "cserve_verdict_queued_ratio %.4f\n", M.vin.queued_frac);
    head(f, "cserve_verdict_machine_busy_ratio", "gauge", "share of all CPUs busy (/proc/stat; -1: unknown)");
    fprintf(f, "cserve_verdict_machine_busy_ratio %.4f\n", M.vin.machine_busy);
}

/* ---- /stats.json ---- */

static void json_latency(FILE *f, const uint64_t *b, uint64_t ns)
{
    uint64_t n = 0;
    fprintf(f, "{\"le_us\": [");
    for (unsigned k = 0; k < METRICS_BUCKETS; k++)
        fprintf(f, "%s%llu", k ? ", " : "", (unsigned long long)METRICS_BUCKET_US(k));
    fprintf(f, "], \"counts\": [");
    for (unsigned k = 0; k <= METRICS_BUCKETS; k++) {
        n += b[k];
        fprintf(f, "%s%llu", k ? ", " : "", (unsigned long long)b[k]);
    }
    fprintf(f, "], \"count\": %llu, \"sum_s\": %.9f}", (unsigned long long)n, (double)ns / 1e9);
}

static void json_named(FILE *f, const char *const *names, const uint64_t *v, size_t n)
{
    fputc('{', f);
    for (size_t k = 0; k < n; k++)
        fprintf(f, "%s\"%s\": %llu", k ? ", " : "", names[k], (unsigned long long)v[k]);
    fputc('}', f);
}

static void render_json(FILE *f)
{
    fprintf(f, "{\"version\": \"%s\", \"t\": %.6f, \"regimes\": [", CSERVE_VERSION, clock_s());
    for (int r = 0; r < REGIME_N; r++)
        fprintf(f, "%s\"%s\"", r ? ", " : "", verdict_name((enum regime)r));
    fprintf(f, "],\n \"verdict\": {\"regime\": \"%s\", \"advice\": ", M.verdict.name);
    stats_json_string(f, M.verdict.advice);
    fprintf(f, ", \"why\": ");
    stats_json_string(f, M.verdict.why);
    fprintf(f, ", \"precedence\": \"loop-bound > gil-bound > threads-short > machine-bound > not-loaded\", "
               "\"figures\": {\"window_s\": %.3f, \"loop_util\": %.4f, \"pool_util\": %.4f, "
               "\"pool_ready\": %.4f, \"queued_frac\": %.4f, \"machine_busy\": %.4f, \"worker\": %u, "
               "\"pool_threads\": %u}},\n",
            M.vin.window_s, M.vin.loop_util, M.vin.pool_util, M.vin.pool_ready, M.vin.queued_frac,
            M.vin.machine_busy, M.vworker,
            M.vin.pool_threads);
    fprintf(f, " \"workers\": [");
    bool first = true;
    for (unsigned i = 0; i < M.nslots; i++) {
        if (!M.have[i])
            continue;
        const struct metrics_data *d = &M.data[i];
        fprintf(f, "%s\n  {\"worker\": %u, \"pid\": %lld, \"t\": %.6f, \"started\": %.6f, \"connections_open\": %llu, "
                   "\"bytes_in\": %llu, \"bytes_out\": %llu, \"requests_by_class\": {",
                first ? "" : ",", i, (long long)d->pid, d->t, d->started, (unsigned long long)d->conns_open,
                (unsigned long long)d->bytes_in, (unsigned long long)d->bytes_out);
        first = false;
        for (unsigned c = 0; c < METRICS_CLASSES; c++)
            fprintf(f, "%s\"%s\": %llu", c ? ", " : "", metrics_class_names[c], (unsigned long long)d->status[c]);
        fprintf(f, "}, \"latency\": ");
        json_latency(f, d->latency, d->latency_ns);
        fprintf(f, ", \"queue_samples\": %llu, \"queue_samples_all_waiting\": %llu, \"loop\": ",
                (unsigned long long)d->samples, (unsigned long long)d->samples_queued);
        json_named(f, loop_names, d->loop, LOOP_C_N);
        if (d->has_handoff) {
            fprintf(f, ", \"handoff\": ");
            json_named(f, hloop_names, d->hloop, HLOOP_C_N);
        }
        fprintf(f, ", \"threads\": [");
        for (uint64_t j = 0; j < d->nthreads; j++) {
            const struct metrics_thread *t = &d->threads[j];
            fprintf(f, "%s\n    {\"name\": ", j ? "," : "");
            stats_json_string(f, t->name);
            fprintf(f, ", \"role\": ");
            stats_json_string(f, t->role);
            fprintf(f, ", \"tid\": %lld, \"cpu_s\": %.6f, \"requests\": %llu", (long long)t->tid, t->cpu_s,
                    (unsigned long long)t->requests);
            if (j) {
                fprintf(f, ", \"queue_depth\": %llu, \"counters\": ", (unsigned long long)t->queue);
                json_named(f, pool_names, t->pool, POOL_C_N);
                if (d->has_handoff) {
                    fprintf(f, ", \"handoff\": ");
                    json_named(f, hworker_names, t->hworker, HWORKER_C_N);
                }
            }
            fputc('}', f);
        }
        fprintf(f, "]}");
    }
    fprintf(f, "\n ]}\n");
}

/* ---- the clients ---- */

static void client_close(struct client *c)
{
    close(c->fd);
    free(c->out);
    c->fd = -1;
    c->out = NULL;
}

static void respond(struct client *c, int status, const char *reason, const char *type, const char *body,
                    size_t body_len, bool head_only, const char *extra)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) {
        client_close(c);
        return;
    }
    fprintf(f, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nCache-Control: no-store\r\n"
               "%sConnection: close\r\n\r\n",
            status, reason, type, body_len, extra ? extra : "");
    if (!head_only && body_len)
        fwrite(body, 1, body_len, f);
    if (fclose(f) != 0) {
        free(buf);
        client_close(c);
        return;
    }
    c->out = buf;
    c->out_len = len;
    c->out_off = 0;
    c->deadline_ms = clock_coarse_ms() + SEND_DEADLINE_MS;
}

static void respond_text(struct client *c, int status, const char *reason, const char *extra)
{
    char body[64];
    int n = snprintf(body, sizeof body, "%d %s\n", status, reason);
    respond(c, status, reason, "text/plain; charset=utf-8", body, (size_t)n, false, extra);
}

/* may_wait: a /stats.json?wait=1 may be held for the next sample (at most
 * METRICS_TICK_MS), so that a page polling it gets each snapshot once, as
 * soon as it is taken. */
static void handle(struct client *c, bool may_wait)
{
    char *sp = memchr(c->in, ' ', c->in_len);
    if (!sp) {
        respond_text(c, 400, "Bad Request", NULL);
        return;
    }
    size_t mlen = (size_t)(sp - c->in);
    bool get = mlen == 3 && memcmp(c->in, "GET", 3) == 0;
    bool head_only = mlen == 4 && memcmp(c->in, "HEAD", 4) == 0;
    if (!get && !head_only) {
        respond_text(c, 405, "Method Not Allowed", "Allow: GET, HEAD\r\n");
        return;
    }
    const char *path = sp + 1;
    size_t plen = strcspn(path, " ?\r\n");
    char *body = NULL;
    size_t len = 0;
    const char *type;
    if (plen == 1 && path[0] == '/') {
        respond(c, 200, "OK", "text/html; charset=utf-8", cserve_dashboard_html, cserve_dashboard_html_len,
                head_only, NULL);
        return;
    }
    if (may_wait && plen == 11 && memcmp(path, "/stats.json", 11) == 0 && path[plen] == '?') {
        const char *eol = memchr(path, '\n', c->in_len - (size_t)(path - c->in));
        const char *w = memmem(path + plen, (size_t)((eol ? eol : c->in + c->in_len) - (path + plen)), "wait=1", 6);
        if (w) {
            c->waiting = true;
            c->deadline_ms = clock_coarse_ms() + HEAD_DEADLINE_MS;
            return;
        }
    }
    FILE *f = open_memstream(&body, &len);
    if (!f) {
        client_close(c);
        return;
    }
    for (unsigned i = 0; i < M.nslots; i++) /* the freshest figures, not the last sample's */
        M.have[i] = metrics_read_slot(i, &M.data[i]);
    if (plen == 8 && memcmp(path, "/metrics", 8) == 0) {
        type = "text/plain; version=0.0.4; charset=utf-8";
        render_metrics(f);
    } else if (plen == 11 && memcmp(path, "/stats.json", 11) == 0) {
        type = "application/json";
        render_json(f);
    } else {
        fclose(f);
        free(body);
        respond_text(c, 404, "Not Found", NULL);
        return;
    }
    if (fclose(f) != 0) {
        free(body);
        client_close(c);
        return;
    }
    respond(c, 200, "OK", type, body, len, head_only, NULL);
    free(body);
}

static void on_readable(struct client *c)
{
    for (;;) {
        if (c->in_len == sizeof c->in) {
            respond_text(c, 431, "Request Header Fields Too Large", NULL);
            return;
        }
        ssize_t n = recv(c->fd, c->in + c->in_len, sizeof c->in - c->in_len, 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
            client_close(c);
            return;
        }
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return;
        }
        size_t from = c->in_len > 3 ? c->in_len - 3 : 0;
        c->in_len += (size_t)n;
        if (memmem(c->in + from, c->in_len - from, "\r\n\r\n", 4) ||
            memmem(c->in + from, c->in_len - from, "\n\n", 2)) {
            handle(c, true);
            return;
        }
    }
}

static void on_writable(struct client *c)
{
    while (c->out_off < c->out_len) {
        ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN)
                client_close(c);
            return;
        }
        c->out_off += (size_t)n;
    }
    shutdown(c->fd, SHUT_WR);
    client_close(c);
}

static void on_accept(void)
{
    for (;;) {
        struct client *c = NULL;
        for (unsigned i = 0; i < MAX_CONNS && !c; i++)
            if (M.clients[i].fd < 0)
                c = &M.clients[i];
        if (!c)
            return; /* full: the rest wait in the backlog */
        int fd = accept4(M.listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        *c = (struct client){.fd = fd, .deadline_ms = clock_coarse_ms() + HEAD_DEADLINE_MS};
    }
}

static void *serve(void *arg)
{
    (void)arg;
    struct pollfd pfd[MAX_CONNS + 2];
    struct client *who[MAX_CONNS + 2];
    uint64_t next_sample = 0;
    while (!atomic_load_explicit(&M.stop, memory_order_relaxed)) {
        uint64_t now = clock_coarse_ms();
        if (now >= next_sample) {
            take_sample();
            decide();
            next_sample = now + METRICS_TICK_MS;
            for (unsigned i = 0; i < MAX_CONNS; i++) {
                struct client *c = &M.clients[i];
                if (c->fd >= 0 && c->waiting) {
                    c->waiting = false;
                    handle(c, false);
                    if (c->fd >= 0 && c->out)
                        on_writable(c);
                }
            }
        }
        int timeout = (int)(next_sample - now);
        unsigned n = 0, busy = 0;
        pfd[n++] = (struct pollfd){.fd = M.wake_fd, .events = POLLIN};
        for (unsigned i = 0; i < MAX_CONNS; i++) {
            struct client *c = &M.clients[i];
            if (c->fd < 0)
                continue;
            if (now >= c->deadline_ms) { /* slow: whatever it was doing */
                client_close(c);
                continue;
            }
            if (c->deadline_ms - now < (uint64_t)timeout)
                timeout = (int)(c->deadline_ms - now);
            busy++;
            if (c->waiting)
                continue; /* nothing to read or write until the sample */
            who[n] = c;
            pfd[n++] = (struct pollfd){.fd = c->fd, .events = c->out ? POLLOUT : POLLIN};
        }
        unsigned lst = n;
        if (busy < MAX_CONNS)
            pfd[n++] = (struct pollfd){.fd = M.listen_fd, .events = POLLIN};
        int r = poll(pfd, n, timeout > 0 ? timeout : 1);
        if (r <= 0)
            continue;
        for (unsigned i = 1; i < lst; i++) {
            struct client *c = who[i];
            if (!pfd[i].revents || c->fd < 0)
                continue;
            if (c->out)
                on_writable(c);
            else
                on_readable(c);
            if (c->fd >= 0 && c->out && c->out_off == 0 && !c->waiting)
                on_writable(c); /* a fresh response: try it at once */
        }
        if (lst < n && (pfd[lst].revents & POLLIN))
            on_accept();
    }
    return NULL;
}

static void thread_stop(void)
{
    atomic_store_explicit(&M.stop, true, memory_order_relaxed);
    uint64_t one = 1;
    if (write(M.wake_fd, &one, sizeof one) < 0) {
        /* cannot fail on an eventfd below its maximum; the poll timeout
         * would end the wait anyway */
    }
    pthread_join(M.thread, NULL);
    M.running = false;
}

static int thread_start(void)
{
    uint64_t v;
    if (read(M.wake_fd, &v, sizeof v) < 0) {
        /* nothing was pending */
    }
    atomic_store_explicit(&M.stop, false, memory_order_relaxed);
    if (pthread_create(&M.thread, NULL, serve, NULL) != 0)
        return -1;
    M.running = true;
    return 0;
}

/* A fork (a worker started, an app's os.fork) happens with this thread
 * stopped and joined: the child then has no lock this thread could have
 * held, and the process forks single-threaded where it otherwise is (the
 * supervisor; TSan refuses threads in a child forked with more than one).
 * Its clients and history stay in M; it resumes in the parent. */
static void before_fork(void)
{
    pthread_mutex_lock(&M.fork_lock);
    M.paused = M.running;
    if (M.running)
        thread_stop();
}

static void after_fork_parent(void)
{
    if (M.paused && thread_start() != 0)
        log_error("metrics: cannot restart the metrics thread after a fork");
    M.paused = false;
    pthread_mutex_unlock(&M.fork_lock);
}

/* A forked worker must not keep the metrics listener (nor its clients)
 * open: the port would outlive the process that serves it. */
static void after_fork_child(void)
{
    if (M.listen_fd >= 0)
        close(M.listen_fd);
    if (M.wake_fd >= 0)
        close(M.wake_fd);
    for (unsigned i = 0; i < MAX_CONNS; i++)
        if (M.clients[i].fd >= 0)
            close(M.clients[i].fd);
    M.listen_fd = M.wake_fd = -1;
    M.running = M.paused = false;
    M.unix_path[0] = '\0';
    pthread_mutex_unlock(&M.fork_lock);
}

int metrics_start(const struct options *opt, unsigned slots)
{
    char why[320] = "";
    M.opt = opt;
    if (metrics_shm_create(slots) != 0) {
        log_error("--metrics-bind: shared memory: %s", strerror(errno));
        return -1;
    }
    const char *spec = opt->metrics_bind;
    if (strncmp(spec, "unix:", 5) == 0) {
        M.listen_fd = bind_unix(spec + 5);
        if (M.listen_fd < 0)
            snprintf(why, sizeof why, "%s: %s", spec, strerror(errno));
    } else {
        M.listen_fd = bind_tcp(spec, why, sizeof why);
    }
    if (M.listen_fd < 0) {
        log_error("--metrics-bind: %s", why[0] ? why : strerror(errno));
        return -1;
    }
    M.nslots = metrics_nslots();
    M.data = calloc(M.nslots, sizeof *M.data);
    M.have = calloc(M.nslots, sizeof *M.have);
    for (unsigned i = 0; i < HISTORY; i++)
        M.hist[i].w = calloc(M.nslots, sizeof *M.hist[i].w);
    M.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    for (unsigned i = 0; i < MAX_CONNS; i++)
        M.clients[i].fd = -1;
    if (!M.data || !M.have || M.wake_fd < 0) {
        log_error("--metrics-bind: %s", strerror(errno));
        return -1;
    }
    for (unsigned i = 0; i < HISTORY; i++)
        if (!M.hist[i].w)
            return -1;
    decide();
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
    if (thread_start() != 0) {
        log_error("--metrics-bind: cannot start its thread");
        return -1;
    }
    log_info("metrics: serving /metrics, /stats.json and the dashboard on %s", spec);
    return 0;
}

void metrics_stop(void)
{
    pthread_mutex_lock(&M.fork_lock);
    bool running = M.running;
    if (running)
        thread_stop();
    pthread_mutex_unlock(&M.fork_lock);
    if (!running)
        return;
    for (unsigned i = 0; i < MAX_CONNS; i++)
        if (M.clients[i].fd >= 0)
            client_close(&M.clients[i]);
    close(M.listen_fd);
    close(M.wake_fd);
    M.listen_fd = M.wake_fd = -1;
    if (M.unix_path[0])
        unlink(M.unix_path);
    for (unsigned i = 0; i < HISTORY; i++)
        free(M.hist[i].w);
    free(M.data);
    free(M.have);
}
