/* config_toml.c — read --config's TOML with the embedded Python's tomllib.
 *
 * The options decide how this process's interpreter starts (--virtualenv),
 * and an interpreter is not restarted, so the file is read by a child: it
 * starts the bare installation (interp_start_bare), parses with tomllib,
 * writes each top-level key as "key NUL kind NUL value NUL" into a pipe and
 * exits; the parent never starts Python for it. */
#include <Python.h>

#include "config_toml.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "interp.h"

#define CONFIG_MAX_BYTES (1024 * 1024)

#if PY_VERSION_HEX >= 0x030B0000 /* tomllib: 3.11 */
/* The child's program: its errors are records too (an empty key, kind E). */
static const char reader[] =
    "import os, tomllib\n"
    "w = os.fdopen(fd, 'wb')\n"
    "def emit(key, kind, value):\n"
    "    w.write(b'\\0'.join(s.encode('utf-8', 'surrogateescape') for s in (key, kind, value)) + b'\\0')\n"
    "def scalar(x):\n"
    "    return isinstance(x, (str, int, float)) and not isinstance(x, bool)\n"
    "try:\n"
    "    with os.fdopen(cfd, 'rb') as f:\n"
    "        raw = f.read(limit + 1)\n"
    "    if len(raw) > limit:\n"
    "        raise ValueError(f'larger than {limit} bytes: not a config file')\n"
    "    data = tomllib.loads(raw.decode('utf-8'))\n"
    "except OSError as e:\n"
    "    emit('', 'E', e.strerror or str(e))\n"
    "except ValueError as e:  # TOMLDecodeError and UnicodeDecodeError are ones\n"
    "    emit('', 'E', str(e))\n"
    "else:\n"
    "    for k, v in data.items():\n"
    "        if '\\0' in k:\n"
    "            emit('', 'E', 'a key holding a NUL character')\n"
    "        elif isinstance(v, bool):\n"
    "            emit(k, 'b', 'true' if v else 'false')\n"
    "        elif isinstance(v, (int, float)):\n"
    "            emit(k, 'n', str(v))\n"
    "        elif isinstance(v, str):\n"
    "            emit(k, 's', v) if '\\0' not in v else emit(k, 'o', 'a string holding a NUL character')\n"
    "        elif isinstance(v, list) and all(scalar(x) and '\\0' not in str(x) for x in v):\n"
    "            emit(k, 'a', ','.join(str(x) for x in v))\n"
    "        elif isinstance(v, dict):\n"
    "            emit(k, 't', 'a table')\n"
    "        else:\n"
    "            emit(k, 'o', 'an array of tables or arrays' if isinstance(v, list) else 'a ' + type(v).__name__)\n"
    "w.close()\n";

static void child(int cfd, int fd) __attribute__((noreturn));
static void child(int cfd, int fd)
{
    interp_start_bare();
    PyObject *g = PyDict_New(), *c = PyLong_FromLong(cfd), *f = PyLong_FromLong(fd),
             *lim = PyLong_FromLong(CONFIG_MAX_BYTES);
    if (!g || !c || !f || !lim || PyDict_SetItemString(g, "__builtins__", PyEval_GetBuiltins()) != 0 ||
        PyDict_SetItemString(g, "cfd", c) != 0 || PyDict_SetItemString(g, "fd", f) != 0 ||
        PyDict_SetItemString(g, "limit", lim) != 0)
        _exit(3);
    PyObject *r = PyRun_String(reader, Py_file_input, g, g);
    if (!r) {
        PyErr_Print();
        _exit(3);
    }
    _exit(0);
}
#endif

int config_toml_read(const char *path, struct config_entry **entries, size_t *n, char *err, size_t cap)
{
    *entries = NULL;
    *n = 0;
#if PY_VERSION_HEX < 0x030B0000
    (void)path;
    snprintf(err, cap, "a config file needs Python 3.11's tomllib; this cserve embeds Python %d.%d (build it "
             "for 3.11 or later: make PYTHON=python3.11)", PY_MAJOR_VERSION, PY_MINOR_VERSION);
    return -1;
#else
    /* Opened here, non-blocking, and only a regular file of a bounded size
     * is read: a FIFO would hang start-up, /dev/zero fill the memory. */
    int cfd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (cfd < 0) {
        snprintf(err, cap, "%s", strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(cfd, &st) != 0) {
        snprintf(err, cap, "%s", strerror(errno));
        close(cfd);
        return -1;
    }
    if (!S_ISREG(st.st_mode) || st.st_size > CONFIG_MAX_BYTES) {
        snprintf(err, cap, "%s", S_ISDIR(st.st_mode) ? "a folder, not a file"
                                 : !S_ISREG(st.st_mode) ? "not a regular file (a FIFO, a device, a socket)"
                                                        : "larger than 1 MiB: not a config file");
        close(cfd);
        return -1;
    }
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        snprintf(err, cap, "pipe: %s", strerror(errno));
        close(cfd);
        return -1;
    }
    fflush(NULL); /* nothing buffered is written twice */
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, cap, "fork: %s", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        close(cfd);
        return -1;
    }
    if (pid == 0) {
        close(fds[0]);
        child(cfd, fds[1]);
    }
    close(fds[1]);
    close(cfd);
    size_t len = 0, room = 4096;
    char *buf = malloc(room);
    for (ssize_t got = 1; buf && got > 0;) {
        if (len + 1 >= room) {
            char *bigger = realloc(buf, room *= 2);
            if (!bigger) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = bigger;
        }
        got = read(fds[0], buf + len, room - len - 1);
        if (got > 0)
            len += (size_t)got;
        else if (got < 0 && errno == EINTR)
            got = 1;
    }
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!buf) {
        snprintf(err, cap, "out of memory");
        return -1;
    }
    buf[len] = '\0';
    /* Three strings a record: count them, then point into buf (kept). */
    size_t strings = 0;
    for (size_t i = 0; i < len; i++)
        strings += buf[i] == '\0';
    struct config_entry *e = calloc(strings / 3 + 1, sizeof *e);
    if (!e) {
        free(buf);
        snprintf(err, cap, "out of memory");
        return -1;
    }
    size_t k = 0;
    for (char *p = buf; p + 2 < buf + len && k < strings / 3;) {
        e[k].key = p;
        p += strlen(p) + 1;
        e[k].kind = *p;
        p += strlen(p) + 1;
        e[k].value = p;
        p += strlen(p) + 1;
        if (e[k].kind == 'E') {
            snprintf(err, cap, "%s", e[k].value);
            free(e);
            free(buf);
            return -1;
        }
        k++;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        snprintf(err, cap, "its reader (Python's tomllib, in a child process) failed: %s",
                 WIFEXITED(status) ? "see above" : strsignal(WTERMSIG(status)));
        free(e);
        free(buf);
        return -1;
    }
    if (k == 0) { /* an empty file: nothing points into buf */
        free(e);
        free(buf);
        e = NULL;
    }
    *entries = e;
    *n = k;
    return 0;
#endif
}
