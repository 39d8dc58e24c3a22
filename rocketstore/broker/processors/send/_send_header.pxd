# A SEND request's header fields read from its ext fields (the broker's per-message decode).
cimport cython


@cython.final
cdef class SendRequestHeader:
    cdef public str producer_group
    cdef public str topic
    cdef public str default_topic
    cdef public object properties          # str or None
    cdef public long long default_topic_queue_nums
    cdef public long long queue_id
    cdef public long long sys_flag
    cdef public long long born_timestamp
    cdef public long long flag
    cdef public long long reconsume_times
    cdef public object max_reconsume_times  # int or None
    cdef public bint unit_mode
    cdef public bint batch


# The same as decode_send_header / parse_properties_text, for native callers (no Python call)
cdef SendRequestHeader read_send_header(dict ext, bint v2)
cdef enum:
    WAIT_ABSENT = 0     # what read_properties_text found of the WAIT property
    WAIT_TRUE = 1
    WAIT_FALSE = 2
    WAIT_OTHER = 3
cdef dict read_properties_text(object text, Py_ssize_t* value_with_separator=*, int* wait=*)
cdef SendRequestHeader read_send_struct(tuple fields, bint v2)
