/* options_parse.h — the command line and the CSERVE_<NAME> environment,
 * parsed into struct options (core/base/options.h). */
#ifndef CSERVE_OPTIONS_PARSE_H
#define CSERVE_OPTIONS_PARSE_H

#include <stdio.h>

#include "../base/options.h"

/* Parse the CSERVE_<NAME> environment variables, then argv (which wins), into
 * o. On --help/--version prints and exits 0; on a bad option prints one line
 * naming the problem (and the variable it came from) and exits 2. */
void options_parse(struct options *o, int argc, char **argv);
/* A CSERVE_* variable that is no option's (a typo: CSERVE_WORKER) gets a
 * warning naming the closest option's; it is not an error, as other tools
 * may set their own CSERVE_* variables in the same environment. Call once
 * per server, after options_parse. */
void options_check_environment(void);
/* --check-config: the effective configuration, one "name: value (where it
 * came from)" a line. */
void options_print(const struct options *o, FILE *out);

#endif
