# cython: language_level=3, boundscheck=False, wraparound=False
"""A SEND request's header (SEND_MESSAGE 10 with long field names, SEND_MESSAGE_V2 310 and
SEND_BATCH_MESSAGE 320 with one-letter ones) and its properties text, read natively: the
broker does this once per message.

Values are read as RocketMQ reads them: integers as Java's Long.parseLong (ASCII digits, an
optional sign, at most 19 digits, in the long range; the C++ client's JSON numbers arrive as
ints), booleans as "true"/"false" in any case plus the C++ client's "1"/"0". A missing required
field or a malformed value raises SendHeaderError naming the field's wire name. The names are
rocketstore.common.send_header's.
"""
cimport cython
from cpython.dict cimport PyDict_GetItem, PyDict_SetItem
from cpython.object cimport PyObject
from cpython.unicode cimport PyUnicode_GET_LENGTH, PyUnicode_READ_CHAR
from libc.string cimport memchr, memcmp

cdef extern from "Python.h":
    int PyUnicode_KIND(object text)
    void* PyUnicode_DATA(object text)
    enum: PyUnicode_1BYTE_KIND
    Py_ssize_t PyUnicode_FindChar(object text, Py_UCS4 ch, Py_ssize_t start, Py_ssize_t end,
                                  int direction) except -2
    object PyUnicode_Substring(object text, Py_ssize_t start, Py_ssize_t end)

from rocketstore.broker.processors.send._send_header cimport SendRequestHeader

from rocketstore.common.send_header import SEND_HEADER_FIELD as _FIELD
from rocketstore.common.send_header import SEND_HEADER_FIELDS as _FIELDS
from rocketstore.remoting.headers import HeaderFieldError


class SendHeaderError(ValueError):
    """A SEND header field that is missing or malformed; ``field`` is its wire name."""

    def __init__(self, field, message):
        super().__init__(f"header field {field!r} {message}")
        self.field = field
        self.reason = message


cdef tuple _names(str attribute):
    """(SEND_MESSAGE's wire name, SEND_MESSAGE_V2's) of a SendRequestHeader attribute."""
    field = _FIELD[attribute]
    return (field.name, field.v2_name)


cdef Py_ssize_t _at(str attribute) except -1:
    """Where the frame decoder's typed tuple holds an attribute's value."""
    return _FIELDS.index(_FIELD[attribute])


cdef tuple _PRODUCER_GROUP = _names("producer_group")
cdef tuple _TOPIC = _names("topic")
cdef tuple _DEFAULT_TOPIC = _names("default_topic")
cdef tuple _DEFAULT_QUEUE_NUMS = _names("default_topic_queue_nums")
cdef tuple _QUEUE_ID = _names("queue_id")
cdef tuple _SYS_FLAG = _names("sys_flag")
cdef tuple _BORN_TIMESTAMP = _names("born_timestamp")
cdef tuple _FLAG = _names("flag")
cdef tuple _PROPERTIES = _names("properties")
cdef tuple _RECONSUME_TIMES = _names("reconsume_times")
cdef tuple _UNIT_MODE = _names("unit_mode")
cdef tuple _MAX_RECONSUME_TIMES = _names("max_reconsume_times")
cdef tuple _BATCH = _names("batch")

cdef Py_ssize_t _FIELD_COUNT = len(_FIELDS)
cdef Py_ssize_t _AT_PRODUCER_GROUP = _at("producer_group")
cdef Py_ssize_t _AT_TOPIC = _at("topic")
cdef Py_ssize_t _AT_DEFAULT_TOPIC = _at("default_topic")
cdef Py_ssize_t _AT_DEFAULT_QUEUE_NUMS = _at("default_topic_queue_nums")
cdef Py_ssize_t _AT_QUEUE_ID = _at("queue_id")
cdef Py_ssize_t _AT_SYS_FLAG = _at("sys_flag")
cdef Py_ssize_t _AT_BORN_TIMESTAMP = _at("born_timestamp")
cdef Py_ssize_t _AT_FLAG = _at("flag")
cdef Py_ssize_t _AT_PROPERTIES = _at("properties")
cdef Py_ssize_t _AT_RECONSUME_TIMES = _at("reconsume_times")
cdef Py_ssize_t _AT_UNIT_MODE = _at("unit_mode")
cdef Py_ssize_t _AT_MAX_RECONSUME_TIMES = _at("max_reconsume_times")
cdef Py_ssize_t _AT_BATCH = _at("batch")

cdef long long _LONG_MAX = 9223372036854775807


cdef class SendRequestHeader:
    def __repr__(self):
        return (f"SendRequestHeader(topic={self.topic!r}, queue_id={self.queue_id}, "
                f"sys_flag={self.sys_flag}, batch={self.batch})")


cdef inline object _get(dict ext, tuple names, bint v2):
    cdef PyObject* value = PyDict_GetItem(ext, names[1] if v2 else names[0])
    return None if value == NULL else <object>value


cdef object _name(tuple names, bint v2):
    return names[1] if v2 else names[0]


cdef str _require_str(dict ext, tuple names, bint v2):
    value = _get(ext, names, v2)
    if value is None:
        raise SendHeaderError(_name(names, v2), "is missing")
    return value if type(value) is str else str(value)


cdef long long _parse_long(object value, tuple names, bint v2) except? -1:
    cdef Py_ssize_t n, i = 0
    cdef unsigned int c
    cdef bint negative = False
    cdef unsigned long long acc = 0, limit
    if type(value) is int:
        try:
            return <long long>value
        except OverflowError:
            raise SendHeaderError(_name(names, v2), f"must be a long, got {value!r:.40}") from None
    if type(value) is not str:
        raise SendHeaderError(_name(names, v2), f"must be an integer, got {value!r:.40}")
    n = PyUnicode_GET_LENGTH(value)
    if n > 0:
        c = <unsigned int>PyUnicode_READ_CHAR(value, 0)
        if c == 45 or c == 43:          # '-' or '+'
            negative = c == 45
            i = 1
    if i >= n or n - i > 19:
        raise SendHeaderError(_name(names, v2), f"must be an integer, got {value!r:.40}")
    limit = <unsigned long long>_LONG_MAX + (1 if negative else 0)
    while i < n:
        c = <unsigned int>PyUnicode_READ_CHAR(value, i)
        if c < 48 or c > 57:            # not an ASCII digit
            raise SendHeaderError(_name(names, v2), f"must be an integer, got {value!r:.40}")
        acc = acc * 10 + (c - 48)
        if acc > limit:
            raise SendHeaderError(_name(names, v2), f"must be a long, got {value!r:.40}")
        i += 1
    if negative:
        return -<long long>(acc - 1) - 1
    return <long long>acc


cdef long long _require_long(dict ext, tuple names, bint v2) except? -1:
    value = _get(ext, names, v2)
    if value is None:
        raise SendHeaderError(_name(names, v2), "is missing")
    return _parse_long(value, names, v2)


cdef int _get_bool(dict ext, tuple names, bint v2) except -1:
    """1 true, 0 false or absent."""
    return _bool_of(_get(ext, names, v2), names, v2)


cdef int _bool_of(object value, tuple names, bint v2) except -1:
    if value is None or value is False:
        return 0
    if value is True:
        return 1
    if type(value) is str:
        if value == "false" or value == "true":     # what the Java client sends
            return value == "true"
        text = (<str>value).lower()
        if text == "true" or text == "1":
            return 1
        if text == "false" or text == "0" or text == "":
            return 0
    raise SendHeaderError(_name(names, v2), f"must be true or false, got {value!r:.40}")


def decode_send_header(dict ext not None, bint v2=False):
    """The SEND header of a request's ext fields (v2: the one-letter names)."""
    return read_send_header(ext, v2)


def decode_request_header(dict ext not None, bint v2=False):
    """decode_send_header for a request: a bad field raises the remoting layer's
    HeaderFieldError, which the connection answers SYSTEM_ERROR naming the field."""
    try:
        return read_send_header(ext, v2)
    except SendHeaderError as exc:
        raise HeaderFieldError(exc.field, exc.reason) from None


cdef SendRequestHeader read_send_header(dict ext, bint v2):
    cdef SendRequestHeader h = SendRequestHeader.__new__(SendRequestHeader)
    h.producer_group = _require_str(ext, _PRODUCER_GROUP, v2)
    h.topic = _require_str(ext, _TOPIC, v2)
    h.default_topic = _require_str(ext, _DEFAULT_TOPIC, v2)
    h.default_topic_queue_nums = _require_long(ext, _DEFAULT_QUEUE_NUMS, v2)
    h.queue_id = _require_long(ext, _QUEUE_ID, v2)
    h.sys_flag = _require_long(ext, _SYS_FLAG, v2)
    h.born_timestamp = _require_long(ext, _BORN_TIMESTAMP, v2)
    h.flag = _require_long(ext, _FLAG, v2)
    value = _get(ext, _PROPERTIES, v2)
    h.properties = None if value is None else (value if type(value) is str else str(value))
    value = _get(ext, _RECONSUME_TIMES, v2)
    h.reconsume_times = 0 if value is None else _parse_long(value, _RECONSUME_TIMES, v2)
    value = _get(ext, _MAX_RECONSUME_TIMES, v2)
    h.max_reconsume_times = None if value is None else _parse_long(value, _MAX_RECONSUME_TIMES, v2)
    h.unit_mode = _get_bool(ext, _UNIT_MODE, v2)
    h.batch = _get_bool(ext, _BATCH, v2)
    return h


cdef SendRequestHeader read_send_struct(tuple fields, bint v2):
    """The SEND header of a typed decode of its ext fields (the frame decoder's SEND path):
    the values in SEND_HEADER_FIELDS' order, each a str or None, the required ones present."""
    cdef SendRequestHeader h = SendRequestHeader.__new__(SendRequestHeader)
    if len(fields) != _FIELD_COUNT:
        raise ValueError(f"a SEND header has {_FIELD_COUNT} fields, got {len(fields)}")
    h.producer_group = fields[_AT_PRODUCER_GROUP]
    h.topic = fields[_AT_TOPIC]
    h.default_topic = fields[_AT_DEFAULT_TOPIC]
    h.default_topic_queue_nums = _parse_long(fields[_AT_DEFAULT_QUEUE_NUMS], _DEFAULT_QUEUE_NUMS, v2)
    h.queue_id = _parse_long(fields[_AT_QUEUE_ID], _QUEUE_ID, v2)
    h.sys_flag = _parse_long(fields[_AT_SYS_FLAG], _SYS_FLAG, v2)
    h.born_timestamp = _parse_long(fields[_AT_BORN_TIMESTAMP], _BORN_TIMESTAMP, v2)
    h.flag = _parse_long(fields[_AT_FLAG], _FLAG, v2)
    h.properties = fields[_AT_PROPERTIES]
    value = fields[_AT_RECONSUME_TIMES]
    h.reconsume_times = 0 if value is None else _parse_long(value, _RECONSUME_TIMES, v2)
    value = fields[_AT_MAX_RECONSUME_TIMES]
    h.max_reconsume_times = None if value is None else _parse_long(value, _MAX_RECONSUME_TIMES, v2)
    h.unit_mode = _bool_of(fields[_AT_UNIT_MODE], _UNIT_MODE, v2)
    h.batch = _bool_of(fields[_AT_BATCH], _BATCH, v2)
    return h


def parse_properties_text(text):
    """RocketMQ's string2messageProperties: ``name\\x01value`` pairs joined by ``\\x02``; a pair
    with an empty name or value is dropped; a later pair with the same name wins."""
    return read_properties_text(text)


cdef inline int _wait_state(object text, Py_ssize_t start, Py_ssize_t split, Py_ssize_t end) noexcept:
    """WAIT_ABSENT unless text[start:split] is "WAIT"; else what its value text[split+1:end] is."""
    if split - start != 4 or PyUnicode_READ_CHAR(text, start) != 87 \
            or PyUnicode_READ_CHAR(text, start + 1) != 65 or PyUnicode_READ_CHAR(text, start + 2) != 73 \
            or PyUnicode_READ_CHAR(text, start + 3) != 84:          # W A I T
        return WAIT_ABSENT
    if end - split == 5 and PyUnicode_READ_CHAR(text, split + 1) == 116 \
            and PyUnicode_READ_CHAR(text, split + 2) == 114 and PyUnicode_READ_CHAR(text, split + 3) == 117 \
            and PyUnicode_READ_CHAR(text, split + 4) == 101:        # t r u e
        return WAIT_TRUE
    if end - split == 6 and PyUnicode_READ_CHAR(text, split + 1) == 102 \
            and PyUnicode_READ_CHAR(text, split + 2) == 97 and PyUnicode_READ_CHAR(text, split + 3) == 108 \
            and PyUnicode_READ_CHAR(text, split + 4) == 115 \
            and PyUnicode_READ_CHAR(text, split + 5) == 101:        # f a l s e
        return WAIT_FALSE
    return WAIT_OTHER


cdef inline bint _took_wait(object text, Py_ssize_t start, Py_ssize_t split, Py_ssize_t end,
                            int* wait) noexcept:
    """Where wait is given and text[start:end] is the WAIT pair: wait set from its value, True
    (the pair stays out of the dict)."""
    cdef int state
    if wait == NULL:
        return False
    state = _wait_state(text, start, split, end)
    if state == WAIT_ABSENT:
        return False
    wait[0] = state
    return True


cdef dict read_properties_text(object text, Py_ssize_t* value_with_separator=NULL, int* wait=NULL):
    """value_with_separator: where given, set to the start of the first pair whose value holds
    another \x01 (left as it is when none). The walk keeps the next \x01 at hand, so finding
    one costs no search more than parsing does: one for each separator. wait: where given,
    the WAIT property is left out of the dict and set to what its value is (WAIT_TRUE,
    WAIT_FALSE, WAIT_OTHER; left as it is when absent)."""
    cdef dict out = {}
    cdef Py_ssize_t start = 0, end, split, n, sep
    if not text:
        return out
    if type(text) is not str:
        raise TypeError(f"properties must be str, got {type(text).__name__}")
    if PyUnicode_KIND(text) == PyUnicode_1BYTE_KIND:
        return _read_one_byte_text(text, out, value_with_separator, wait)
    n = PyUnicode_GET_LENGTH(text)
    sep = PyUnicode_FindChar(text, 1, 0, n, 1)     # the first \x01 at or after start
    while start <= n:
        # one pair: text[start:end], end at the next \x02 or the end of the text
        end = PyUnicode_FindChar(text, 2, start, n, 1)
        if end == -1:
            end = n
        split = sep if sep != -1 and sep < end else -1
        if split != -1:
            sep = PyUnicode_FindChar(text, 1, split + 1, n, 1)
            if sep != -1 and sep < end:         # a second \x01 in this pair's value
                if value_with_separator != NULL and value_with_separator[0] == -1 \
                        and start < split < end - 1:
                    value_with_separator[0] = start
                sep = PyUnicode_FindChar(text, 1, end, n, 1)
            if start < split < end - 1 and not _took_wait(text, start, split, end, wait):
                PyDict_SetItem(out, PyUnicode_Substring(text, start, split),
                               PyUnicode_Substring(text, split + 1, end))
        start = end + 1
    return out


cdef enum:
    _NAMES_KEPT = 16        # property names remembered as str (the first ones seen)
    _NAME_KEPT_BELOW = 32   # of up to this many characters

cdef list _kept_names = []  # one-byte strs: a property name repeats from one send to the next


cdef object _name_of(object text, const char* p, Py_ssize_t n, Py_ssize_t start):
    """text[start:start + n] (one-byte kind, its characters at p): a kept str when one is equal
    (no allocation, its hash already made), else a new one, kept while there is room."""
    cdef object name
    for name in _kept_names:
        if PyUnicode_GET_LENGTH(name) == n and memcmp(PyUnicode_DATA(name), p, n) == 0:
            return name
    name = PyUnicode_Substring(text, start, start + n)
    if n < _NAME_KEPT_BELOW and len(_kept_names) < _NAMES_KEPT:
        _kept_names.append(name)
    return name


cdef dict _read_one_byte_text(object text, dict out, Py_ssize_t* value_with_separator, int* wait):
    """read_properties_text's walk over a one-byte (Latin-1) text's characters with memchr:
    the same pairs, the same separator and WAIT findings."""
    cdef const char* p = <const char*>PyUnicode_DATA(text)
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text), start = 0, end, split
    cdef const char* found
    while start <= n:
        found = <const char*>memchr(p + start, 2, n - start)
        end = found - p if found != NULL else n
        found = <const char*>memchr(p + start, 1, end - start)
        if found != NULL:
            split = found - p
            if value_with_separator != NULL and value_with_separator[0] == -1 \
                    and start < split < end - 1 \
                    and memchr(p + split + 1, 1, end - split - 1) != NULL:   # a second \x01
                value_with_separator[0] = start
            if start < split < end - 1 and not _took_wait(text, start, split, end, wait):
                PyDict_SetItem(out, _name_of(text, p + start, split - start, start),
                               PyUnicode_Substring(text, split + 1, end))
        start = end + 1
    return out
