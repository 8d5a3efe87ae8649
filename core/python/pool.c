/* pool.c — pool threads: take a job, run the app with the GIL held, post the
 * response; hold the GIL while there is work and drop it only to wait. */
#include <Python.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../handoffs/handoff.h"
#include "../../lib/clock.h"
#include "job.h"
#include "../base/log.h"
#include "../base/options.h"
#include "pool.h"
#include "../base/stats.h"
#include "wsgi.h"

struct pool_thread {
    pthread_t thread;
    unsigned index;
    struct pool *pool;
    struct pool_stats *stats;
    _Atomic bool exited;
};

struct pool {
    struct handoff *handoff;
    struct stats *stats;
    unsigned n;                  /* threads started (the loop thread's, after pool_start) */
    unsigned max;                /* threads[] has room for this many */
    PyInterpreterState *interp;
    struct pool_thread *threads;
    _Atomic unsigned registered; /* threads that have put themselves in the stats */
    /* pool_start waits on this for the threads it started to register; each
     * thread signals it once it has. */
    pthread_mutex_t registered_lock;
    pthread_cond_t registered_cond;
    bool watched;                /* --app-timeout: publish when each request started */
};

static PyThreadState *inline_state;

void pool_set_inline_state(void *thread_state) { inline_state = thread_state; }

/* job.h: a pool thread waiting for the loop's acknowledgement lets the other
 * threads (and the app's own) run meanwhile. */
static void *wait_begin(void) { return PyEval_SaveThread(); }
static void wait_end(void *token) { PyEval_RestoreThread(token); }
static const struct job_waiter gil_waiter = {wait_begin, wait_end};

/* The pool thread's identity in Python's threading module, made once at its
 * start. Apps ask threading.current_thread() (Flask's logging does), and for
 * a thread the threading module did not start that makes a _DummyThread
 * which lives until exit. Made here, it is one object per pool thread, from
 * a function tests/lsan.supp can name, rather than an allocation deep in
 * whichever request first asked. */
__attribute__((noinline)) static void adopt_python_thread(void)
{
    PyObject *threading = PyImport_ImportModule("threading");
    PyObject *self_thread = threading ? PyObject_CallMethod(threading, "current_thread", NULL) : NULL;
    if (!self_thread)
        PyErr_Clear(); /* an interpreter without threading: nothing to adopt */
    Py_XDECREF(self_thread);
    Py_XDECREF(threading);
}

static void *pool_main(void *arg)
{
    struct pool_thread *t = arg;
    struct pool *p = t->pool;
    struct handoff *h = p->handoff;
    const struct handoff_ops *ops = h->ops;
    char name[16];
    snprintf(name, sizeof name, "cserve-pool-%u", t->index);
    pthread_setname_np(pthread_self(), name);
    stats_register_self(p->stats, t->index + 1, name, "pool");
    pthread_mutex_lock(&p->registered_lock);
    atomic_fetch_add_explicit(&p->registered, 1, memory_order_release); /* pool_registered */
    pthread_cond_broadcast(&p->registered_cond);
    pthread_mutex_unlock(&p->registered_lock);
    job_thread_init(h, t->index, t->stats, &gil_waiter);

    bool watched = p->watched;
    PyThreadState *ts = PyThreadState_New(p->interp);
    PyEval_RestoreThread(ts);
    adopt_python_thread();
    for (;;) {
        struct job *job = ops->try_take ? ops->try_take(h, t->index) : NULL;
        if (!job) {
            PyEval_SaveThread();
            STAT(counter_inc(&t->stats->gil_releases));
            job = ops->take(h, t->index);
            PyEval_RestoreThread(ts);
            if (!job)
                break;
        }
        /* Its client reset, or the loop refused it or closed behind it,
         * while it waited in this thread's queue: nobody will read its
         * answer, so the app does not run it (core/conn/README.md, "One
         * thread"). One the loop gives up after this load runs to its end. */
        if (job_lost(job)) {
            job_skip(job);
            continue;
        }
        if (watched) {
            atomic_store_explicit(&t->stats->app_job, job, memory_order_relaxed);
            atomic_store_explicit(&t->stats->app_since_ms, clock_coarse_ms() | 1, memory_order_release);
        }
        wsgi_handle(job);
        if (watched)
            atomic_store_explicit(&t->stats->app_since_ms, 0, memory_order_relaxed);
        counter_inc(&t->stats->requests);
    }
    wsgi_thread_cleanup();
    PyThreadState_Clear(ts);
    PyThreadState_DeleteCurrent();
    atomic_store(&t->exited, true);
    return NULL;
}

/* pthread_create, or, in a test build (TEST_HOOKS=1), its failure:
 * CSERVE_TEST_FAIL_POOL_THREAD=k makes the start of pool thread k fail with
 * EAGAIN, as RLIMIT_NPROC would (which does not bind root), so
 * tests/integration/test_pool_start.py can drive the failure path with
 * threads 0..k-1 already running. */
static int start_thread(struct pool_thread *t)
{
#if CSERVE_TEST_HOOKS
    const char *fail = getenv("CSERVE_TEST_FAIL_POOL_THREAD");
    if (fail && *fail && strtoul(fail, NULL, 10) == t->index)
        return EAGAIN;
#endif
    return pthread_create(&t->thread, NULL, pool_main, t);
}

/* The new thread creates its Python thread state and then waits for the
 * GIL in pool_main (PyThreadState_New needs no GIL), so the caller may hold
 * it (pool_start) or not (the loop thread, later). */
int pool_start_thread(struct pool *p, unsigned k)
{
    if (k != p->n || k >= p->max)
        return EINVAL;
    struct pool_thread *t = &p->threads[k];
    t->index = k;
    t->pool = p;
    t->stats = &p->stats->pool[k];
    int err = start_thread(t);
    if (!err)
        p->n++;
    return err;
}

unsigned pool_started(const struct pool *p) { return p->n; }

unsigned pool_registered(const struct pool *p)
{
    return atomic_load_explicit(&p->registered, memory_order_acquire);
}

bool pool_wait_registered(struct pool *p, unsigned n, unsigned wait_ms)
{
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline); /* registered_cond's clock */
    deadline.tv_sec += wait_ms / 1000;
    deadline.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&p->registered_lock);
    int err = 0;
    while (pool_registered(p) < n && err != ETIMEDOUT)
        err = pthread_cond_timedwait(&p->registered_cond, &p->registered_lock, &deadline);
    bool all = pool_registered(p) >= n;
    pthread_mutex_unlock(&p->registered_lock);
    return all;
}

/* Undo a partial start: threads 0..started-1 run. Each takes the GIL first
 * thing (pool_main), and our caller holds it, so joining them with the GIL
 * held would wait forever: release it for the join. After shutdown each
 * thread's take returns NULL and it exits without running anything. */
static void stop_started(struct pool *p, unsigned started)
{
    p->handoff->ops->shutdown(p->handoff);
    PyThreadState *ts = PyEval_SaveThread();
    for (unsigned j = 0; j < started; j++)
        pthread_join(p->threads[j].thread, NULL);
    PyEval_RestoreThread(ts);
}

static void pool_free(struct pool *p)
{
    pthread_cond_destroy(&p->registered_cond);
    pthread_mutex_destroy(&p->registered_lock);
    free(p->threads);
    free(p);
}

struct pool *pool_start(struct handoff *h, unsigned n, unsigned max, struct stats *stats, bool watched)
{
    struct pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->watched = watched;
    p->handoff = h;
    p->stats = stats;
    p->max = max;
    p->interp = PyInterpreterState_Main();
    p->threads = calloc(max, sizeof *p->threads);
    if (!p->threads) {
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->registered_lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC); /* pool_wait_registered's deadline */
    pthread_cond_init(&p->registered_cond, &attr);
    pthread_condattr_destroy(&attr);
    for (unsigned i = 0; i < n; i++) {
        int err = pool_start_thread(p, i);
        if (err) {
            log_error("cannot start pool thread %u of %u: %s", i + 1, n, strerror(err));
            stop_started(p, i);
            pool_free(p);
            return NULL;
        }
    }
    /* The stats are complete (and no longer written) once all are in. A
     * thread registers before it takes the GIL, which the caller holds. */
    pthread_mutex_lock(&p->registered_lock);
    while (pool_registered(p) < n)
        pthread_cond_wait(&p->registered_cond, &p->registered_lock);
    pthread_mutex_unlock(&p->registered_lock);
    return p;
}

bool pool_stop(struct pool *p, unsigned wait_ms)
{
    p->handoff->ops->shutdown(p->handoff);
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += wait_ms / 1000;
    deadline.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    bool all = true;
    for (unsigned i = 0; i < p->n; i++)
        if (pthread_timedjoin_np(p->threads[i].thread, NULL, &deadline) != 0)
            all = false;
    if (all)
        pool_free(p);
    return all;
}

void inline_run(struct job *job)
{
    /* The loop thread takes the GIL per request: holding it across
     * epoll_wait would starve any thread the app started. */
    PyEval_RestoreThread(inline_state);
    wsgi_handle(job);
    inline_state = PyEval_SaveThread();
}

void pool_restore_inline_state(void)
{
    PyEval_RestoreThread(inline_state);
}
