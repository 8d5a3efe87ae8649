/* test_http_corpus.c — every case in tests/corpus/ through the real
 * connection code without a socket (tests/fuzz/conn_harness.c, as the
 * fuzzers drive it), fed whole, byte by byte and in random pieces, with
 * whole and bitten writes: the statuses answered, and whether it closes,
 * must match NAME.expect. Each is run twice over: with the app inline, and
 * on the harness's stand-in pool (pipelining, held responses, need-body,
 * flushes) under several schedules, whose bytes must equal the inline ones
 * (unless a body error reached the app: inline, the loop answers those).
 * tests/integration/test_corpus.py replays the same files against the
 * running server. Run from the repository root. */
#include "../fuzz/conn_harness.h"
#include "check.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>

#define CONN_MAX_HEAD 8192 /* the corpus assumes --max-header-size 8192 */

#define CORPUS "tests/corpus/"

static size_t read_file(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t n = fread(buf, 1, cap, f);
    fclose(f);
    return n;
}

/* The statuses answered and the closing, in the .expect format:
 * "200 200 open", "400 close". */
static void describe(const struct harness_result *r, char *out, size_t cap)
{
    size_t n = 0;
    out[0] = '\0';
    for (unsigned i = 0; i < r->responses && i < HARNESS_KEEP_STATUSES; i++)
        n += (size_t)snprintf(out + n, cap - n, "%d ", r->statuses[i]);
    snprintf(out + n, cap - n, "%s", r->closed_early ? "close" : "open");
}

static void check_case(const char *name)
{
    static char raw[65536];
    char path[512], expect[128], got[128];
    snprintf(path, sizeof path, CORPUS "%s.http", name);
    size_t n = read_file(path, raw, sizeof raw);
    snprintf(path, sizeof path, CORPUS "%s.expect", name);
    size_t e = read_file(path, expect, sizeof expect - 1);
    expect[e] = '\0';
    while (e && (expect[e - 1] == '\n' || expect[e - 1] == ' ')) expect[--e] = '\0';
    CHECK(n > 0 && e > 0, "%s: .http and .expect readable", name);

    /* "any" leaves the closing open to the server: compare the statuses. */
    char *any = strstr(expect, " any");
    if (any)
        *any = '\0';
    struct harness_result inline_whole = {0};
    const size_t max_piece[] = {0, 1, 7, 64};
    for (int pool = 0; pool < 2; pool++) {
        for (size_t w = 0; w < sizeof max_piece / sizeof *max_piece; w++) {
            if (max_piece[w] == 1 && n > 2048) continue; /* head re-scans per byte */
            for (unsigned sched = 0; sched < (pool ? 3u : 1u); sched++) {
                struct harness_config cfg = {.max_piece = max_piece[w],
                                             .max_write = max_piece[w] ? 13 : 0,
                                             .max_head = CONN_MAX_HEAD,
                                             .pool = pool,
                                             .capacity = 1 + sched * 3};
                struct harness_result r;
                harness_run((const uint8_t *)raw, n, 12345 + sched * 7919, &cfg, &r);
                describe(&r, got, sizeof got);
                const char *mode = pool ? "pool" : "inline";
                if (any)
                    CHECK(strncmp(got, expect, strlen(expect)) == 0 && got[strlen(expect)] == ' ',
                          "%s (%s, pieces of %zu): got '%s', want '%s any'", name, mode,
                          max_piece[w], got, expect);
                else
                    CHECK(strcmp(got, expect) == 0, "%s (%s, pieces of %zu): got '%s', want '%s'",
                          name, mode, max_piece[w], got, expect);
                if (!pool && w == 0)
                    inline_whole = r;
                if (pool && !r.body_error)
                    CHECK(r.responses == inline_whole.responses &&
                              r.out_len == inline_whole.out_len &&
                              r.out_hash == inline_whole.out_hash,
                          "%s (pool, pieces of %zu, schedule %u): the bytes inline gives", name,
                          max_piece[w], sched);
            }
        }
    }
    if (any)
        *any = ' ';
}

/* Beyond the corpus (whose files also go to the real server and its hello
 * app): the stand-in app closes the connection on a target with
 * "close-after" (conn_app.h), here in the middle of a pipeline, with
 * requests behind it that the pool runs but must never be written. Many
 * schedules: the harness fails any that writes after the closing response. */
static void check_app_close_in_pipeline(void)
{
    static const char raw[] = "GET /a HTTP/1.1\r\nHost: h\r\n\r\n"
                              "GET /close-after HTTP/1.1\r\nHost: h\r\n\r\n"
                              "POST /c HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc"
                              "GET /d HTTP/1.1\r\nHost: h\r\n\r\n";
    struct harness_config cfg = {.max_head = CONN_MAX_HEAD};
    struct harness_result inline_r, r;
    harness_run((const uint8_t *)raw, sizeof raw - 1, 1, &cfg, &inline_r);
    char got[128];
    describe(&inline_r, got, sizeof got);
    CHECK(strcmp(got, "200 200 close") == 0, "app close in a pipeline (inline): got '%s'", got);
    cfg.pool = true;
    unsigned ran_behind = 0;
    for (unsigned sched = 0; sched < 64; sched++) {
        cfg.capacity = 1 + sched % 8;
        cfg.max_write = sched % 3 ? 0 : 7;
        harness_run((const uint8_t *)raw, sizeof raw - 1, 1 + sched * 7919, &cfg, &r);
        describe(&r, got, sizeof got);
        CHECK(strcmp(got, "200 200 close") == 0 && r.out_hash == inline_r.out_hash,
              "app close in a pipeline (pool, schedule %u): got '%s'", sched, got);
        ran_behind += r.app_runs > 2;
    }
    /* the point of the case: requests behind the closing one did run */
    CHECK(ran_behind > 0, "app close in a pipeline: requests behind it ran (%u schedules)",
          ran_behind);
}

int main(void)
{
    check_app_close_in_pipeline();
    DIR *d = opendir(CORPUS);
    CHECK(d != NULL, "open " CORPUS " (run from the repository root)");
    if (!d) return check_summary();
    int cases = 0;
    struct dirent *ent;
    while ((ent = readdir(d)) != NULL) {
        size_t len = strlen(ent->d_name);
        if (len < 6 || strcmp(ent->d_name + len - 5, ".http") != 0) continue;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(len - 5), ent->d_name);
        check_case(name);
        cases++;
    }
    closedir(d);
    CHECK(cases >= 80, "corpus has %d cases", cases);
    return check_summary();
}
