# The send path's statistics update (the send path calls PutCounts.record from C).
cimport cython


cdef class Counter:
    cdef public long long value
    cdef public long long times


@cython.final
cdef class PutCounts:
    cdef dict topics
    cdef object new_topic
    cdef object new_queue
    cdef bint queue_stats

    cpdef record(self, str topic, Py_ssize_t queue_id, long long messages, long long size)
