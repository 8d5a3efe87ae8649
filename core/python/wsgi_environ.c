/* wsgi_environ.c — the environ dict (PEP 3333), built per request from the
 * parsed views: a copy of a template holding the per-server keys, then the
 * request's own. HTTP_* keys are interned once per header name and cached. */
#include "wsgi_internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "job.h"
#include "../http/http_forwarded.h"
#include "../base/options.h"

/* The bridge's state. wsgi_app.c fills it at start-up; it is defined here,
 * beside the environ that reads most of it, so that wsgi_app.c, which
 * builds each request's environ, depends on this file and not both ways. */
struct wsgi_state bridge;

#define KEY_CACHE_SLOTS 512
#define KEY_NAME_MAX 64

struct key_slot {
    char name[KEY_NAME_MAX]; /* lower-case header name */
    size_t len;
    PyObject *key;           /* interned "HTTP_..." */
};

static struct key_slot key_cache[KEY_CACHE_SLOTS];

/* With the GIL one pool thread at a time runs here. A free-threaded
 * Python runs them in parallel over the one cache, so there a slot is
 * published once, under a lock, its name and length written before its
 * key (release) and read after it (acquire): a reader that sees a key sees
 * the name it belongs to. The lock is held over no Python call: a thread
 * waiting on it is attached to the interpreter and would hold up a
 * collection's stop-the-world, as the holder might be in it. */
#ifdef Py_GIL_DISABLED
#include <pthread.h>
static pthread_mutex_t key_cache_lock = PTHREAD_MUTEX_INITIALIZER;
#define SLOT_KEY(s) __atomic_load_n(&(s)->key, __ATOMIC_ACQUIRE)
#define SLOT_PUBLISH(s, k) __atomic_store_n(&(s)->key, (k), __ATOMIC_RELEASE)
#define KEY_CACHE_LOCK() pthread_mutex_lock(&key_cache_lock)
#define KEY_CACHE_UNLOCK() pthread_mutex_unlock(&key_cache_lock)
#else
#define SLOT_KEY(s) ((s)->key)
#define SLOT_PUBLISH(s, k) ((s)->key = (k))
#define KEY_CACHE_LOCK() ((void)0)
#define KEY_CACHE_UNLOCK() ((void)0)
#endif
static const char *root_path;
static size_t root_len;

/* Store a new reference under key and drop ours (PyDict_SetItemString does
 * not steal it). NULL (a failed allocation, exception set) is an error, not
 * a value to store. */
static int put_new(PyObject *dict, const char *key, PyObject *value)
{
    if (!value)
        return -1;
    int rc = PyDict_SetItemString(dict, key, value);
    Py_DECREF(value);
    return rc;
}

int environ_init(void)
{
    const struct options *opt = bridge.opt;
    struct {
        PyObject **slot;
        const char *text;
    } strings[] = {
        {&bridge.k_request_method, "REQUEST_METHOD"}, {&bridge.k_path_info, "PATH_INFO"},
        {&bridge.k_query_string, "QUERY_STRING"},     {&bridge.k_content_type, "CONTENT_TYPE"},
        {&bridge.k_content_length, "CONTENT_LENGTH"}, {&bridge.k_server_protocol, "SERVER_PROTOCOL"},
        {&bridge.k_remote_addr, "REMOTE_ADDR"},       {&bridge.k_remote_port, "REMOTE_PORT"},
        {&bridge.k_input, "wsgi.input"},              {&bridge.v_http10, "HTTP/1.0"},
        {&bridge.v_http11, "HTTP/1.1"},               {&bridge.v_empty, ""},
    };
    for (size_t i = 0; i < sizeof strings / sizeof *strings; i++)
        if (!(*strings[i].slot = PyUnicode_InternFromString(strings[i].text)))
            return -1;

    /* --root-path: where the app is mounted, "" or "/a/b" (no trailing '/'). */
    root_path = opt->root_path ? opt->root_path : "";
    root_len = strlen(root_path);
    while (root_len && root_path[root_len - 1] == '/')
        root_len--;
    PyObject *t = PyDict_New();
    if (!t)
        return -1;
    const char *name = opt->bind_unix ? opt->bind_unix : opt->bind_host;
    char port[16];
    snprintf(port, sizeof port, "%d", opt->bind_unix ? 0 : opt->bind_port);
    /* Borrowed values go in with PyDict_SetItemString, new ones with put_new. */
    if (put_new(t, "SCRIPT_NAME", PyUnicode_DecodeLatin1(root_path, (Py_ssize_t)root_len, NULL)) < 0 ||
        put_new(t, "SERVER_NAME", PyUnicode_DecodeFSDefault(name)) < 0 ||
        put_new(t, "SERVER_PORT", PyUnicode_FromString(port)) < 0 ||
        put_new(t, "SERVER_SOFTWARE", PyUnicode_FromString("cserve/" CSERVE_VERSION)) < 0 ||
        put_new(t, "wsgi.version", Py_BuildValue("(ii)", 1, 0)) < 0 ||
        put_new(t, "wsgi.url_scheme", PyUnicode_FromString("http")) < 0 ||
        PyDict_SetItemString(t, "wsgi.errors", bridge.errors ? bridge.errors : Py_None) < 0 ||
        PyDict_SetItemString(t, "wsgi.multithread", opt->blocking_threads > 1 ? Py_True : Py_False) < 0 ||
        PyDict_SetItemString(t, "wsgi.multiprocess", opt->workers > 1 ? Py_True : Py_False) < 0 ||
        PyDict_SetItemString(t, "wsgi.run_once", Py_False) < 0 ||
        PyDict_SetItemString(t, "wsgi.input_terminated", Py_True) < 0 ||
        PyDict_SetItemString(t, "wsgi.file_wrapper", (PyObject *)&FileWrapperType) < 0) {
        Py_DECREF(t);
        return -1;
    }
    bridge.environ_template = t;
    return 0;
}

/* What environ_init and http_key keep, released before the interpreter is
 * finalised (so a leak checker sees only what the interpreter itself keeps). */
void environ_fini(void)
{
    PyObject **kept[] = {&bridge.k_request_method, &bridge.k_path_info, &bridge.k_query_string, &bridge.k_content_type,
                         &bridge.k_content_length, &bridge.k_server_protocol, &bridge.k_remote_addr,
                         &bridge.k_remote_port, &bridge.k_input, &bridge.v_http10, &bridge.v_http11, &bridge.v_empty,
                         &bridge.environ_template};
    for (size_t i = 0; i < sizeof kept / sizeof *kept; i++)
        Py_CLEAR(*kept[i]);
    for (size_t i = 0; i < KEY_CACHE_SLOTS; i++) {
        Py_CLEAR(key_cache[i].key);
        key_cache[i].len = 0;
    }
}

/* "HTTP_" + upper-cased name with '-' as '_'; NULL (no exception) when the
 * name holds '_': such fields are dropped, so "X_Forwarded_For" cannot pose
 * as "X-Forwarded-For" once both are spelled HTTP_X_FORWARDED_FOR. */
static PyObject *http_key(const char *name, size_t len, bool *dropped)
{
    *dropped = memchr(name, '_', len) != NULL;
    if (*dropped)
        return NULL;
    uint32_t h = 2166136261u;
    char lower[KEY_NAME_MAX];
    bool cacheable = len < KEY_NAME_MAX;
    for (size_t i = 0; cacheable && i < len; i++) {
        lower[i] = (char)tolower((unsigned char)name[i]);
        h = (h ^ (unsigned char)lower[i]) * 16777619u;
    }
    if (cacheable) {
        for (unsigned probe = 0; probe < 8; probe++) {
            struct key_slot *s = &key_cache[(h + probe) % KEY_CACHE_SLOTS];
            PyObject *k = SLOT_KEY(s);
            if (!k)
                break;
            if (s->len == len && memcmp(s->name, lower, len) == 0)
                return Py_NewRef(k);
        }
    }
    char *buf = malloc(len + 6);
    if (!buf)
        return PyErr_NoMemory();
    memcpy(buf, "HTTP_", 5);
    for (size_t i = 0; i < len; i++) {
        char ch = (char)toupper((unsigned char)name[i]);
        buf[5 + i] = ch == '-' ? '_' : ch;
    }
    buf[5 + len] = '\0';
    PyObject *key = PyUnicode_DecodeLatin1(buf, (Py_ssize_t)len + 5, NULL);
    free(buf);
    if (!key)
        return NULL;
    PyUnicode_InternInPlace(&key);
    if (cacheable) {
        /* The first free slot of the probe sequence, unless another thread
         * cached this name meanwhile; published slots never change. */
        KEY_CACHE_LOCK();
        for (unsigned probe = 0; probe < 8; probe++) {
            struct key_slot *s = &key_cache[(h + probe) % KEY_CACHE_SLOTS];
            if (s->key) {
                if (s->len == len && memcmp(s->name, lower, len) == 0)
                    break;
                continue;
            }
            memcpy(s->name, lower, len);
            s->len = len;
            SLOT_PUBLISH(s, Py_NewRef(key));
            break;
        }
        KEY_CACHE_UNLOCK();
    }
    return key;
}

/* Set key to value, or append ", value" ("; value" for Cookie) if present. */
static int set_or_join(PyObject *env, PyObject *key, const char *v, size_t vlen, bool cookie)
{
    PyObject *value = PyUnicode_DecodeLatin1(v, (Py_ssize_t)vlen, NULL);
    if (!value)
        return -1;
    PyObject *old = PyDict_GetItemWithError(env, key); /* borrowed */
    if (old) {
        PyObject *sep = PyUnicode_FromString(cookie ? "; " : ", ");
        PyObject *a = sep ? PyUnicode_Concat(old, sep) : NULL;
        PyObject *joined = a ? PyUnicode_Concat(a, value) : NULL;
        Py_XDECREF(sep);
        Py_XDECREF(a);
        Py_DECREF(value);
        if (!joined)
            return -1;
        value = joined;
    } else if (PyErr_Occurred()) {
        Py_DECREF(value);
        return -1;
    }
    int rc = PyDict_SetItem(env, key, value);
    Py_DECREF(value);
    return rc;
}

int environ_set_str(PyObject *env, const char *key, const char *v, size_t len)
{
    return put_new(env, key, PyUnicode_DecodeLatin1(v, (Py_ssize_t)len, NULL));
}

static int set_latin1(PyObject *env, PyObject *key, const char *v, size_t len)
{
    PyObject *value = PyUnicode_DecodeLatin1(v, (Py_ssize_t)len, NULL);
    if (!value)
        return -1;
    int rc = PyDict_SetItem(env, key, value);
    Py_DECREF(value);
    return rc;
}

/* A trusted proxy's word on the client (../http/http_forwarded.c): the
 * scheme, REMOTE_ADDR and the host it names. */
static int apply_host(PyObject *env, struct span host, bool https)
{
    struct span name = host;
    const char *port = NULL;
    size_t port_len = 0;
    const char *colon = NULL;
    if (host.p[0] == '[') {
        const char *close = memchr(host.p, ']', host.len);
        if (close && close + 1 < host.p + host.len && close[1] == ':')
            colon = close + 1;
    } else {
        colon = memchr(host.p, ':', host.len);
    }
    if (colon) {
        name.len = (size_t)(colon - host.p);
        port = colon + 1;
        port_len = host.len - name.len - 1;
    }
    if (environ_set_str(env, "HTTP_HOST", host.p, host.len) < 0 || environ_set_str(env, "SERVER_NAME", name.p, name.len) < 0)
        return -1;
    if (port_len)
        return environ_set_str(env, "SERVER_PORT", port, port_len);
    return environ_set_str(env, "SERVER_PORT", https ? "443" : "80", https ? 3 : 2);
}

static int proxy_apply(PyObject *env, const struct job *job)
{
    struct forwarded f;
    if (!forwarded_read(bridge.forwarded, &job->req, job->remote_addr, &f))
        return 0;
    if (f.proto.len) {
        if (environ_set_str(env, "wsgi.url_scheme", f.https ? "https" : "http", f.https ? 5 : 4) < 0)
            return -1;
        if (f.https && environ_set_str(env, "HTTPS", "on", 2) < 0)
            return -1;
    }
    if (f.client.len && environ_set_str(env, "REMOTE_ADDR", f.client.p, f.client.len) < 0)
        return -1;
    if (f.host.len && apply_host(env, f.host, f.https) < 0)
        return -1;
    return 0;
}

static _Thread_local char *path_scratch;
static _Thread_local size_t path_scratch_cap;

PyObject *environ_build(struct job *job, PyObject *input)
{
    PyObject *env = PyDict_Copy(bridge.environ_template);
    if (!env)
        return NULL;
    const struct http_request *req = &job->req;
    const struct http_target *t = &job->target;
    if (path_scratch_cap < t->path_len + 1) {
        char *p = realloc(path_scratch, t->path_len + 64);
        if (!p)
            goto fail;
        path_scratch = p;
        path_scratch_cap = t->path_len + 64;
    }
    size_t plen = http_percent_decode(t->path, t->path_len, path_scratch);
    /* Under --root-path the prefix is SCRIPT_NAME's, not PATH_INFO's; a path
     * outside it (a proxy that strips it already) is left whole. */
    const char *path = path_scratch;
    if (root_len && plen >= root_len && memcmp(path, root_path, root_len) == 0 &&
        (plen == root_len || path[root_len] == '/')) {
        path += root_len;
        plen -= root_len;
    }
    if (set_latin1(env, bridge.k_request_method, req->method, req->method_len) < 0 ||
        set_latin1(env, bridge.k_path_info, path, plen) < 0 ||
        (t->query_len ? set_latin1(env, bridge.k_query_string, t->query, t->query_len)
                      : PyDict_SetItem(env, bridge.k_query_string, bridge.v_empty)) < 0 ||
        PyDict_SetItem(env, bridge.k_server_protocol,
                       req->minor_version == 0 ? bridge.v_http10 : bridge.v_http11) < 0 ||
        set_latin1(env, bridge.k_remote_addr, job->remote_addr, strlen(job->remote_addr)) < 0 ||
        set_latin1(env, bridge.k_remote_port, job->remote_port, strlen(job->remote_port)) < 0 ||
        PyDict_SetItem(env, bridge.k_input, input) < 0)
        goto fail;
    if (job->framing.body == HTTP_BODY_LENGTH) {
        char cl[24];
        int n = snprintf(cl, sizeof cl, "%llu", (unsigned long long)job->framing.content_length);
        if (set_latin1(env, bridge.k_content_length, cl, (size_t)n) < 0)
            goto fail;
    }
    /* An absolute-form target names the host itself, and the Host field
     * must then be ignored (RFC 9112 §3.2.2): a proxy-style request for
     * a.example with "Host: b.example" is for a.example. */
    const char *authority;
    size_t authority_len;
    bool absolute = http_target_authority(req->target, req->target_len, &authority, &authority_len);
    if (absolute) {
        bool dropped;
        PyObject *key = http_key("Host", 4, &dropped);
        int rc = key ? set_latin1(env, key, authority, authority_len) : -1;
        Py_XDECREF(key);
        if (rc < 0)
            goto fail;
    }
    for (size_t i = 0; i < req->num_headers; i++) {
        const struct http_header *h = &req->headers[i];
        if (http_token_eq(h->name, h->name_len, "content-length") ||
            http_token_eq(h->name, h->name_len, "transfer-encoding"))
            continue; /* framing: CONTENT_LENGTH above says what the app gets */
        if (absolute && http_token_eq(h->name, h->name_len, "host"))
            continue;
        if (http_token_eq(h->name, h->name_len, "content-type")) {
            if (set_or_join(env, bridge.k_content_type, h->value, h->value_len, false) < 0)
                goto fail;
            continue;
        }
        bool dropped;
        PyObject *key = http_key(h->name, h->name_len, &dropped);
        if (!key) {
            if (dropped)
                continue;
            goto fail;
        }
        int rc = set_or_join(env, key, h->value, h->value_len,
                             http_token_eq(h->name, h->name_len, "cookie"));
        Py_DECREF(key);
        if (rc < 0)
            goto fail;
    }
    if (proxy_apply(env, job) < 0)
        goto fail;
    return env;
fail:
    Py_DECREF(env);
    return NULL;
}

void environ_thread_cleanup(void)
{
    free(path_scratch);
    path_scratch = NULL;
    path_scratch_cap = 0;
}
