# The topic queue table, shared with the record writer (which advances the counters itself).
cimport cython
from libc.stdint cimport int64_t

cdef enum:
    # Queue ids index a per-topic array; RocketMQ topics have at most a few thousand queues.
    MAX_QID = 65535


@cython.final
cdef class QueueCounters:
    cdef int64_t* next
    cdef int n

    cdef int64_t* slot(self, int queue_id) except NULL


cdef class TopicQueueTable:
    cdef dict topics
    cdef readonly int64_t version    # bumped when a topic's counters are dropped

    cdef QueueCounters counters(self, str topic, bint validate=*)
