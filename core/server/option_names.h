/* option_names.h — the long options' names matched whole, and the nearest
 * name to one that matches none, for "did you mean". */
#ifndef CSERVE_OPTION_NAMES_H
#define CSERVE_OPTION_NAMES_H

#include <getopt.h>
#include <stddef.h>

/* The entry of table (ended by a NULL name) named exactly name[0..len). */
const struct option *option_named(const struct option *table, const char *name, size_t len);

/* The option a mistyped name most likely meant: the shortest one it is the
 * start of (--blocking-thread), else the nearest within a third of its
 * length and at least two edits (--worker, --acess-log). NULL when none is
 * that near. */
const struct option *option_closest(const struct option *table, const char *typed);

#endif
