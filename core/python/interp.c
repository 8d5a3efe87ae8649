/* interp.c — start the Python cserve was built against, the way its own
 * `python` would start.
 *
 * An embedded CPython left to itself computes sys.prefix from the first
 * `python3` on PATH: with a pyenv or venv python3 first there, cserve would
 * load another installation's standard library into its libpython. So the
 * Makefile passes the build interpreter's prefix (CSERVE_PYTHON_HOME) and its
 * executable, and they become PyConfig.home and PyConfig.executable.
 *
 * A virtualenv is selected the way its python sees itself: sys.executable is
 * set to VENV/bin/python, and site.py then finds VENV/pyvenv.cfg next to it,
 * sets sys.prefix to VENV and adds its site-packages (and the system ones
 * only if include-system-site-packages is true). A venv of another Python
 * version would add site-packages of the wrong version (or none): refused. */
#include <Python.h>

#include "interp.h"

#include <errno.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdbool.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/log.h"
#include "../base/options.h"

#ifndef CSERVE_PYTHON_HOME /* built without the Makefile: let CPython search */
#define CSERVE_PYTHON_HOME ""
#define CSERVE_PYTHON_EXE ""
#endif
/* The installation's standard library and the name of its lib/ directory
 * as the interpreter's sysconfig gave them to the Makefile: a free-threaded
 * build's carry its ABI flag (lib/python3.13t), so they are not composed
 * from the version alone. */
#ifndef CSERVE_PYTHON_STDLIB
#define CSERVE_PYTHON_STDLIB ""
#endif
#ifndef CSERVE_PYTHON_LIBNAME
#define CSERVE_PYTHON_LIBNAME ""
#endif

static char venv_dir[PATH_MAX];  /* "" = no virtualenv */
static const char *venv_source;  /* how it was chosen, for the start-up line */
static char description[PATH_MAX + 128];

static void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_vmsg(LOG_ERROR, fmt, ap);
    va_end(ap);
    exit(2);
}

/* "3.11.2" from Py_GetVersion(): the libpython actually loaded (callable
 * before the interpreter starts). */
static void runtime_version(char *out, size_t cap)
{
    snprintf(out, cap, "%s", Py_GetVersion());
    out[strcspn(out, " ")] = '\0';
}

struct pyvenv_cfg {
    char home[PATH_MAX];
    char version[64];
};

static void trim(char *s)
{
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t'))
        s[--n] = '\0';
    size_t lead = strspn(s, " \t");
    memmove(s, s + lead, strlen(s + lead) + 1);
}

/* Reads the keys site.py and venv write: home, and version (venv) or
 * version_info (the virtualenv package). Returns -1 if there is no file. */
static int read_pyvenv_cfg(const char *dir, struct pyvenv_cfg *cfg)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/pyvenv.cfg", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    memset(cfg, 0, sizeof *cfg);
    char line[PATH_MAX + 64];
    while (fgets(line, sizeof line, f)) {
        char *eq = strchr(line, '=');
        if (!eq)
            continue;
        *eq = '\0';
        char *key = line, *value = eq + 1;
        trim(key);
        trim(value);
        if (strcmp(key, "home") == 0)
            snprintf(cfg->home, sizeof cfg->home, "%s", value);
        else if (strcmp(key, "version") == 0 || (strcmp(key, "version_info") == 0 && !cfg->version[0]))
            snprintf(cfg->version, sizeof cfg->version, "%s", value);
    }
    fclose(f);
    return 0;
}

/* The virtualenv this binary sits in (VENV/bin/cserve), if any. */
static bool own_venv(char *out, size_t cap)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return false;
    exe[n] = '\0';
    char *root = dirname(dirname(exe));
    char probe[PATH_MAX + 16];
    snprintf(probe, sizeof probe, "%s/pyvenv.cfg", root);
    if (access(probe, R_OK) != 0)
        return false;
    snprintf(out, cap, "%s", root);
    return true;
}

void interp_select(const struct options *opt)
{
    const char *dir = NULL;
    if (opt->virtualenv) {
        dir = opt->virtualenv;
        venv_source = "--virtualenv";
    } else if (getenv("VIRTUAL_ENV") && *getenv("VIRTUAL_ENV")) {
        dir = getenv("VIRTUAL_ENV");
        venv_source = "VIRTUAL_ENV";
    }
    char own[PATH_MAX];
    if (!dir && own_venv(own, sizeof own)) {
        dir = own;
        venv_source = "the virtualenv cserve is installed in";
    }
    if (!dir)
        return;
    if (!realpath(dir, venv_dir))
        die("virtualenv %s (from %s): %s", dir, venv_source, strerror(errno));
    struct pyvenv_cfg cfg;
    if (read_pyvenv_cfg(venv_dir, &cfg) != 0)
        die("virtualenv %s (from %s) has no pyvenv.cfg: not a virtualenv", venv_dir, venv_source);

    char mine[64];
    runtime_version(mine, sizeof mine);
    char want[16];
    snprintf(want, sizeof want, "%d.%d", PY_MAJOR_VERSION, PY_MINOR_VERSION);
    /* Same major.minor: "3.11" then the end or a '.', not "3.1" of "3.12". */
    size_t wl = strlen(want);
    bool same = strncmp(cfg.version, want, wl) == 0 && (cfg.version[wl] == '\0' || cfg.version[wl] == '.');
    /* A venv's site-packages lives in VENV/lib/python3.X, or python3.Xt for a
     * free-threaded Python, which finds only its own. */
    char sp[PATH_MAX + 32];
    if (CSERVE_PYTHON_LIBNAME[0])
        snprintf(sp, sizeof sp, "%s/lib/%s", venv_dir, CSERVE_PYTHON_LIBNAME);
    else
        snprintf(sp, sizeof sp, "%s/lib/python%s", venv_dir, want);
    if (!cfg.version[0]) { /* no version key: its site-packages directory tells */
        same = access(sp, F_OK) == 0;
        snprintf(cfg.version, sizeof cfg.version, "%s", same ? want : "another version");
    }
    if (!same) {
        char other[16] = "";
        sscanf(cfg.version, "%15[0-9].%*[0-9]", other);
        int minor = 0;
        sscanf(cfg.version, "%*d.%d", &minor);
        die("virtualenv %s is Python %s but this cserve embeds Python %s (%s); use a Python %s "
            "virtualenv, or build cserve for %s.%d: make PYTHON=%s%spython%s.%d (or pip install "
            "this checkout into that virtualenv)",
            venv_dir, cfg.version, mine, CSERVE_PYTHON_HOME, want, other, minor,
            cfg.home, cfg.home[0] ? "/" : "", other, minor);
    }
#ifdef Py_GIL_DISABLED
    /* Same version, other build: a venv of the GIL build of 3.13 has no
     * lib/python3.13t, and its packages would silently not be found. */
    if (access(sp, F_OK) != 0)
        die("virtualenv %s is not of a free-threaded Python (no %s), and this cserve embeds "
            "free-threaded Python %s (%s); make it with %s -m venv",
            venv_dir, sp, mine, CSERVE_PYTHON_HOME, CSERVE_PYTHON_EXE);
#endif
}

static void set_string(PyConfig *config, wchar_t **field, const char *value)
{
    PyStatus st = PyConfig_SetBytesString(config, field, value);
    if (PyStatus_Exception(st))
        die("cannot start Python: %s", st.err_msg ? st.err_msg : "?");
}

void interp_start(void)
{
    /* After --user, the installation may not be readable (a pyenv under
     * /root): say so instead of CPython's "failed to get the codec". */
    char stdlib[PATH_MAX];
    if (CSERVE_PYTHON_STDLIB[0])
        snprintf(stdlib, sizeof stdlib, "%s", CSERVE_PYTHON_STDLIB);
    else
        snprintf(stdlib, sizeof stdlib, "%s/lib/python%d.%d", CSERVE_PYTHON_HOME, PY_MAJOR_VERSION,
                 PY_MINOR_VERSION);
    if (CSERVE_PYTHON_HOME[0] && access(stdlib, R_OK | X_OK) != 0)
        die("cannot read the Python installation at %s as uid %u: %s (with --user, use a Python that user "
            "can read)", stdlib, (unsigned)geteuid(), strerror(errno));
    PyConfig config;
    PyConfig_InitPythonConfig(&config);
    config.install_signal_handlers = 0; /* the loop owns signals (signals.h) */
    config.parse_argv = 0;
    if (CSERVE_PYTHON_HOME[0])
        set_string(&config, &config.home, CSERVE_PYTHON_HOME);
    char exe[PATH_MAX + 16];
    if (venv_dir[0])
        snprintf(exe, sizeof exe, "%s/bin/python", venv_dir);
    else
        snprintf(exe, sizeof exe, "%s", CSERVE_PYTHON_EXE);
    if (exe[0]) {
        set_string(&config, &config.program_name, exe);
        set_string(&config, &config.executable, exe);
    }
    PyStatus st = Py_InitializeFromConfig(&config);
    PyConfig_Clear(&config);
    if (PyStatus_Exception(st))
        die("cannot start Python: %s", st.err_msg ? st.err_msg : "?");
}

void interp_start_bare(void)
{
    PyConfig config;
    PyConfig_InitIsolatedConfig(&config);
    config.install_signal_handlers = 0;
    config.site_import = 0; /* no site-packages, no .pth file's code */
    if (CSERVE_PYTHON_HOME[0])
        set_string(&config, &config.home, CSERVE_PYTHON_HOME);
    if (CSERVE_PYTHON_EXE[0]) {
        set_string(&config, &config.program_name, CSERVE_PYTHON_EXE);
        set_string(&config, &config.executable, CSERVE_PYTHON_EXE);
    }
    PyStatus st = Py_InitializeFromConfig(&config);
    PyConfig_Clear(&config);
    if (PyStatus_Exception(st))
        die("cannot start Python: %s", st.err_msg ? st.err_msg : "?");
}

const char *interp_venv_note(void)
{
    static char note[2 * PATH_MAX + 300];
    if (venv_dir[0]) /* interp_describe() ends with ", virtualenv DIR" */
        snprintf(note, sizeof note, "%s (from %s)", interp_describe(), venv_source);
    else
        snprintf(note, sizeof note, "%s; no virtualenv: the packages of the Python at %s (give --virtualenv DIR, "
                                    "or set VIRTUAL_ENV)",
                 interp_describe(), CSERVE_PYTHON_HOME[0] ? CSERVE_PYTHON_HOME : "(searched)");
    return note;
}

const char *interp_venv_dir(void)
{
    return venv_dir;
}

const char *interp_venv_source(void)
{
    return venv_dir[0] && venv_source ? venv_source : "";
}

const char *interp_home(void)
{
    return CSERVE_PYTHON_HOME[0] ? CSERVE_PYTHON_HOME : "(searched)";
}

/* " free-threaded" for a build without the GIL (PEP 703), else "". */
static const char *free_threaded(void)
{
#ifdef Py_GIL_DISABLED
    return " free-threaded";
#else
    return "";
#endif
}

bool interp_gil_enabled(void)
{
#ifdef Py_GIL_DISABLED
    PyObject *r = PySys_GetObject("_is_gil_enabled"); /* borrowed */
    PyObject *v = r ? PyObject_CallNoArgs(r) : NULL;
    int enabled = v ? PyObject_IsTrue(v) : 1; /* unknown: as if it had one, the cautious rule */
    Py_XDECREF(v);
    PyErr_Clear();
    return enabled != 0;
#else
    return true;
#endif
}

/* Whether the GIL is off, for a free-threaded build: the environment
 * (PYTHON_GIL=1) or an extension module not declared free-threading safe
 * can turn it back on at run time, so once Python runs it is asked
 * (sys._is_gil_enabled). Before (--version) it can only say what start-up
 * will do. */
static const char *gil_state(void)
{
#ifdef Py_GIL_DISABLED
    int enabled = -1;
    if (Py_IsInitialized()) {
        PyGILState_STATE g = PyGILState_Ensure();
        PyObject *r = PySys_GetObject("_is_gil_enabled"); /* borrowed */
        PyObject *v = r ? PyObject_CallNoArgs(r) : NULL;
        if (v)
            enabled = PyObject_IsTrue(v);
        Py_XDECREF(v);
        PyErr_Clear();
        PyGILState_Release(g);
    } else {
        const char *env = getenv("PYTHON_GIL");
        enabled = env && strcmp(env, "1") == 0;
    }
    return enabled < 0 ? ", GIL state unknown" : enabled ? ", GIL enabled" : ", GIL disabled";
#else
    return "";
#endif
}

const char *interp_describe(void)
{
    char v[64];
    runtime_version(v, sizeof v);
    int n = snprintf(description, sizeof description, "Python %s%s at %s", v, free_threaded(),
                     CSERVE_PYTHON_HOME[0] ? CSERVE_PYTHON_HOME : "(searched)");
    if (n > 0 && (size_t)n < sizeof description)
        n += snprintf(description + n, sizeof description - (size_t)n, "%s", gil_state());
    if (venv_dir[0] && n > 0 && (size_t)n < sizeof description)
        snprintf(description + n, sizeof description - (size_t)n, ", virtualenv %s", venv_dir);
    return description;
}
