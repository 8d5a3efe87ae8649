/* wsgi_response.c — start_response, write(), and framing the app's body.
 *
 * The Responder is the start_response callable itself (tp_call), so a
 * request allocates one object for it, not a bound method. The head is
 * formatted straight into the job's output buffer on the pool thread; the
 * loop only ever sees bytes. */
#include "wsgi_internal.h"

#include <stdio.h>
#include <string.h>

#include "../http/http_chars.h"
#include "job.h"
#include "../base/options.h"
#include "../base/log.h"
#include "../http/response_head.h"

const char *latin1_view(PyObject *s, Py_ssize_t *len, const char *what)
{
    if (!PyUnicode_Check(s)) {
        PyErr_Format(PyExc_TypeError, "%s must be str, not %s", what, Py_TYPE(s)->tp_name);
        return NULL;
    }
    if (PyUnicode_KIND(s) != PyUnicode_1BYTE_KIND) { /* CPython stores the narrowest kind */
        PyErr_Format(PyExc_ValueError, "%s %R is not latin-1", what, s);
        return NULL;
    }
    *len = PyUnicode_GET_LENGTH(s);
    return (const char *)PyUnicode_1BYTE_DATA(s);
}

/* (static, so that strlen of each literal folds and the length is compared
 * first: most names differ in length) */
static bool name_is(const char *p, Py_ssize_t n, const char *lower)
{
    size_t ln = strlen(lower);
    if ((size_t)n != ln)
        return false;
    for (size_t i = 0; i < ln; i++) {
        char ch = p[i];
        if (ch >= 'A' && ch <= 'Z')
            ch = (char)(ch + 32);
        if (ch != lower[i])
            return false;
    }
    return true;
}

/* Hop-by-hop fields are the server's to send (PEP 3333, RFC 9110 §7.6.1). */
static bool hop_by_hop(const char *p, Py_ssize_t n)
{
    static const char *const names[] = {"connection", "keep-alive", "transfer-encoding", "upgrade",
                                        "te", "trailer", "proxy-connection", NULL};
    for (const char *const *nm = names; *nm; nm++)
        if (name_is(p, n, *nm))
            return true;
    return false;
}

/* The elements of a comma-separated field value (RFC 9110 §5.6.1), each
 * trimmed of OWS; empty ones are skipped. Returns the next element's start
 * and length in *len, or NULL at the end; *pos is the cursor. */
static const char *list_next(const char *v, Py_ssize_t vl, Py_ssize_t *pos, Py_ssize_t *len)
{
    while (*pos < vl) {
        Py_ssize_t i = *pos, end = i;
        while (end < vl && v[end] != ',')
            end++;
        *pos = end + 1;
        while (i < end && (v[i] == ' ' || v[i] == '\t'))
            i++;
        Py_ssize_t e = end;
        while (e > i && (v[e - 1] == ' ' || v[e - 1] == '\t'))
            e--;
        if (e > i) {
            *len = e - i;
            return v + i;
        }
    }
    return NULL;
}

/* Check status and headers as start_response receives them, so that a bad
 * one raises inside the app (PEP 3333) rather than after it returned. */
static int check_status(PyObject *status, int *code)
{
    Py_ssize_t n;
    const char *s = latin1_view(status, &n, "status");
    if (!s)
        return -1;
    if (n < 4 || s[3] != ' ' || s[0] < '1' || s[0] > '5' || s[1] < '0' || s[1] > '9' ||
        s[2] < '0' || s[2] > '9') {
        PyErr_Format(PyExc_ValueError, "status %R is not 'NNN reason'", status);
        return -1;
    }
    for (Py_ssize_t i = 4; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if ((ch < 0x20 && ch != '\t') || ch == 0x7f) {
            PyErr_Format(PyExc_ValueError, "status %R has a control character", status);
            return -1;
        }
    }
    *code = (s[0] - '0') * 100 + (s[1] - '0') * 10 + (s[2] - '0');
    /* Only a final status: a 1xx sent as the response leaves the client
     * waiting for the final one, which it then takes from the response to
     * its next request. */
    if (*code < 200) {
        PyErr_Format(PyExc_ValueError,
                     "status %R is informational: start_response takes the final status",
                     status);
        return -1;
    }
    return 0;
}

/* The fields that frame the response, which the server writes itself, are
 * checked here; a field that would make the framing ambiguous is the app's
 * error (a 500 if nothing was sent yet), never passed on for a proxy and the
 * client to read differently.
 *
 * Two are common from real apps and frameworks, and are honoured the way
 * gunicorn honours them, since both only ask for what the server can do
 * safely itself: "Connection: close" (with or without "keep-alive", which
 * says nothing) closes the connection after the response, and
 * "Transfer-Encoding: chunked" from an app that streams leaves the framing
 * to the server (chunked when the length is unknown, a Content-Length when
 * it is). Neither field is copied: the server writes the one that matches
 * what it does. Any other Connection option names a hop-by-hop field the
 * server does not implement, and any other coding is one the server would
 * have to apply: both are refused, as are the other hop-by-hop fields. */
static int check_headers(Responder *r, PyObject *headers, int code)
{
    if (!PyList_Check(headers)) {
        PyErr_Format(PyExc_TypeError, "response_headers must be a list, not %s",
                     Py_TYPE(headers)->tp_name);
        return -1;
    }
    int64_t content_length = -1;
    bool app_close = false, app_chunked = false;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(headers); i++) {
        PyObject *item = PyList_GET_ITEM(headers, i);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
            PyErr_Format(PyExc_TypeError, "response header %zd must be a (name, value) tuple", i);
            return -1;
        }
        PyObject *oname = PyTuple_GET_ITEM(item, 0), *ovalue = PyTuple_GET_ITEM(item, 1);
        Py_ssize_t nl, vl;
        const char *name = latin1_view(oname, &nl, "header name");
        const char *value = name ? latin1_view(ovalue, &vl, "header value") : NULL;
        if (!value)
            return -1;
        if (nl == 0) {
            PyErr_SetString(PyExc_ValueError, "empty header name");
            return -1;
        }
        for (Py_ssize_t j = 0; j < nl; j++)
            if (!http_tchar[(unsigned char)name[j]]) {
                PyErr_Format(PyExc_ValueError, "header name %R is not a token", oname);
                return -1;
            }
        for (Py_ssize_t j = 0; j < vl; j++)
            if (!http_field_vchar[(unsigned char)value[j]]) { /* a CTL other than HTAB, or DEL */
                PyErr_Format(PyExc_ValueError, "header %R has a control character in its value",
                             oname);
                return -1;
            }
        if (name_is(name, nl, "content-length")) {
            /* One only: with two, the server would frame by one and a
             * proxy might by the other (RFC 9112 §6.3). */
            if (content_length >= 0) {
                PyErr_SetString(PyExc_ValueError, "two Content-Length headers");
                return -1;
            }
            int64_t v = 0;
            if (vl == 0 || vl > 18)
                v = -1;
            for (Py_ssize_t j = 0; j < vl && v >= 0; j++)
                v = (value[j] >= '0' && value[j] <= '9') ? v * 10 + (value[j] - '0') : -1;
            if (v < 0) {
                PyErr_Format(PyExc_ValueError, "Content-Length %R is not a number", ovalue);
                return -1;
            }
            content_length = v;
        } else if (name_is(name, nl, "connection")) {
            Py_ssize_t pos = 0, tl;
            for (const char *t; (t = list_next(value, vl, &pos, &tl)) != NULL;) {
                if (name_is(t, tl, "close")) {
                    app_close = true;
                } else if (!name_is(t, tl, "keep-alive")) {
                    PyErr_Format(PyExc_ValueError,
                                 "Connection: %R names a hop-by-hop field; only close is "
                                 "honoured (PEP 3333)", ovalue);
                    return -1;
                }
            }
        } else if (name_is(name, nl, "transfer-encoding")) {
            Py_ssize_t pos = 0, tl;
            for (const char *t; (t = list_next(value, vl, &pos, &tl)) != NULL;)
                if (!name_is(t, tl, "chunked")) {
                    PyErr_Format(PyExc_ValueError,
                                 "Transfer-Encoding: %R: the server applies no coding for the "
                                 "app; only chunked, its own framing, is honoured", ovalue);
                    return -1;
                }
            app_chunked = true;
        } else if (hop_by_hop(name, nl)) {
            PyErr_Format(PyExc_ValueError, "%R is a hop-by-hop header, the server's to send "
                         "(PEP 3333)", oname);
            return -1;
        }
    }
    if (app_chunked && content_length >= 0) {
        PyErr_SetString(PyExc_ValueError,
                        "Transfer-Encoding and Content-Length together (RFC 9112 §6.1)");
        return -1;
    }
    if (code == 204 && content_length > 0) {
        PyErr_Format(PyExc_ValueError,
                     "a 204 response has no body, but Content-Length is %lld",
                     (long long)content_length);
        return -1;
    }
    r->content_length = content_length;
    r->app_close = app_close;
    return 0;
}

/* A 204 or 304 has no body (RFC 9110 §15.3.5, §15.4.5): bytes for one are
 * the app's error. (A HEAD response's body is dropped instead: an app may
 * well make the GET body for it, as PEP 3333 lets it.) */
int responder_check_body(Responder *r, uint64_t n)
{
    if (n > 0 && (r->code == 204 || r->code == 304)) {
        PyErr_Format(PyExc_ValueError,
                     "a %d response has no body, but the app sent %llu bytes", r->code,
                     (unsigned long long)n);
        return -1;
    }
    return 0;
}

static PyObject *responder_write(PyObject *self, PyObject *data);
static PyMethodDef write_def = {"write", responder_write, METH_O,
                                "write(data): send bytes as part of the body (PEP 3333)"};

static PyObject *start_response_locked(PyObject *self, PyObject *args, PyObject *kwargs)
{
    Responder *r = (Responder *)self;
    static char *kwlist[] = {"status", "response_headers", "exc_info", NULL};
    PyObject *status, *headers, *exc_info = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|O:start_response", kwlist, &status,
                                     &headers, &exc_info))
        return NULL;
    if (!r->job) {
        PyErr_SetString(PyExc_RuntimeError, "start_response called after the request ended");
        return NULL;
    }
    if (exc_info != Py_None) {
        if (r->headers_sent) {
            /* Too late to change the response: re-raise the app's error. */
            if (!PyTuple_Check(exc_info) || PyTuple_GET_SIZE(exc_info) != 3) {
                PyErr_SetString(PyExc_TypeError, "exc_info must be a 3-tuple");
                return NULL;
            }
            PyObject *t = PyTuple_GET_ITEM(exc_info, 0), *v = PyTuple_GET_ITEM(exc_info, 1),
                     *tb = PyTuple_GET_ITEM(exc_info, 2);
            Py_INCREF(t);
            Py_INCREF(v);
            Py_INCREF(tb);
            PyErr_Restore(t, v, tb == Py_None ? (Py_DECREF(tb), NULL) : tb);
            return NULL;
        }
    } else if (r->status) {
        PyErr_SetString(PyExc_AssertionError, "start_response called twice without exc_info");
        return NULL;
    }
    int code;
    if (check_status(status, &code) < 0)
        return NULL;
    int rc;
    OBJ_LOCKED_BEGIN(headers); /* its items are read borrowed */
    rc = check_headers(r, headers, code);
    OBJ_LOCKED_END();
    if (rc < 0)
        return NULL;
    Py_INCREF(status);
    Py_INCREF(headers);
    Py_XSETREF(r->status, status);
    Py_XSETREF(r->headers, headers);
    r->code = code;
    if (!r->write && !(r->write = PyCFunction_New(&write_def, self)))
        return NULL;
    Py_INCREF(r->write);
    return r->write;
}

int responder_send_head(Responder *r, int64_t known_length)
{
    if (r->headers_sent)
        return 0;
    struct job *job = r->job;
    if (!r->status) {
        PyErr_SetString(PyExc_RuntimeError, "the app returned without calling start_response");
        return -1;
    }
#ifdef Py_GIL_DISABLED
    /* Another thread of the app may still change its list while it is read
     * below without the GIL: read a copy, taken under the list's own lock. */
    if (PyList_Check(r->headers)) {
        PyObject *copy = PyList_GetSlice(r->headers, 0, PY_SSIZE_T_MAX);
        if (!copy)
            return -1;
        Py_SETREF(r->headers, copy);
    }
#endif
    /* The list may have changed since start_response checked it. */
    if (check_headers(r, r->headers, r->code) < 0 ||
        responder_check_body(r, known_length > 0 ? (uint64_t)known_length : 0) < 0)
        return -1;
    Py_ssize_t slen;
    const char *status = latin1_view(r->status, &slen, "status");
    size_t need = (size_t)slen + 2 * RESPONSE_HEAD_FIXED;
    Py_ssize_t nh = PyList_GET_SIZE(r->headers);
    for (Py_ssize_t i = 0; i < nh; i++) {
        PyObject *item = PyList_GET_ITEM(r->headers, i);
        need += (size_t)PyUnicode_GET_LENGTH(PyTuple_GET_ITEM(item, 0)) +
                (size_t)PyUnicode_GET_LENGTH(PyTuple_GET_ITEM(item, 1)) + 4;
    }
    struct buffer *out = &job->out[job->fill_buf];
    if (!buffer_reserve(out, need)) {
        PyErr_NoMemory();
        return -1;
    }
    int code = r->code;
    r->no_body = job->is_head || code < 200 || code == 204 || code == 304;
    response_head_start(out, status, (size_t)slen);
    for (Py_ssize_t i = 0; i < nh; i++) {
        PyObject *item = PyList_GET_ITEM(r->headers, i);
        Py_ssize_t nl, vl;
        const char *name = (const char *)PyUnicode_1BYTE_DATA(PyTuple_GET_ITEM(item, 0));
        const char *value = (const char *)PyUnicode_1BYTE_DATA(PyTuple_GET_ITEM(item, 1));
        nl = PyUnicode_GET_LENGTH(PyTuple_GET_ITEM(item, 0));
        vl = PyUnicode_GET_LENGTH(PyTuple_GET_ITEM(item, 1));
        /* Connection and Transfer-Encoding (the only hop-by-hop fields
         * check_headers lets through) are written by the server as it
         * frames; a 204's Content-Length (0: check_headers) must not be
         * sent at all (RFC 9110 §8.6). */
        if (hop_by_hop(name, nl) || name_is(name, nl, "server") || name_is(name, nl, "date") ||
            (code == 204 && name_is(name, nl, "content-length")))
            continue;
        memcpy(out->data + out->len, name, (size_t)nl);
        out->len += (size_t)nl;
        out->data[out->len++] = ':';
        out->data[out->len++] = ' ';
        memcpy(out->data + out->len, value, (size_t)vl);
        out->len += (size_t)vl;
        out->data[out->len++] = '\r';
        out->data[out->len++] = '\n';
    }
    bool bodiless_status = code < 200 || code == 204 || code == 304;
    if (r->content_length < 0 && !bodiless_status) {
        if (known_length >= 0) {
            out->len += (size_t)sprintf(out->data + out->len, "Content-Length: %lld\r\n",
                                        (long long)known_length);
        } else if (job->req.minor_version >= 1) {
            static const char te[] = "Transfer-Encoding: chunked\r\n";
            memcpy(out->data + out->len, te, sizeof te - 1);
            out->len += sizeof te - 1;
            r->chunked = true;
        } else {
            job->close_after = true; /* HTTP/1.0: the body ends when we close */
        }
    }
    if (r->app_close)
        job->close_after = true;
    job_head_end(out, job);
    r->headers_sent = true;
    return 0;
}

int responder_body(Responder *r, const char *p, size_t n)
{
    struct job *job = r->job;
    if (responder_check_body(r, n) < 0)
        return -1;
    if (!r->headers_sent && responder_send_head(r, -1) < 0)
        return -1;
    if (r->content_length >= 0 && r->body_sent + n > (uint64_t)r->content_length) {
        /* The excess is dropped, so the framing holds; but an app that
         * miscounts its body is not trusted with the next request on this
         * connection either. */
        if (!r->overflow_logged)
            log_warn("app sent more than its Content-Length %lld; the excess is dropped, "
                     "and the connection closed",
                     (long long)r->content_length);
        r->overflow_logged = true;
        job->close_after = true;
        n = (size_t)((uint64_t)r->content_length - r->body_sent);
    }
    r->body_sent += n;
    if (r->no_body || n == 0)
        return 0;
    struct buffer *out = &job->out[job->fill_buf];
    if (!job_streams() && out->len + n > INLINE_MAX_RESPONSE) {
        /* --inline: the loop writes only once the app returns, so the whole
         * response waits in memory; past this it is cut (the connection
         * closes) rather than let one request hold any amount. */
        PyErr_Format(PyExc_RuntimeError, "--inline holds a response in memory until the app returns, "
                     "and this one passed %u MiB: cut, the connection closed (serve it with a pool)",
                     INLINE_MAX_RESPONSE >> 20);
        return -1;
    }
    if (!buffer_reserve(out, n + 24)) {
        PyErr_NoMemory();
        return -1;
    }
    if (r->chunked)
        out->len += (size_t)sprintf(out->data + out->len, "%zx\r\n", n);
    memcpy(out->data + out->len, p, n);
    out->len += n;
    if (r->chunked) {
        out->data[out->len++] = '\r';
        out->data[out->len++] = '\n';
    }
    return 0;
}

int responder_end(Responder *r)
{
    struct job *job = r->job;
    if (r->no_body)
        return 0;
    if (r->chunked) {
        if (!buffer_append(&job->out[job->fill_buf], "0\r\n\r\n", 5)) {
            PyErr_NoMemory();
            return -1;
        }
    } else if (r->content_length >= 0 && r->body_sent < (uint64_t)r->content_length) {
        log_warn("app sent %llu of the %lld bytes its Content-Length promised; closing",
                 (unsigned long long)r->body_sent, (long long)r->content_length);
        job->incomplete = JOB_CUT;
        job->close_after = true;
    }
    return 0;
}

static PyObject *responder_write_locked(PyObject *self, PyObject *data)
{
    Responder *r = (Responder *)self;
    struct job *job = r->job;
    if (!job) {
        PyErr_SetString(PyExc_RuntimeError, "write() called after the request ended");
        return NULL;
    }
    if (!r->status) {
        PyErr_SetString(PyExc_AssertionError, "write() called before start_response");
        return NULL;
    }
    if (!PyBytes_Check(data)) {
        PyErr_Format(PyExc_TypeError, "write() takes bytes, not %s", Py_TYPE(data)->tp_name);
        return NULL;
    }
    if (job_lost(job)) {
        PyErr_SetString(PyExc_ConnectionAbortedError, "the client disconnected");
        return NULL;
    }
    if (responder_body(r, PyBytes_AS_STRING(data), (size_t)PyBytes_GET_SIZE(data)) < 0)
        return NULL;
    /* Only the thread that called the app may post the job's messages: the
     * protocol allows one message in flight, and another thread (one of
     * the app's, or another request's pool thread) would post a second
     * while the first waits. Elsewhere the bytes are only buffered, and
     * leave with the request thread's next message. */
    if (PyBytes_GET_SIZE(data) > 0 && job_streams() && PyThread_get_thread_ident() == r->owner)
        job_flush(job);
    Py_RETURN_NONE;
}

/* start_response and write(), one thread at a time per Responder
 * (wsgi_internal.h, OBJ_LOCKED). */
static PyObject *start_response(PyObject *self, PyObject *args, PyObject *kwargs)
{
    PyObject *rv;
    OBJ_LOCKED_BEGIN(self);
    rv = start_response_locked(self, args, kwargs);
    OBJ_LOCKED_END();
    return rv;
}

static PyObject *responder_write(PyObject *self, PyObject *data)
{
    PyObject *rv;
    OBJ_LOCKED_BEGIN(self);
    rv = responder_write_locked(self, data);
    OBJ_LOCKED_END();
    return rv;
}

static void responder_dealloc(PyObject *self)
{
    Responder *r = (Responder *)self;
    Py_XDECREF(r->status);
    Py_XDECREF(r->headers);
    Py_XDECREF(r->write);
    Py_TYPE(self)->tp_free(self);
}

PyTypeObject ResponderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cserve.StartResponse",
    .tp_basicsize = sizeof(Responder),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "start_response(status, response_headers, exc_info=None) (PEP 3333)",
    .tp_call = start_response,
    .tp_dealloc = responder_dealloc,
};

Responder *responder_new(struct job *job)
{
    Responder *r = PyObject_New(Responder, &ResponderType);
    if (!r)
        return NULL;
    r->job = job;
    r->status = NULL;
    r->headers = NULL;
    r->write = NULL;
    r->code = 0;
    r->headers_sent = r->no_body = r->chunked = r->app_close = r->overflow_logged = false;
    r->content_length = -1;
    r->body_sent = 0;
    r->owner = PyThread_get_thread_ident();
    return r;
}
