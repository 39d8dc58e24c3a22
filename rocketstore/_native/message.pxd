# The message to put, shared with the record writer (which reads its fields directly).
from libc.stdint cimport int64_t
from libc.string cimport memcpy
from posix.time cimport CLOCK_REALTIME, clock_gettime, timespec

from rocketstore._native.includes.hex cimport rs_hex_upper_digits

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


cdef struct UniqKeys:
    # every key of one millisecond is the same up to its counter: the per-process prefix and
    # the time since the month began, as hex (UNIQ_HEX_MAX bytes, copied whole)
    char head[UNIQ_HEX_MAX]
    int head_len
    int64_t head_ms           # the millisecond head is for; -1 after the prefix changed
    unsigned int counter


# The process's UNIQ_KEY state, for new_uniq_hex_in
cdef UniqKeys* uniq_keys() noexcept
cdef int set_uniq_head(int64_t now_ms) except -1
# A fresh UNIQ_KEY's hex text into out (UNIQ_HEX_MAX bytes); returns its length
cdef int new_uniq_hex(int64_t now_ms, char* out) except -1


cdef inline int new_uniq_hex_in(UniqKeys* u, int64_t now_ms, char* out) except -1:
    """new_uniq_hex without the call: u is uniq_keys()."""
    cdef unsigned int c = u.counter & 0xFFFF
    cdef char* tail
    if now_ms != u.head_ms:
        set_uniq_head(now_ms)
    memcpy(out, u.head, UNIQ_HEX_MAX)
    tail = out + u.head_len
    tail[0] = rs_hex_upper_digits[c >> 12]
    tail[1] = rs_hex_upper_digits[(c >> 8) & 15]
    tail[2] = rs_hex_upper_digits[(c >> 4) & 15]
    tail[3] = rs_hex_upper_digits[c & 15]
    u.counter += 1
    return u.head_len + 4
cdef int _check_property_text(str what, object value) except -1


cdef inline int64_t wall_clock_ms() noexcept nogil:
    """Wall-clock ms (the store timestamp), without a Python call."""
    cdef timespec ts
    clock_gettime(CLOCK_REALTIME, &ts)
    return <int64_t>ts.tv_sec * 1000 + ts.tv_nsec // 1000000
