/* wsgi_internal.h — what the wsgi_*.c files share. All of it is touched only
 * with the GIL held, or, on a free-threaded Python, by one thread at a time
 * as OBJ_LOCKED says. */
#ifndef CSERVE_WSGI_INTERNAL_H
#define CSERVE_WSGI_INTERNAL_H

#include <Python.h>
#include <stdbool.h>
#include <stdint.h>

struct forwarded_policy;
struct job;
struct options;

/* A request's Input and Responder are its pool thread's, but the app may
 * hand them to its own threads. The GIL made each call on them atomic; a
 * free-threaded Python does the same per object with a critical section,
 * which, like the GIL, is let go whenever the thread blocks (waiting for
 * the loop, for a lock), so it cannot deadlock. Usage:
 * OBJ_LOCKED_BEGIN(obj); ...no return...; OBJ_LOCKED_END(); */
#ifdef Py_GIL_DISABLED
#define OBJ_LOCKED_BEGIN(obj) Py_BEGIN_CRITICAL_SECTION(obj)
#define OBJ_LOCKED_END() Py_END_CRITICAL_SECTION()
#else
#define OBJ_LOCKED_BEGIN(obj) {
#define OBJ_LOCKED_END() }
#endif

struct wsgi_state {
    const struct options *opt;  /* as wsgi_init was given them */
    const struct forwarded_policy *forwarded;
    PyObject *app;
    PyObject *environ_template; /* the per-server keys, copied per request */
    PyObject *errors;           /* wsgi.errors */
    /* interned keys and common values */
    PyObject *k_request_method, *k_path_info, *k_query_string, *k_content_type,
        *k_content_length, *k_server_protocol, *k_remote_addr, *k_remote_port, *k_input;
    PyObject *v_http10, *v_http11, *v_empty;
    PyObject *s_close, *s_fileno, *s_tell;
};

extern struct wsgi_state bridge;

extern PyTypeObject InputType;       /* wsgi.input */
extern PyTypeObject ResponderType;   /* start_response; also holds the response state */
extern PyTypeObject FileWrapperType; /* wsgi.file_wrapper */

/* wsgi_environ.c */
int environ_init(void);
PyObject *environ_build(struct job *job, PyObject *input);
/* env[key] = the latin-1 string v[0..len). 0, or -1 with an exception. */
int environ_set_str(PyObject *env, const char *key, const char *v, size_t len);
void environ_thread_cleanup(void);
void environ_fini(void);


/* wsgi_input.c */
PyObject *input_new(struct job *job);
void input_detach(PyObject *input);

/* wsgi_filewrapper.c */
typedef struct {
    PyObject_HEAD
    PyObject *filelike;
    Py_ssize_t blksize;
} FileWrapper;

/* wsgi_response.c */
typedef struct {
    PyObject_HEAD
    struct job *job;          /* NULL once the request is over */
    PyObject *status;         /* str, as the app gave it */
    int code;                 /* its number */
    PyObject *headers;        /* list of (str, str) */
    bool headers_sent;
    bool no_body;             /* HEAD, 1xx, 204, 304 */
    bool chunked;
    bool app_close;           /* the app said "Connection: close" */
    int64_t content_length;   /* the app's, or -1 */
    uint64_t body_sent;       /* body bytes accepted from the app */
    bool overflow_logged;
    PyObject *write;          /* the bound write() callable, made on first use */
    unsigned long owner;      /* the thread that called the app: the only one that posts */
} Responder;

Responder *responder_new(struct job *job);
/* Send the head if not sent yet; known_length >= 0: the whole body's length. */
int responder_send_head(Responder *r, int64_t known_length);
/* Frame and buffer body bytes (sending the head first if needed). */
int responder_body(Responder *r, const char *p, size_t n);
/* 0 if the response may carry n body bytes; -1 with an exception for a
 * 204 or 304 that would. */
int responder_check_body(Responder *r, uint64_t n);
/* Terminate the body (chunked: the last chunk). */
int responder_end(Responder *r);

/* Encode a str as latin-1 bytes without copying: its 1-byte storage. NULL
 * with an exception if it is not a str or has a character above U+00FF. */
const char *latin1_view(PyObject *s, Py_ssize_t *len, const char *what);

#endif
