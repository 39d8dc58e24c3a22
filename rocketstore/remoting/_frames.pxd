# The frame writer, shared with the request pump (_pump.pyx).

from rocketstore.remoting._command cimport RemotingCommand


cdef class FrameWriter:
    cdef list _parts
    cdef bytearray _tail
    cdef readonly Py_ssize_t nbytes

    cpdef Py_ssize_t add(self, RemotingCommand cmd) except -1
    cdef char* reserve(self, Py_ssize_t n) except NULL
