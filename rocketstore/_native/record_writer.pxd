# The record writer, shared with the put path (which calls _append under the put lock).
cimport cython
from cpython.object cimport PyObject
from libc.stdint cimport int32_t, int64_t

from rocketstore._native.mapped_file cimport MappedFile
from rocketstore._native.message cimport Message
from rocketstore._native.topic_queue_table cimport QueueCounters, TopicQueueTable


cdef struct Slice:
    const char* p
    Py_ssize_t n

cdef struct RecordSpec:
    int32_t total
    int32_t queue_id
    int32_t flag
    int32_t sys_flag
    int32_t reconsume
    int64_t born_ts           # -1: the store timestamp
    int64_t prepared_off
    const char* body
    int32_t body_len
    const char* topic
    int32_t topic_len
    int32_t props_len
    Py_ssize_t slice_first
    Py_ssize_t slice_count    # name, value, name, value ...
    unsigned char born_host[16]
    int32_t born_host_len
    int32_t born_port
    unsigned char store_host[16]
    int32_t store_host_len
    int32_t store_port
    bint counted              # gets a queue offset (not prepared/rollback)
    PyObject* counters        # the topic's QueueCounters (kept alive by the queue table);
                              # not a pointer into its array, which a later spec may grow


@cython.final
cdef class RecordWriter:
    cdef readonly TopicQueueTable queue_table
    cdef readonly int64_t file_size
    cdef readonly int64_t max_message_size
    cdef bytes store_host_raw
    cdef int32_t store_port
    cdef int32_t default_born_port
    cdef Slice* slices
    cdef Py_ssize_t slices_cap
    cdef RecordSpec* specs
    cdef Py_ssize_t specs_cap
    cdef readonly str store_host
    cdef unsigned char store_host_c[16]     # the raw hosts above, for a memcpy per record
    cdef int32_t store_host_len
    cdef unsigned char default_born_c[16]
    cdef int32_t default_born_len
    cdef str last_topic                     # _counters' one-entry cache
    cdef QueueCounters last_counters
    cdef int64_t last_version

    cdef int _grow_slices(self, Py_ssize_t need) except -1
    cdef int _grow_specs(self, Py_ssize_t need) except -1
    cdef int _host(self, object host, unsigned char* raw_out, int32_t* len_out,
                   int32_t* port_out, bint born) except -1
    cdef QueueCounters _counters(self, str topic)
    cdef int _prepare(self, Message msg, int queue_id, RecordSpec* s, Py_ssize_t* slice_pos,
                      int64_t now_ms, Py_ssize_t index) except -1
    cdef void _write_blank(self, MappedFile mf) noexcept
    cdef object _append(self, MappedFile mf, Message message, int queue_id)
