# Put results, filled in place by the record writer.
cimport cython
from libc.stdint cimport int32_t, int64_t

from rocketstore._native.message cimport UNIQ_HEX_MAX

# PutMessageStatus ordinals (RocketMQ's enum order), for C
cdef enum:
    S_PUT_OK = 0
    S_MESSAGE_ILLEGAL = 6
    S_PROPERTIES_SIZE_EXCEEDED = 7
    S_UNKNOWN_ERROR = 9


@cython.final
cdef class PutMessageResult:
    cdef readonly int status_code
    cdef readonly int64_t commitlog_offset
    cdef readonly int64_t queue_offset
    cdef readonly int32_t wrote_bytes
    cdef readonly int64_t store_timestamp
    cdef object _uniq                   # the message's UNIQ_KEY as a str, or:
    cdef int _uniq_len                  # > 0: a generated one, as hex text (made a str on demand)
    cdef char _uniq_hex[UNIQ_HEX_MAX]
    cdef bytes store_host_raw
    cdef int32_t store_port


@cython.final
cdef class PutMessagesResult:
    cdef readonly int status_code
    cdef readonly Py_ssize_t count      # messages in the batch
    cdef readonly Py_ssize_t stored     # how many were stored (== count when status is PUT_OK)
    cdef readonly object commitlog_offsets   # int64 array
    cdef readonly object queue_offsets       # int64 array
    cdef readonly object sizes               # int32 array
    cdef readonly int64_t store_timestamp
    cdef list messages      # the batch: UNIQ_KEYs are read from it on demand
    cdef bytes store_host_raw
    cdef int32_t store_port


# A result carrying only a status (a put that stored nothing)
cdef PutMessageResult status_result(int code)
