# The record writer and its results, shared with the put path (which calls _append under the
# put lock).
cimport cython
from cpython.object cimport PyObject
from libc.stdint cimport int32_t, int64_t

from rocketstore._native.mapped_file cimport MappedFile
from rocketstore._native.message cimport UNIQ_HEX_MAX, Message
from rocketstore._native.topic_queue_table cimport QueueCounters, TopicQueueTable


# PutMessageStatus ordinals (RocketMQ's enum order), for C
cdef enum:
    S_PUT_OK = 0
    S_SERVICE_NOT_AVAILABLE = 4
    S_CREATE_MAPPED_FILE_FAILED = 5
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
    cdef readonly object reason         # why a put stored nothing (MESSAGE_ILLEGAL, ...)


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
    cdef readonly object reason         # why the batch was refused, when _prepare says


# A result carrying only a status (a put that stored nothing)
cdef PutMessageResult status_result(int code)


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
    const unsigned char* born_host    # the writer's own host, or NULL: born_buf
    const unsigned char* store_host   # the writer's own host, or NULL: store_buf
    int32_t born_host_len             # 4 or 16
    int32_t born_port
    int32_t store_host_len
    int32_t store_port
    unsigned char born_buf[16]        # a message's own hosts
    unsigned char store_buf[16]
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
    cdef str last_topic                     # _set_topic's one-entry cache
    cdef QueueCounters last_counters
    cdef int64_t last_version
    cdef const char* last_topic_text        # last_topic's UTF-8
    cdef int32_t last_topic_len
    cdef object rejection                   # why _prepare (or _room) last refused a message
    cdef int alloc_errno                    # errno of the last failed allocation (0: none)

    cdef int _grow_slices(self, Py_ssize_t need) except -1
    cdef int _grow_specs(self, Py_ssize_t need) except -1
    cdef int _own_host(self, object host, unsigned char* raw_out, int32_t* len_out,
                       int32_t* port_out) except -1
    cdef int _set_topic(self, str topic) except -1
    cdef int _prepare(self, Message msg, int queue_id, RecordSpec* s, Py_ssize_t* slice_pos,
                      int64_t now_ms, Py_ssize_t index) except -1
    cdef Py_ssize_t _props_slow(self, Message msg, dict props, Py_ssize_t slice_pos,
                                int64_t now_ms, Py_ssize_t index) except -1
    cdef int _room(self, MappedFile mf, int64_t end)
    cdef PutMessageResult _no_space(self)
    cdef void _write_blank(self, MappedFile mf) noexcept
    cdef object _append(self, MappedFile mf, Message message, int queue_id)
