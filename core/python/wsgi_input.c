/* wsgi_input.c — wsgi.input: a file-like view of the request body window
 * (job.h's body_pipe). When the window is empty the pool thread asks the loop
 * for more and waits without the GIL. */
#include "wsgi_internal.h"

#include <string.h>

#include "job.h"

typedef struct {
    PyObject_HEAD
    struct job *job;     /* NULL once the request is over */
    unsigned long owner; /* the thread that runs the app for this request */
    bool refilling;      /* the owner waits, without the GIL, for the loop to refill */
} Input;

/* Make bytes available in the window. Returns the bytes now readable, 0 at
 * the end of the body, or -1 with an exception: -2 (with one) when it is
 * refused to a thread other than the owner, the window left as it was. */
static Py_ssize_t input_fill(Input *in)
{
    struct job *job = in->job;
    if (!job) {
        PyErr_SetString(PyExc_ValueError, "wsgi.input used after the request ended");
        return -1;
    }
    /* While the owner waits for a refill the loop rewrites the window (its
     * bytes, data, len, pos) with no lock: the GIL does not stop the loop.
     * Another thread of the app that read it then would race the loop, and
     * take bytes out of the middle of the read the owner is making. */
    if (in->refilling) {
        PyErr_SetString(PyExc_RuntimeError,
                        "wsgi.input is being read on the thread that called the application");
        return -2;
    }
    struct body_pipe *b = &job->body;
    while (b->pos >= b->len) {
        if (b->error) {
            if (b->error == 413)
                PyErr_SetString(PyExc_OSError, "request body larger than --max-body-size");
            else if (b->error == 400)
                PyErr_SetString(PyExc_OSError, "malformed chunked request body");
            else
                PyErr_SetString(PyExc_ConnectionAbortedError, "client disconnected");
            return -1;
        }
        if (b->eof)
            return 0;
        /* Asking the loop for more is a message on the job, which only the
         * thread running the request may post (a pool thread is the one
         * producer of its handoff queue, and waits for the answer). Another
         * thread of the app would be taken for the inline loop and see the
         * body end here: say so instead of returning a short body. */
        if (PyThread_get_thread_ident() != in->owner) {
            PyErr_SetString(PyExc_RuntimeError,
                            "wsgi.input: more of the body can only be read on the thread "
                            "that called the application");
            return -2;
        }
        in->refilling = true;
        job_need_body(job); /* drops the GIL while it waits */
        in->refilling = false;
    }
    return (Py_ssize_t)(b->len - b->pos);
}

/* Read up to limit bytes (limit < 0: all), stopping after a newline if
 * line is set. */
static PyObject *input_take(Input *in, Py_ssize_t limit, bool line)
{
    PyObject *out = NULL;
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (limit >= 0 && (Py_ssize_t)len >= limit)
            break;
        Py_ssize_t avail = input_fill(in);
        if (avail < 0) {
            /* A refused read takes nothing: put back what this call took.
             * It all came from the window as it is now, since only the owner
             * refills it and the owner is never refused. (Nothing taken: no
             * store at all, the loop may be refilling the window.) */
            if (avail == -2 && len > 0)
                in->job->body.pos -= len;
            PyMem_Free(buf);
            return NULL;
        }
        if (avail == 0)
            break;
        struct body_pipe *b = &in->job->body;
        const char *src = b->data + b->pos;
        size_t n = (size_t)avail;
        if (limit >= 0 && n > (size_t)limit - len)
            n = (size_t)limit - len;
        bool got_line = false;
        if (line) {
            const char *nl = memchr(src, '\n', n);
            if (nl) {
                n = (size_t)(nl - src) + 1;
                got_line = true;
            }
        }
        if (len == 0 && (got_line || (limit >= 0 && n == (size_t)limit) || (n == (size_t)avail && b->eof))) {
            /* The common case: one copy straight from the window. */
            b->pos += n;
            return PyBytes_FromStringAndSize(src, (Py_ssize_t)n);
        }
        if (len + n > cap) {
            size_t ncap = cap ? cap * 2 : 65536;
            while (ncap < len + n)
                ncap *= 2;
            char *nb = PyMem_Realloc(buf, ncap);
            if (!nb) {
                PyMem_Free(buf);
                return PyErr_NoMemory();
            }
            buf = nb;
            cap = ncap;
        }
        memcpy(buf + len, src, n);
        len += n;
        b->pos += n;
        if (got_line)
            break;
    }
    out = PyBytes_FromStringAndSize(buf ? buf : "", (Py_ssize_t)len);
    PyMem_Free(buf);
    return out;
}

static int size_arg(PyObject *const *args, Py_ssize_t nargs, Py_ssize_t *size)
{
    *size = -1;
    if (nargs > 1) {
        PyErr_SetString(PyExc_TypeError, "expected at most one argument");
        return -1;
    }
    if (nargs == 1 && args[0] != Py_None) {
        *size = PyNumber_AsSsize_t(args[0], PyExc_OverflowError);
        if (*size == -1 && PyErr_Occurred())
            return -1;
        if (*size < 0)
            *size = -1;
    }
    return 0;
}

static PyObject *input_read_locked(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t size;
    if (size_arg(args, nargs, &size) < 0)
        return NULL;
    return input_take((Input *)self, size, false);
}

static PyObject *input_readline_locked(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t size;
    if (size_arg(args, nargs, &size) < 0)
        return NULL;
    return input_take((Input *)self, size, true);
}

static PyObject *input_readlines_locked(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t hint;
    if (size_arg(args, nargs, &hint) < 0)
        return NULL;
    PyObject *lines = PyList_New(0);
    Py_ssize_t total = 0;
    while (lines) {
        PyObject *line = input_take((Input *)self, -1, true);
        if (!line) {
            Py_CLEAR(lines);
            break;
        }
        Py_ssize_t n = PyBytes_GET_SIZE(line);
        if (n == 0) {
            Py_DECREF(line);
            break;
        }
        int rc = PyList_Append(lines, line);
        Py_DECREF(line);
        if (rc < 0)
            Py_CLEAR(lines);
        total += n;
        if (hint > 0 && total >= hint)
            break;
    }
    return lines;
}

static PyObject *input_iternext_locked(PyObject *self)
{
    PyObject *line = input_take((Input *)self, -1, true);
    if (line && PyBytes_GET_SIZE(line) == 0) {
        Py_DECREF(line);
        return NULL; /* StopIteration */
    }
    return line;
}

/* The Python-facing entry points, one thread at a time per Input. */
#define LOCKED_FASTCALL(name)                                                          \
    static PyObject *name(PyObject *self, PyObject *const *args, Py_ssize_t nargs)     \
    {                                                                                  \
        PyObject *rv;                                                                  \
        OBJ_LOCKED_BEGIN(self);                                                        \
        rv = name##_locked(self, args, nargs);                                         \
        OBJ_LOCKED_END();                                                              \
        return rv;                                                                     \
    }
LOCKED_FASTCALL(input_read)
LOCKED_FASTCALL(input_readline)
LOCKED_FASTCALL(input_readlines)

static PyObject *input_iternext(PyObject *self)
{
    PyObject *rv;
    OBJ_LOCKED_BEGIN(self);
    rv = input_iternext_locked(self);
    OBJ_LOCKED_END();
    return rv;
}

static PyMethodDef input_methods[] = {
    {"read", (PyCFunction)(void (*)(void))input_read, METH_FASTCALL, "read(size=-1) -> bytes"},
    {"readline", (PyCFunction)(void (*)(void))input_readline, METH_FASTCALL,
     "readline(size=-1) -> bytes"},
    {"readlines", (PyCFunction)(void (*)(void))input_readlines, METH_FASTCALL,
     "readlines(hint=-1) -> list of bytes"},
    {NULL, NULL, 0, NULL},
};

PyTypeObject InputType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cserve.Input",
    .tp_basicsize = sizeof(Input),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "wsgi.input: the request body",
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = input_iternext,
    .tp_methods = input_methods,
};

PyObject *input_new(struct job *job)
{
    Input *in = PyObject_New(Input, &InputType);
    if (in) {
        in->job = job;
        in->owner = PyThread_get_thread_ident();
        in->refilling = false;
    }
    return (PyObject *)in;
}

void input_detach(PyObject *input)
{
    OBJ_LOCKED_BEGIN(input); /* not while another thread of the app reads it */
    ((Input *)input)->job = NULL;
    OBJ_LOCKED_END();
}
