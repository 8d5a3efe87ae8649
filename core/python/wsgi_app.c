/* wsgi_app.c — start the interpreter, import the app, and run one request:
 * call the app, turn what it returns into bytes, always call close(). */
#include "wsgi_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "interp.h"
#include "job.h"
#include "../base/log.h"
#include "../base/options.h"
#include "wsgi.h"

#define FLUSH_AT (256 * 1024) /* a buffered body this large is written before more is added */

static void die_import(const char *spec, const char *why) __attribute__((noreturn));
static void die_import(const char *spec, const char *why)
{
    log_error("cannot import app '%s': %s", spec, why);
    exit(2);
}

/* The pending exception as "Type: message", for one-line errors. */
static void exception_line(char *out, size_t cap)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    const char *tname = type ? ((PyTypeObject *)type)->tp_name : "error";
    PyObject *msg = value ? PyObject_Str(value) : NULL;
    const char *m = msg ? PyUnicode_AsUTF8(msg) : NULL;
    snprintf(out, cap, "%s%s%s", tname, m && *m ? ": " : "", m ? m : "");
    PyErr_Clear();
    Py_XDECREF(msg);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
}

static void prepend_sys_path(const char *dir);

/* MODULE given as a file, path/to/app.py: import it the way `python
 * path/to/app.py` would find it, as module "app" with its folder first on
 * sys.path. The folder is made absolute so that an app which changes
 * directory still finds its siblings. module is rewritten to the stem. */
static void use_app_file(const char *spec, char *module, size_t cap)
{
    char why[PATH_MAX + 128];
    char path[PATH_MAX];
    if (!realpath(module, path)) {
        snprintf(why, sizeof why, "%s: %s", module, strerror(errno));
        die_import(spec, why);
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(why, sizeof why, "%s is not a regular file", module);
        die_import(spec, why);
    }
    char *slash = strrchr(path, '/'); /* realpath's result is absolute */
    const char *base = slash + 1;
    size_t stem_len = strlen(base) - 3; /* less ".py" */
    /* The stem becomes a module name: a dot would make it a package path,
     * and anything but an identifier cannot be imported by name at all. */
    bool ok = stem_len > 0 && stem_len < cap && !(base[0] >= '0' && base[0] <= '9');
    for (size_t i = 0; ok && i < stem_len; i++) {
        unsigned char c = (unsigned char)base[i];
        ok = c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             c >= 0x80;
    }
    if (!ok) {
        snprintf(why, sizeof why, "'%s' is not a Python module name (rename the file)", base);
        die_import(spec, why);
    }
    memcpy(module, base, stem_len);
    module[stem_len] = '\0';
    if (slash == path)
        prepend_sys_path("/");
    else {
        *slash = '\0';
        prepend_sys_path(path);
    }
}

/* The app's module (or a package above it) does not exist: the traceback
 * would show only the import machinery, so the one line says it all. */
static bool app_not_found(PyObject *exc, const char *module)
{
    if (!exc || !PyErr_GivenExceptionMatches(exc, PyExc_ModuleNotFoundError))
        return false;
    PyObject *name = PyObject_GetAttrString(exc, "name");
    const char *n = name && PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
    size_t len = n ? strlen(n) : 0;
    bool ours = n && strncmp(module, n, len) == 0 && (module[len] == '\0' || module[len] == '.');
    Py_XDECREF(name);
    PyErr_Clear();
    return ours;
}

static PyObject *import_app(const char *spec)
{
    const char *colon = strrchr(spec, ':');
    char module[PATH_MAX];
    size_t mlen = (size_t)(colon - spec);
    if (mlen == 0 || mlen >= sizeof module || !colon[1])
        die_import(spec, "expected MODULE:CALLABLE or path/to/file.py:CALLABLE");
    memcpy(module, spec, mlen);
    module[mlen] = '\0';
    char why[PATH_MAX + 2048];
    if (mlen > 3 && strcmp(module + mlen - 3, ".py") == 0)
        use_app_file(spec, module, sizeof module);
    else if (strchr(module, '/'))
        die_import(spec, "a path to the app's file must end in .py (or give a MODULE on sys.path)");
    PyObject *mod = PyImport_ImportModule(module);
    if (!mod) {
        /* The whole traceback first: an error raised deep inside a
         * framework's start-up (Django's AppConfig.ready) is found by its
         * file and line, not by its message. */
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        if (value && tb)
            PyException_SetTraceback(value, tb);
        if (!app_not_found(value, module)) {
            log_error("importing app '%s' raised (its traceback follows):", spec);
            PyErr_Display(type, value, tb);
        }
        PyErr_Restore(type, value, tb);
        exception_line(why, sizeof why);
        size_t n = strlen(why);
        snprintf(why + n, sizeof why - n, " [%s]", interp_venv_note());
        die_import(spec, why);
    }
    /* CALLABLE may be a dotted path inside the module. */
    PyObject *obj = mod;
    char attr[512];
    snprintf(attr, sizeof attr, "%s", colon + 1);
    for (char *part = strtok(attr, "."); part; part = strtok(NULL, ".")) {
        PyObject *next = PyObject_GetAttrString(obj, part);
        Py_DECREF(obj);
        if (!next) {
            PyErr_Clear();
            snprintf(why, sizeof why, "module '%.200s' has no attribute '%.200s'", module, colon + 1);
            die_import(spec, why);
        }
        obj = next;
    }
    if (!PyCallable_Check(obj)) {
        snprintf(why, sizeof why, "'%s' is a %s, not a callable", colon + 1, Py_TYPE(obj)->tp_name);
        die_import(spec, why);
    }
    return obj;
}

static void prepend_sys_path(const char *dir)
{
    PyObject *path = PySys_GetObject("path"); /* borrowed */
    PyObject *d = PyUnicode_DecodeFSDefault(dir);
    if (path && d)
        PyList_Insert(path, 0, d);
    Py_XDECREF(d);
}

void wsgi_init(const struct options *opt, const struct forwarded_policy *forwarded, const char *default_app_dir)
{
    bridge.opt = opt;
    bridge.forwarded = forwarded;
    interp_start(); /* interp.c: the build's prefix, the selected virtualenv */
    const char *spec = opt->app_spec;
    if (spec) {
        char cwd[4096];
        prepend_sys_path(getcwd(cwd, sizeof cwd) ? cwd : ".");
    } else {
        prepend_sys_path(default_app_dir);
        spec = "hello:application";
    }
    bridge.app = import_app(spec);

    bridge.errors = PySys_GetObject("stderr");
    Py_XINCREF(bridge.errors);
    if (PyType_Ready(&InputType) < 0 || PyType_Ready(&ResponderType) < 0 ||
        PyType_Ready(&FileWrapperType) < 0 || environ_init() < 0) {
        PyErr_Print();
        log_error("cannot prepare the WSGI bridge");
        exit(2);
    }
    bridge.s_close = PyUnicode_InternFromString("close");
    bridge.s_fileno = PyUnicode_InternFromString("fileno");
    bridge.s_tell = PyUnicode_InternFromString("tell");
    if (!bridge.s_close || !bridge.s_fileno || !bridge.s_tell) {
        PyErr_Print();
        log_error("cannot prepare the WSGI bridge");
        exit(2);
    }
}

void wsgi_thread_cleanup(void)
{
    environ_thread_cleanup();
}

static const char SOURCE_DIRS_PY[] =
    "def _cserve_source_dirs():\n"
    "    import os, sys, sysconfig\n"
    "    paths = sysconfig.get_paths()\n"
    "    skip = {os.path.realpath(paths[k]) for k in ('stdlib', 'platstdlib', 'purelib', 'platlib') if k in paths}\n"
    "    dirs = set()\n"
    "    for m in list(sys.modules.values()):\n"
    "        f = getattr(m, '__file__', None)\n"
    "        if isinstance(f, str) and f.endswith('.py'):\n"
    "            d = os.path.dirname(os.path.realpath(f))\n"
    "            if not any(d == s or d.startswith(s + os.sep) for s in skip) and 'site-packages' not in d:\n"
    "                dirs.add(d)\n"
    "    return sorted(dirs)\n";

char **wsgi_source_dirs(void)
{
    PyObject *globals = PyDict_New();
    PyObject *builtins = PyEval_GetBuiltins(); /* borrowed */
    if (!globals || PyDict_SetItemString(globals, "__builtins__", builtins) < 0) {
        Py_XDECREF(globals);
        return NULL;
    }
    PyObject *r = PyRun_String(SOURCE_DIRS_PY, Py_file_input, globals, globals);
    PyObject *fn = r ? PyDict_GetItemString(globals, "_cserve_source_dirs") : NULL; /* borrowed */
    PyObject *list = fn ? PyObject_CallNoArgs(fn) : NULL;
    char **out = NULL;
    if (list && PyList_Check(list)) {
        Py_ssize_t n = PyList_GET_SIZE(list);
        out = calloc((size_t)n + 1, sizeof *out);
        for (Py_ssize_t i = 0; out && i < n; i++) {
            const char *d = PyUnicode_AsUTF8(PyList_GET_ITEM(list, i));
            out[i] = d ? strdup(d) : NULL;
        }
    }
    if (!out)
        PyErr_Print();
    Py_XDECREF(list);
    Py_XDECREF(r);
    Py_DECREF(globals);
    return out;
}

int wsgi_watchdog_arm(int signo)
{
    PyObject *fh = PyImport_ImportModule("faulthandler");
    PyObject *sys_stderr = PySys_GetObject("stderr"); /* borrowed */
    PyObject *reg = fh ? PyObject_GetAttrString(fh, "register") : NULL;
    PyObject *args = reg ? Py_BuildValue("(i)", signo) : NULL;
    PyObject *kw = args ? Py_BuildValue("{s:O,s:O,s:O}", "file", sys_stderr ? sys_stderr : Py_None,
                                        "all_threads", Py_True, "chain", Py_False)
                        : NULL;
    PyObject *r = kw ? PyObject_Call(reg, args, kw) : NULL;
    int rc = r ? 0 : -1;
    if (!r)
        PyErr_Print();
    Py_XDECREF(r);
    Py_XDECREF(kw);
    Py_XDECREF(args);
    Py_XDECREF(reg);
    Py_XDECREF(fh);
    return rc;
}

void wsgi_finalize(void)
{
    wsgi_thread_cleanup(); /* the calling thread's, for --inline */
    Py_CLEAR(bridge.app);
    Py_CLEAR(bridge.errors);
    Py_CLEAR(bridge.s_close);
    Py_CLEAR(bridge.s_fileno);
    Py_CLEAR(bridge.s_tell);
    environ_fini();
    Py_FinalizeEx();
}

/* Log the pending exception with its traceback on stderr (not sys.last_*:
 * that would keep the failed request's frames alive). */
static void log_app_exception(struct job *job, const char *what)
{
    log_error("%s (%.*s %.*s)", what, (int)job->req.method_len, job->req.method,
              (int)job->req.target_len, job->req.target);
    PyErr_PrintEx(0);
}

/* Nothing was sent: replace whatever was buffered with a plain error. */
static void respond_error(Responder *r, int status)
{
    struct job *job = r->job;
    const char *line = status == 413 ? "413 Content Too Large"
                     : status == 400 ? "400 Bad Request"
                     : "500 Internal Server Error";
    const char *text = line + 4;
    job->out[job->fill_buf].len = 0;
    Py_CLEAR(r->status);
    Py_CLEAR(r->headers);
    r->status = PyUnicode_FromString(line);
    r->headers = Py_BuildValue("[(ss)]", "Content-Type", "text/plain; charset=utf-8");
    r->content_length = -1;
    r->chunked = false;
    r->body_sent = 0;
    job->close_after = true;
    r->code = status;
    if (!r->status || !r->headers || responder_send_head(r, (int64_t)strlen(text)) < 0 ||
        responder_body(r, text, strlen(text)) < 0) {
        PyErr_Clear();
        job->incomplete = JOB_CUT; /* cannot even say 500: just close */
    }
}

/* A regular file behind a wsgi.file_wrapper goes out with sendfile from
 * the loop. Returns 1 if handled, 0 to iterate it instead, -1 on error. */
static int try_sendfile(Responder *r, FileWrapper *fw)
{
    struct job *job = r->job;
    PyObject *fno = PyObject_CallMethodNoArgs(fw->filelike, bridge.s_fileno);
    if (!fno) {
        PyErr_Clear();
        return 0;
    }
    long fd = PyLong_AsLong(fno);
    Py_DECREF(fno);
    struct stat stt;
    /* A fileno() past INT_MAX is no descriptor of ours: cast, it would name
     * another (1, say: the log) and the loop would send that file. */
    if (fd < 0 || fd > INT_MAX || PyErr_Occurred() || fstat((int)fd, &stt) != 0 ||
        !S_ISREG(stt.st_mode)) {
        PyErr_Clear();
        return 0;
    }
    off_t off = lseek((int)fd, 0, SEEK_CUR);
    PyObject *pos = PyObject_CallMethodNoArgs(fw->filelike, bridge.s_tell);
    if (pos) {
        off = (off_t)PyLong_AsLongLong(pos);
        Py_DECREF(pos);
    }
    if (PyErr_Occurred() || off < 0) {
        PyErr_Clear();
        return 0;
    }
    uint64_t len = stt.st_size > off ? (uint64_t)(stt.st_size - off) : 0;
    /* What write() already sent counts against the app's Content-Length:
     * only the rest may follow, or the surplus would start the next response
     * on this connection. A file longer than that is cut without closing:
     * serving part of a file (a range, say) is what such a wrapper is for,
     * and the framing stays exact. */
    if (r->content_length >= 0) {
        uint64_t cl = (uint64_t)r->content_length;
        uint64_t left = r->body_sent < cl ? cl - r->body_sent : 0;
        if (len > left)
            len = left;
    }
    if (responder_check_body(r, len) < 0 || responder_send_head(r, (int64_t)len) < 0)
        return -1;
    if (r->no_body || len == 0)
        return 1;
    int dupfd = fcntl((int)fd, F_DUPFD_CLOEXEC, 0);
    if (dupfd < 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    if (r->chunked) { /* a 1.1 response without Content-Length cannot happen here */
        close(dupfd);
        return 0;
    }
    job->file_fd = dupfd;
    job->file_off = off;
    job->file_len = len;
    r->body_sent += len; /* after what write() sent: responder_end judges the sum */
    return 1;
}

/* A tuple of bytes: head with its total length, then the items. */
static int send_sequence(Responder *r, PyObject *seq)
{
    struct job *job = r->job;
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    int64_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyTuple_GET_ITEM(seq, i);
        if (!PyBytes_Check(item)) {
            PyErr_Format(PyExc_TypeError, "the app's body item %zd is %s, not bytes", i,
                         Py_TYPE(item)->tp_name);
            return -1;
        }
        total += PyBytes_GET_SIZE(item);
    }
    if (responder_send_head(r, total) < 0)
        return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyTuple_GET_ITEM(seq, i);
        if (responder_body(r, PyBytes_AS_STRING(item), (size_t)PyBytes_GET_SIZE(item)) < 0)
            return -1;
        if (job->out[job->fill_buf].len >= FLUSH_AT && !job_lost(job))
            job_flush(job);
    }
    return 0;
}

/* Feed the app's iterable to the responder. 0, or -1 with an exception. */
static int consume(Responder *r, PyObject *result)
{
    struct job *job = r->job;
    if (PyList_CheckExact(result) || PyTuple_CheckExact(result)) {
        /* The whole body exists already: buffer it and send it with a
         * Content-Length, flushing only to bound the buffer. job_flush may
         * drop the GIL, and another thread of the app may then change a
         * list: its item array can move and its items be freed. So work on
         * a tuple we hold: the result itself if it is one (immutable), else
         * a snapshot of the list now, which is also exactly the body the
         * Content-Length counts. */
        PyObject *seq = PyList_CheckExact(result) ? PyList_AsTuple(result) : Py_NewRef(result);
        if (!seq)
            return -1;
        int rc = send_sequence(r, seq);
        Py_DECREF(seq);
        return rc;
    }
    if (Py_IS_TYPE(result, &FileWrapperType)) {
        int handled = try_sendfile(r, (FileWrapper *)result);
        if (handled != 0)
            return handled < 0 ? -1 : 0;
    }
    PyObject *it = PyObject_GetIter(result);
    if (!it)
        return -1;
    PyObject *item;
    while (!job_lost(job) && (item = PyIter_Next(it)) != NULL) {
        if (!PyBytes_Check(item)) {
            PyErr_Format(PyExc_TypeError, "the app yielded %s, not bytes", Py_TYPE(item)->tp_name);
            Py_DECREF(item);
            Py_DECREF(it);
            return -1;
        }
        Py_ssize_t len = PyBytes_GET_SIZE(item);
        int rc = len ? responder_body(r, PyBytes_AS_STRING(item), (size_t)len) : 0;
        Py_DECREF(item);
        if (rc < 0) {
            Py_DECREF(it);
            return -1;
        }
        /* PEP 3333: a yielded block is not held back while the app makes
         * the next one. Once the body has all the bytes its Content-Length
         * promised, nothing more can follow it: it goes out with the final
         * message instead (frameworks set Content-Length and return a
         * one-block iterable; flushing that would cost a round trip). */
        bool complete = r->content_length >= 0 && r->body_sent >= (uint64_t)r->content_length;
        if (len && !complete && r->headers_sent && job_streams() && !job_lost(job))
            job_flush(job);
    }
    Py_DECREF(it);
    return PyErr_Occurred() ? -1 : 0;
}

static int call_close(PyObject *result)
{
    if (!PyObject_HasAttr(result, bridge.s_close))
        return 0;
    PyObject *rv = PyObject_CallMethodNoArgs(result, bridge.s_close);
    if (!rv)
        return -1;
    Py_DECREF(rv);
    return 0;
}

void wsgi_handle(struct job *job)
{
    job->fill_buf = 0;
    job->out[0].len = 0;
    PyObject *input = input_new(job);
    Responder *r = responder_new(job);
    PyObject *environ = input && r ? environ_build(job, input) : NULL;
    PyObject *result = NULL;
    if (environ) {
        PyObject *args[2] = {environ, (PyObject *)r};
        result = PyObject_Vectorcall(bridge.app, args, 2, NULL);
    }
    /* From here the pool thread works the response: one thread at a time on
     * the Responder, as the app's calls are (wsgi_internal.h). r may be NULL
     * only when there is no result either. */
    OBJ_LOCKED_BEGIN(r ? (PyObject *)r : Py_None);
    int failed = result ? consume(r, result) : -1;
    if (failed && job_lost(job))
        PyErr_Clear(); /* the client left: nothing to report */
    else if (failed)
        log_app_exception(job, r && r->headers_sent ? "app failed after the response began"
                                                    : "app failed");
    if (result && call_close(result) < 0) {
        log_app_exception(job, "the response's close() failed");
        failed = -1;
    }
    Py_XDECREF(result);
    if (!r) {
        job->incomplete = JOB_CUT;
        job->close_after = true;
        PyErr_Clear();
    } else if (failed && !r->headers_sent && !job_lost(job)) {
        respond_error(r, job->body.error > 0 ? job->body.error : 500);
    } else if (failed) {
        job->incomplete = JOB_CUT; /* never a body that looks complete */
        job->close_after = true;
    } else if (responder_send_head(r, (int64_t)r->body_sent) < 0 || responder_end(r) < 0) {
        log_app_exception(job, "bad response");
        if (!r->headers_sent)
            respond_error(r, 500);
        else
            job->incomplete = JOB_CUT;
    }
    if (r) {
        job->status = r->code;
        job->body_bytes = r->body_sent;
        r->job = NULL;
    }
    OBJ_LOCKED_END();
    if (r) {
        /* write() holds the responder: break the cycle, or neither is freed. */
        Py_CLEAR(r->write);
        Py_DECREF(r);
    }
    PyErr_Clear();
    if (input) {
        input_detach(input);
        Py_DECREF(input);
    }
    Py_XDECREF(environ);
    job_done(job);
}
