# The frame writer, shared with the request pump (_pump.pyx) and the broker's send path, and
# the decimal writer of their JSON headers.

from rocketstore.remoting._command cimport RemotingCommand


cdef class FrameWriter:
    cdef list _parts
    cdef bytearray _tail
    cdef readonly Py_ssize_t nbytes

    cpdef Py_ssize_t add(self, RemotingCommand cmd) except -1
    cpdef Py_ssize_t add_frame(self, bytes frame) except -1
    cdef char* reserve(self, Py_ssize_t n) except NULL


cdef enum:
    DECIMAL_TEXT_MAX = 20       # an int64 in decimal, with its sign


cdef inline Py_ssize_t put_decimal(char* p, long long value) noexcept nogil:
    """``value`` in decimal at ``p`` (at most DECIMAL_TEXT_MAX characters); returns how many."""
    cdef char digits[DECIMAL_TEXT_MAX]
    cdef int count = 0, written = 0
    cdef unsigned long long magnitude = <unsigned long long>value
    if value < 0:
        p[0] = b'-'
        written = 1
        magnitude = <unsigned long long>0 - magnitude
    while True:
        digits[count] = <char>(48 + magnitude % 10)
        count += 1
        magnitude //= 10
        if magnitude == 0:
            break
    while count:
        count -= 1
        p[written] = digits[count]
        written += 1
    return written
