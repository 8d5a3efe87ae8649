/* interp.h — which Python cserve runs: the installation it was built against,
 * found by that installation's own prefix (never through PATH), plus at most
 * one virtualenv of the same Python version. */
#ifndef CSERVE_INTERP_H
#define CSERVE_INTERP_H

#include <stdbool.h>

struct options;

/* Pick the virtualenv: --virtualenv DIR, else $VIRTUAL_ENV, else the one this
 * binary is installed in (pip install). A virtualenv that is missing or made
 * by another Python version ends the process here with one line and exit 2:
 * call it before anything listens. */
void interp_select(const struct options *opt);

/* Start the embedded interpreter with its build-time prefix and the selected
 * virtualenv. Exits 2 with one line if it cannot start. Returns with the GIL. */
void interp_start(void);

/* The installation's interpreter alone: its standard library, isolated
 * from the environment, no site-packages, no virtualenv. For a process
 * that needs the standard library before the options are known (the
 * config file's reader, in a child of its own). */
void interp_start_bare(void);

/* "Python 3.11.2 at /usr" or "Python 3.11.2 at /usr, virtualenv /srv/venv":
 * for --version and the start-up line. */
const char *interp_describe(void);

/* Whether the running interpreter has a GIL: true but on a free-threaded
 * build whose GIL is off (it can come back on at run time: PYTHON_GIL=1, or
 * an extension that is not declared free-threading safe). Called with the
 * GIL held (where there is one), once Python runs. */
bool interp_gil_enabled(void);

/* The Python and the virtualenv that serve, and why that virtualenv, for an
 * import error, each named once: "Python 3.11.2 at /usr, virtualenv DIR
 * (from --virtualenv)" or "Python 3.11.2 at /usr; no virtualenv: ...". */
const char *interp_venv_note(void);

/* After interp_select: the virtualenv chosen ("" for none), how it was
 * chosen ("--virtualenv", "VIRTUAL_ENV" or "the virtualenv cserve is
 * installed in"; "" for none), and the installation's prefix. */
const char *interp_venv_dir(void);
const char *interp_venv_source(void);
const char *interp_home(void);

#endif
