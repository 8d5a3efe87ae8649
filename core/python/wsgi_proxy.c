/* wsgi_proxy.c — a trusted proxy's word on the client (http_forwarded.c)
 * applied to environ: wsgi.url_scheme and HTTPS, REMOTE_ADDR, and
 * HTTP_HOST, SERVER_NAME, SERVER_PORT. */
#include "wsgi_internal.h"

#include <string.h>

#include "../http/http_forwarded.h"
#include "job.h"
#include "wsgi.h"

int proxy_trust_parse(const char *list, char *err, size_t errcap)
{
    return forwarded_trust_parse(list, err, errcap);
}

static int set_str(PyObject *env, const char *key, const char *v, size_t len)
{
    PyObject *value = PyUnicode_DecodeLatin1(v, (Py_ssize_t)len, NULL);
    if (!value)
        return -1;
    int rc = PyDict_SetItemString(env, key, value);
    Py_DECREF(value);
    return rc;
}

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
    if (set_str(env, "HTTP_HOST", host.p, host.len) < 0 || set_str(env, "SERVER_NAME", name.p, name.len) < 0)
        return -1;
    if (port_len)
        return set_str(env, "SERVER_PORT", port, port_len);
    return set_str(env, "SERVER_PORT", https ? "443" : "80", https ? 3 : 2);
}

int proxy_apply(PyObject *env, const struct job *job)
{
    struct forwarded f;
    if (!forwarded_read(&job->req, job->remote_addr, &f))
        return 0;
    if (f.proto.len) {
        if (set_str(env, "wsgi.url_scheme", f.https ? "https" : "http", f.https ? 5 : 4) < 0)
            return -1;
        if (f.https && set_str(env, "HTTPS", "on", 2) < 0)
            return -1;
    }
    if (f.client.len && set_str(env, "REMOTE_ADDR", f.client.p, f.client.len) < 0)
        return -1;
    if (f.host.len && apply_host(env, f.host, f.https) < 0)
        return -1;
    return 0;
}
