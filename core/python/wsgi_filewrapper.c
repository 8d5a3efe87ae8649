/* wsgi_filewrapper.c — wsgi.file_wrapper (PEP 3333 "Optional
 * Platform-Specific File Handling"). The bridge recognises an instance
 * wrapping a regular file and has the loop sendfile it; anything else is
 * iterated in blksize reads, like any other iterable. */
#include "wsgi_internal.h"

#include <structmember.h>

static PyObject *fw_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"filelike", "blksize", NULL};
    PyObject *filelike;
    Py_ssize_t blksize = 8192;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|n:file_wrapper", kwlist, &filelike, &blksize))
        return NULL;
    FileWrapper *fw = (FileWrapper *)type->tp_alloc(type, 0);
    if (!fw)
        return NULL;
    Py_INCREF(filelike);
    fw->filelike = filelike;
    fw->blksize = blksize > 0 ? blksize : 8192;
    return (PyObject *)fw;
}

static PyObject *fw_iternext(PyObject *self)
{
    FileWrapper *fw = (FileWrapper *)self;
    PyObject *data = PyObject_CallMethod(fw->filelike, "read", "n", fw->blksize);
    if (data && PyBytes_Check(data) && PyBytes_GET_SIZE(data) == 0) {
        Py_DECREF(data);
        return NULL;
    }
    return data;
}

static PyObject *fw_close(PyObject *self, PyObject *unused)
{
    (void)unused;
    FileWrapper *fw = (FileWrapper *)self;
    if (PyObject_HasAttrString(fw->filelike, "close"))
        return PyObject_CallMethod(fw->filelike, "close", NULL);
    Py_RETURN_NONE;
}

static void fw_dealloc(PyObject *self)
{
    Py_XDECREF(((FileWrapper *)self)->filelike);
    Py_TYPE(self)->tp_free(self);
}

static PyMethodDef fw_methods[] = {
    {"close", fw_close, METH_NOARGS, "close the wrapped file"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef fw_members[] = {
    {"filelike", T_OBJECT, offsetof(FileWrapper, filelike), READONLY, NULL},
    {"blksize", T_PYSSIZET, offsetof(FileWrapper, blksize), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject FileWrapperType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cserve.FileWrapper",
    .tp_basicsize = sizeof(FileWrapper),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "wsgi.file_wrapper(filelike, blksize=8192)",
    .tp_new = fw_new,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = fw_iternext,
    .tp_methods = fw_methods,
    .tp_members = fw_members,
    .tp_dealloc = fw_dealloc,
};
