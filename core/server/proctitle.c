/* proctitle.c — /proc/PID/cmdline is the memory argv's strings occupy, so a
 * title is written there. The strings of argv and then environ lie end to
 * end; once both are copied to the heap, all of that span is free for the
 * title (setproctitle's way, without its library). */
#include "proctitle.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

static char *area;
static size_t area_len;
/* environ's strings, copied: environ itself is the C library's to change
 * (setenv moves it, unsetenv drops entries), so this array, never handed
 * to it, keeps every copy reachable. */
static char **volatile env_strings;
static char **volatile env_array; /* the array environ first points to (setenv may move off it) */
static char **volatile args; /* argv's copy: the options point into it for the process's life
                            * (volatile: kept, though never read here, so a leak checker sees it) */

char **proctitle_init(int argc, char **argv)
{
    char **copy = args = calloc((size_t)argc + 1, sizeof *copy);
    if (!copy)
        return argv;
    for (int i = 0; i < argc; i++)
        if (!(copy[i] = strdup(argv[i])))
            return argv;
    /* The span: argv[0] to the end of the last string that follows on,
     * through environ's when those are copied away too. */
    char *end = argv[0] + strlen(argv[0]) + 1;
    for (int i = 1; i < argc && argv[i] == end; i++)
        end = argv[i] + strlen(argv[i]) + 1;
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + 1, sizeof *env);
    for (size_t i = 0; env && i < n; i++) {
        if (!(env[i] = strdup(environ[i]))) {
            while (i--)
                free(env[i]);
            free(env);
            env = NULL;
        }
    }
    char **keep = env ? calloc(n + 1, sizeof *keep) : NULL;
    if (keep) {
        memcpy(keep, env, n * sizeof *keep);
        env_strings = keep;
    }
    if (env) {
        for (size_t i = 0; i < n && environ[i] == end; i++)
            end = environ[i] + strlen(environ[i]) + 1;
        environ = env_array = env;
    }
    area = argv[0];
    area_len = (size_t)(end - argv[0]);
    return copy;
}

void proctitle_set(const char *fmt, ...)
{
    if (!area || area_len < 2)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(area, area_len, fmt, ap);
    va_end(ap);
    size_t used = n < 0 ? 0 : (size_t)n + 1 > area_len ? area_len : (size_t)n + 1;
    memset(area + used, 0, area_len - used);
}
