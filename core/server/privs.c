/* privs.c — drop root after binding, as gunicorn's --user/--group do.
 *
 * Order matters: setgroups and setgid while still root, setuid last, then
 * check that setuid(0) fails (a kernel or capability set that let it succeed
 * would leave the app running as root without anybody knowing). */
#include "privs.h"

#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/log.h"
#include "listen.h"
#include "../base/options.h"

static struct {
    bool set;
    uid_t uid;
    gid_t gid;
    char user[64], group[64];
    bool init_groups; /* the user's supplementary groups (a name was given) */
} target;
static char description[200];

static void die(const char *what, const char *arg, const char *why) __attribute__((noreturn));
static void die(const char *what, const char *arg, const char *why)
{
    log_error("%s %s: %s", what, arg, why);
    exit(2);
}

static bool all_digits(const char *s)
{
    return *s && strspn(s, "0123456789") == strlen(s);
}

/* A numeric id: in range, and not -1, which setuid/setgid/chown take as
 * "leave unchanged". */
static unsigned long numeric_id(const char *what, const char *s)
{
    errno = 0;
    unsigned long v = strtoul(s, NULL, 10);
    if (errno || v >= (unsigned long)(uid_t)-1)
        die(what, s, "id out of range");
    return v;
}

bool privs_resolve(const struct options *opt)
{
    if (!opt->user && !opt->group)
        return false;
    target.uid = getuid();
    target.gid = getgid();
    if (opt->user) {
        struct passwd *pw = all_digits(opt->user) ? getpwuid((uid_t)numeric_id("--user", opt->user))
                                                   : getpwnam(opt->user);
        if (!pw && !all_digits(opt->user))
            die("--user", opt->user, "no such user");
        /* A uid with no passwd entry has no primary group. Keeping the
         * current gid would serve with root's group; refuse instead, and
         * let the operator say which group. */
        if (!pw && !opt->group)
            die("--user", opt->user, "no passwd entry, so no primary group; give --group as well");
        target.uid = pw ? pw->pw_uid : (uid_t)numeric_id("--user", opt->user);
        target.gid = pw ? pw->pw_gid : target.gid;
        snprintf(target.user, sizeof target.user, "%s", pw ? pw->pw_name : opt->user);
        target.init_groups = pw != NULL;
    } else {
        struct passwd *pw = getpwuid(target.uid);
        snprintf(target.user, sizeof target.user, "%s", pw ? pw->pw_name : "?");
    }
    if (opt->group) {
        struct group *gr = all_digits(opt->group) ? getgrgid((gid_t)numeric_id("--group", opt->group))
                                                   : getgrnam(opt->group);
        if (!gr && !all_digits(opt->group))
            die("--group", opt->group, "no such group");
        target.gid = gr ? gr->gr_gid : (gid_t)numeric_id("--group", opt->group);
    }
    struct group *gr = getgrgid(target.gid);
    snprintf(target.group, sizeof target.group, "%s", gr ? gr->gr_name : "?");
    snprintf(description, sizeof description, "%s:%s (uid %u, gid %u)", target.user, target.group,
             (unsigned)target.uid, (unsigned)target.gid);
    if (geteuid() != 0 && (target.uid != geteuid() || target.gid != getegid()))
        die("--user/--group", description, "switching user needs root");
    target.set = true;
    return true;
}

void privs_drop(void)
{
    if (!target.set || geteuid() != 0)
        return;
    /* The server's own unix: socket, so it can still remove it at exit. */
    if (listen_chown(target.uid, target.gid) != 0)
        die("--user", target.user, "cannot hand the unix: socket to that user");
    int rc = target.init_groups ? initgroups(target.user, target.gid) : setgroups(0, NULL);
    if (rc != 0)
        die("--user", target.user, strerror(errno));
    if (setgid(target.gid) != 0)
        die("--group", target.group, strerror(errno));
    if (setuid(target.uid) != 0)
        die("--user", target.user, strerror(errno));
    if (target.uid != 0 && setuid(0) == 0)
        die("--user", target.user, "root could be regained after dropping it; refusing to serve");
}

const char *privs_describe(void)
{
    return description;
}
