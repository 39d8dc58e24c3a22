# The bytes a native reader walks: shared with the record and columnar decoders.
from libc.stdint cimport int64_t

from rocketstore._native.mapped_file cimport MappedFile


cdef class ReadSource:
    """The bytes a native reader walks: a MappedFile held up to its readable position, or any
    1-D bytes-like buffer (its view keeps the memory exported, so it cannot move)."""
    cdef readonly object obj
    cdef MappedFile mf
    cdef const unsigned char[::1] view
    cdef const char* base
    cdef int64_t limit
    cdef void release(self)
