# cython: language_level=3, boundscheck=False, wraparound=False
"""Typed header decoding (``headers.decode_header``) in C: one pass over a header class's
fields, each read out of ``ext_fields`` and parsed where it is the common case (a decimal
string, ``"true"``), the checked Python parsers otherwise (they raise HeaderFieldError
naming the field). The instance is filled field by field, as the class's generated
``__init__`` would (``__post_init__`` included).
"""

from cpython.dict cimport PyDict_GetItem
from cpython.object cimport PyObject, PyObject_GenericSetAttr
from cpython.unicode cimport PyUnicode_GET_LENGTH
from libc.stdint cimport int64_t, uint64_t

cdef extern from "Python.h":
    bint PyUnicode_CheckExact(object o)
    bint PyUnicode_IS_ASCII(object o)
    const char* PyUnicode_AsUTF8AndSize(object o, Py_ssize_t* size) except NULL

cdef enum:
    KIND_STR = 0
    KIND_INT = 1
    KIND_BOOL = 2
    KIND_FLOAT = 3


cdef class FieldSpec:
    cdef readonly str attribute
    cdef readonly str key
    cdef readonly int kind
    cdef readonly bint required
    cdef readonly object default

    def __init__(self, str attribute not None, str key not None, int kind, bint required, default):
        if not KIND_STR <= kind <= KIND_FLOAT:
            raise ValueError(f"kind must be 0 (str), 1 (int), 2 (bool) or 3 (float), got {kind}")
        self.attribute = attribute
        self.key = key
        self.kind = kind
        self.required = required
        self.default = default


cdef class HeaderDecoder:
    """Decodes ext fields into instances of one header class."""

    cdef object _cls
    cdef tuple _fields
    cdef object _post_init
    cdef object _missing_error
    cdef object _parse_int
    cdef object _parse_bool
    cdef object _parse_float

    def __init__(self, cls, fields, post_init, missing_error, parse_int, parse_bool, parse_float):
        """``fields``: FieldSpecs in order; ``post_init``: the class's __post_init__ or None;
        ``missing_error(key)``: the exception for a missing required field; the parsers are
        the checked ones, called for anything unusual."""
        self._cls = cls
        self._fields = tuple(fields)
        for spec in self._fields:
            if not isinstance(spec, FieldSpec):
                raise TypeError(f"fields must be FieldSpec, got {type(spec).__name__}")
        self._post_init = post_init
        self._missing_error = missing_error
        self._parse_int = parse_int
        self._parse_bool = parse_bool
        self._parse_float = parse_float

    def __call__(self, ext):
        cdef FieldSpec spec
        cdef PyObject* found
        cdef object value
        if not isinstance(ext, dict):
            ext = dict(ext)
        obj = self._cls.__new__(self._cls)
        for spec in self._fields:
            found = PyDict_GetItem(ext, spec.key)
            if found is NULL or <object>found is None:
                if spec.required:
                    raise self._missing_error(spec.key)
                value = spec.default
            else:
                value = <object>found
                if spec.kind == KIND_STR:
                    if not PyUnicode_CheckExact(value):
                        value = str(value)
                elif spec.kind == KIND_INT:
                    value = self._int(spec.key, value)
                elif spec.kind == KIND_BOOL:
                    value = self._bool(spec.key, value)
                else:
                    value = self._parse_float(spec.key, value)
            PyObject_GenericSetAttr(obj, spec.attribute, value)
        if self._post_init is not None:
            self._post_init(obj)
        return obj

    cdef object _int(self, str key, object value):
        """A decimal string of ASCII digits (optional sign, up to 18 digits) is read here;
        anything else goes to the checked parser."""
        cdef Py_ssize_t size, i = 0
        cdef const char* text
        cdef uint64_t magnitude = 0
        cdef bint negative = False
        if PyUnicode_CheckExact(value) and PyUnicode_IS_ASCII(value):
            size = PyUnicode_GET_LENGTH(value)
            if 0 < size <= 19:
                text = PyUnicode_AsUTF8AndSize(value, &size)
                if text[0] == b'-' or text[0] == b'+':
                    negative = text[0] == b'-'
                    i = 1
                if i < size and size - i <= 18:
                    while i < size:
                        if not (b'0' <= text[i] <= b'9'):
                            break
                        magnitude = magnitude * 10 + <uint64_t>(text[i] - 48)
                        i += 1
                    else:
                        return -<int64_t>magnitude if negative else <int64_t>magnitude
        return self._parse_int(key, value)

    cdef object _bool(self, str key, object value):
        if value == "true" or value == "1":
            return True
        if value == "false" or value == "0":
            return False
        return self._parse_bool(key, value)
