/* privs.h — --user/--group: bind as root, then serve as someone else. */
#ifndef CSERVE_PRIVS_H
#define CSERVE_PRIVS_H

#include <stdbool.h>

struct options;

/* Look up --user/--group. An unknown name, or a switch that needs root
 * without root, ends the process with one line and exit 2: call it before
 * binding. Returns whether there is anything to drop to. */
bool privs_resolve(const struct options *opt);

/* Become that user and group (supplementary groups: the user's). Exits 2
 * with one line if the kernel refuses; afterwards root cannot be regained. */
void privs_drop(void);

/* "nobody:nogroup", for the start-up line. */
const char *privs_describe(void);

#endif
