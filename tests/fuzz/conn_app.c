/* conn_app.c — see conn_app.h. The pool side follows core/python/job.c: a message
 * is posted with msg_buf = fill_buf; a flush switches buffers; the job waits
 * (here: does nothing) until job->ack moves, which only the real loop-side
 * code (job_ack) does. */
#include "conn_app.h"

#include <stdio.h>
#include <string.h>

#include "../../core/conn/jobs.h"
#include "../../core/conn/loop.h"
#include "../../core/http/response_head.h"
#include "../../handoffs/handoff.h"
#include "fuzz_check.h"

#define POOL_MAX 256
#define SEEN_MAX 1024

enum stage { STAGE_START, STAGE_READ, STAGE_WRITE };

static struct {
    uint64_t seed;
    unsigned flush_odds; /* this run's habits: a flush one step in N (0: never) */
    unsigned full_odds;  /* a full handoff one submit in N (0: never) */
    unsigned runs;
    bool body_error;
    bool lost;           /* a job was told its client is gone */
    struct job *q[POOL_MAX]; /* submitted, not done: q[qh], q[qh+1], ... */
    size_t qh, qn;
    struct job *msgs[POOL_MAX]; /* posted, not taken by the loop */
    size_t mh, mn;
    struct job *seen[SEEN_MAX];
    size_t nseen;
    /* the running job (q[qh]) */
    enum stage stage;
    unsigned seq;
    size_t body_len;
    uint64_t body_hash;
    struct buffer resp; /* its whole response, built once the body is read */
    size_t resp_sent;   /* bytes of resp already posted */
    unsigned flushes;
    uint64_t now_ns;    /* the pool's clock, for the completion stamp (app_pool_clock) */
} pool;

/* The response, the same bytes whichever way the app runs. */
static void respond(struct job *job, struct buffer *out, unsigned seq, int status, size_t len,
                    uint64_t h)
{
    const char *line = status == 200 ? "200 OK"
                       : status == 400 ? "400 Bad Request"
                       : status == 413 ? "413 Content Too Large"
                                       : "500 Internal Server Error";
    if (status != 200 ||
        (job->req.target && memmem(job->req.target, job->req.target_len, "close-after", 11)))
        job->close_after = true;
    char text[64];
    int n = snprintf(text, sizeof text, "%zu %016llx", len, (unsigned long long)h);
    FUZZ_ASSERT(buffer_reserve(out, 512));
    response_head_start(out, line, strlen(line));
    /* (HEAD gets "0": the response parser does not track methods) */
    out->len += (size_t)snprintf(out->data + out->len, 96, "X-Seq: %u\r\nContent-Length: %d\r\n",
                                 seq, job->is_head ? 0 : n);
    job_head_end(out, job);
    if (!job->is_head) {
        memcpy(out->data + out->len, text, (size_t)n);
        out->len += (size_t)n;
    }
    job->status = status;
}

/* ---- inline: the body is framed and read before the app runs ---- */

void inline_run(struct job *job)
{
    struct body_pipe *b = &job->body;
    FUZZ_ASSERT(b->eof && !b->error && b->pos <= b->len);
    size_t len = b->len - b->pos;
    uint64_t h = len ? fuzz_hash(FUZZ_HASH_INIT, b->data + b->pos, len) : FUZZ_HASH_INIT;
    b->pos = b->len;
    job->out[0].len = 0;
    respond(job, &job->out[0], pool.runs++, 200, len, h);
    job_done(job); /* no pool thread: only records the message */
}

/* ---- the stand-in pool ---- */

static int pool_submit(struct handoff *h, unsigned w, struct job *job)
{
    (void)h, (void)w;
    /* Sometimes full, as a queue busy with other connections' jobs is (the
     * harness retries as the loop does when one of those finishes). */
    if (pool.full_odds && fuzz_next(&pool.seed) % pool.full_odds == 0)
        return HANDOFF_FULL;
    FUZZ_ASSERT(pool.qn < POOL_MAX);
    for (size_t i = 0; i < pool.qn; i++)
        FUZZ_ASSERT(pool.q[(pool.qh + i) % POOL_MAX] != job); /* in the handoff at most once */
    pool.q[(pool.qh + pool.qn++) % POOL_MAX] = job;
    size_t i = 0;
    while (i < pool.nseen && pool.seen[i] != job)
        i++;
    if (i == pool.nseen) {
        FUZZ_ASSERT(pool.nseen < SEEN_MAX);
        pool.seen[pool.nseen++] = job;
    }
    return HANDOFF_OK;
}

static const struct handoff_ops pool_ops = {.submit = pool_submit};
static struct handoff pool_handoff = {.ops = &pool_ops, .threads = 1};

struct handoff *app_pool_handoff(void) { return &pool_handoff; }

void app_pool_clock(uint64_t now_ns) { pool.now_ns = now_ns; }

/* As job.c's post: the loop reads msg, msg_buf and the stamp when it takes
 * it. */
static void post(struct job *job, enum job_msg msg)
{
    FUZZ_ASSERT(pool.mn < POOL_MAX);
    if (msg == JOB_DONE)
        job->done_ns = pool.now_ns;
    job->msg = msg;
    job->msg_buf = job->fill_buf;
    pool.msgs[(pool.mh + pool.mn++) % POOL_MAX] = job;
    if (msg == JOB_DONE) {
        pool.qh = (pool.qh + 1) % POOL_MAX;
        pool.qn--;
        pool.stage = STAGE_START;
    } else {
        job->awaiting_ack = true;
    }
}

/* Copy n more bytes of the response into the buffer being filled. */
static void fill(struct job *job, size_t n)
{
    struct buffer *out = &job->out[job->fill_buf];
    FUZZ_ASSERT(buffer_reserve(out, n + 1));
    memcpy(out->data + out->len, pool.resp.data + pool.resp_sent, n);
    out->len += n;
    pool.resp_sent += n;
}

bool app_pool_step(void)
{
    if (!pool.qn)
        return false;
    struct job *job = pool.q[pool.qh];
    if (job->awaiting_ack) {
        /* as job.c's await_ack, without the wait */
        if (atomic_load_explicit(&job->ack, memory_order_acquire) != job->acks_seen + 1)
            return false;
        job->acks_seen++;
        job->awaiting_ack = false;
    }
    struct body_pipe *b = &job->body;
    switch (pool.stage) {
    case STAGE_START:
        if (job_lost(job)) { /* as pool.c: not run (job_skip) */
            pool.lost = true;
            job->incomplete = JOB_UNRUN;
            job->close_after = true;
            job->out[job->fill_buf].len = 0;
            post(job, JOB_DONE);
            return true;
        }
        pool.seq = pool.runs++;
        pool.body_len = 0;
        pool.body_hash = FUZZ_HASH_INIT;
        pool.resp.len = 0;
        pool.resp_sent = 0;
        pool.flushes = 0;
        pool.stage = STAGE_READ;
        return true;
    case STAGE_READ:
        if (job_lost(job)) { /* the client is gone: stop producing */
            pool.lost = true;
            post(job, JOB_DONE);
            return true;
        }
        FUZZ_ASSERT(b->pos <= b->len);
        if (b->pos < b->len) { /* read some of the window */
            size_t take = 1 + (size_t)(fuzz_next(&pool.seed) % (b->len - b->pos));
            pool.body_hash = fuzz_hash(pool.body_hash, b->data + b->pos, take);
            pool.body_len += take;
            b->pos += take;
            return true;
        }
        if (b->error || b->eof) {
            int status = 200;
            if (b->error) {
                pool.body_error = true;
                status = b->error > 0 ? b->error : 500;
            }
            respond(job, &pool.resp, pool.seq, status, pool.body_len, pool.body_hash);
            pool.stage = STAGE_WRITE;
            return true;
        }
        post(job, JOB_NEED_BODY); /* as job_need_body: the window is empty, not at EOF */
        return true;
    case STAGE_WRITE: {
        if (job_lost(job)) {
            pool.lost = true;
            post(job, JOB_DONE);
            return true;
        }
        size_t left = pool.resp.len - pool.resp_sent;
        if (pool.flush_odds && pool.flushes < 2 && fuzz_next(&pool.seed) % pool.flush_odds == 0) {
            /* as job_flush: post this buffer, fill the other one */
            fill(job, (size_t)(fuzz_next(&pool.seed) % (left + 1)));
            post(job, JOB_FLUSH);
            job->fill_buf ^= 1;
            job->out[job->fill_buf].len = 0;
            pool.flushes++;
            return true;
        }
        fill(job, left);
        post(job, JOB_DONE);
        return true;
    }
    }
    return false;
}

struct job *app_pool_message(void)
{
    if (!pool.mn)
        return NULL;
    struct job *job = pool.msgs[pool.mh];
    pool.mh = (pool.mh + 1) % POOL_MAX;
    pool.mn--;
    return job;
}

bool app_pool_idle(void) { return pool.qn == 0 && pool.mn == 0; }

size_t app_pool_jobs(struct job *const **jobs)
{
    *jobs = pool.seen;
    return pool.nseen;
}

void app_reset(uint64_t seed)
{
    struct buffer keep = pool.resp;
    memset(&pool, 0, sizeof pool);
    pool.resp = keep;
    pool.seed = seed | 1;
    const unsigned flush[] = {0, 3, 1}, full[] = {0, 8};
    pool.flush_odds = flush[fuzz_next(&pool.seed) % 3];
    pool.full_odds = full[fuzz_next(&pool.seed) % 2];
}

void app_never_full(void) { pool.full_odds = 0; }

unsigned app_runs(void) { return pool.runs; }
bool app_body_error(void) { return pool.body_error; }
bool app_lost(void) { return pool.lost; }

void app_free(void) { buffer_free(&pool.resp); }
