# CPython C API not declared by Cython's cpython package.

cdef extern from "Python.h":
    # released by hand where a loop is worth it (dispatch_region, write_units, build_index)
    ctypedef struct PyThreadState
    PyThreadState* PyEval_SaveThread()
    void PyEval_RestoreThread(PyThreadState* state)

    object PyUnicode_New(Py_ssize_t size, Py_UCS4 maxchar)
    void* PyUnicode_DATA(object o)
    int PyUnicode_KIND(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)
    Py_UCS4 PyUnicode_READ(int kind, void* data, Py_ssize_t index)
    object PyUnicode_DecodeUTF8(const char* s, Py_ssize_t size, const char* errors)
    object PyUnicode_DecodeASCII(const char* s, Py_ssize_t size, const char* errors)
    bint PyUnicode_IS_COMPACT_ASCII(object o)
    int PyDict_Contains(object d, object key) except -1
    Py_ssize_t PyDict_GET_SIZE(object d)
    # the checking-free forms: an exception left set is the caller's to clear or raise
    const char* PyUnicode_AsUTF8AndSize_or_null "PyUnicode_AsUTF8AndSize" (object s,
                                                                          Py_ssize_t* n)
    void PyErr_Clear()
