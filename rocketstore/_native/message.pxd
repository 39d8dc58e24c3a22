# The message to put, shared with the record writer (which reads its fields directly).
from libc.stdint cimport int64_t
from posix.time cimport CLOCK_REALTIME, clock_gettime, timespec

cdef enum:
    UNIQ_HEX_MAX = 44     # hex of the longest UNIQ_KEY: a 16-byte prefix, time (4), counter (2)


cdef class Message:
    cdef public str topic
    cdef public bytes body
    cdef dict _props
    cdef int _uniq_len                  # > 0: a generated UNIQ_KEY not yet in _props
    cdef char _uniq_hex[UNIQ_HEX_MAX]
    cdef public int flag
    cdef public object born_timestamp
    cdef public object born_host
    cdef public object store_host
    cdef public int sys_flag
    cdef public int reconsume_times
    cdef public long long prepared_transaction_offset

    cdef int _settle_uniq_key(self) except -1


# A fresh UNIQ_KEY's hex text into out (UNIQ_HEX_MAX bytes); returns its length
cdef int new_uniq_hex(int64_t now_ms, char* out) except -1
cdef int _check_property_text(str what, object value) except -1


cdef inline int64_t wall_clock_ms() noexcept nogil:
    """Wall-clock ms (the store timestamp), without a Python call."""
    cdef timespec ts
    clock_gettime(CLOCK_REALTIME, &ts)
    return <int64_t>ts.tv_sec * 1000 + ts.tv_nsec // 1000000
