# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""RecordWriter: messages encoded straight into a CommitLog MappedFile, and the put results
it returns (PutMessageStatus, PutMessageResult, PutMessagesResult).

Encoding is two-phase: ``_prepare`` (GIL held) validates one message and gathers pointers and
lengths of everything it will write into a RecordSpec; ``_write_record`` (no GIL needed) lays
the record out at its final place in the mapped region, CRC included. A batch prepares every
message first, so a bad one rejects the whole batch before a byte is written.
"""
import enum
import logging
import os

from cpython.buffer cimport PyBUF_C_CONTIGUOUS, PyBUF_FORMAT, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_Next
from cpython.unicode cimport PyUnicode_AsUTF8AndSize
from libc.stdint cimport int32_t, int64_t, uint32_t
from libc.stdlib cimport free, realloc
from libc.string cimport memcmp, memcpy, memset

from rocketstore._native.hosts cimport msg_id_text
from rocketstore._native.includes.atomic cimport rs_load_i64, rs_release_fence
from rocketstore._native.includes.copy cimport rs_copy_small
from rocketstore._native.includes.byteorder cimport rs_put_u16, rs_put_u32, rs_put_u64
from rocketstore._native.includes.crc32 cimport rs_crc32, rs_crc32_init
from rocketstore._native.includes.python cimport (
    PyDict_Contains, PyDict_GET_SIZE, PyErr_Clear, PyUnicode_AsUTF8AndSize_or_null,
    PyUnicode_DATA, PyUnicode_DecodeASCII, PyUnicode_GET_LENGTH, PyUnicode_IS_COMPACT_ASCII,
)
from rocketstore._native.includes.scan cimport rs_has_byte_below3
from rocketstore._native.includes.vocabulary cimport (
    PROPERTY_KEYS, PROPERTY_KEYS_LEN, PROPERTY_TAGS, PROPERTY_TAGS_LEN, PROPERTY_UNIQ_KEY,
    PROPERTY_UNIQ_KEY_LEN,
)
from rocketstore._native.mapped_file cimport MappedFile
from rocketstore._native.message cimport (
    Message, UniqKeys, _check_property_text, new_uniq_hex_in, uniq_keys,
    wall_clock_ms,
)
from rocketstore._native.record cimport (
    BLANK_MAGIC, END_FILE_MIN_BLANK_LENGTH, MAX_PROPERTIES_LENGTH, MESSAGE_MAGIC, MESSAGE_SYS_FLAGS,
    MIN_RECORD_SIZE, SYSFLAG_BORNHOST_V6, SYSFLAG_PREPARED, SYSFLAG_ROLLBACK,
    SYSFLAG_STOREHOST_V6, SYSFLAG_TRANSACTION_MASK,
)
from rocketstore._native.topic_queue_table cimport MAX_QID, QueueCounters, TopicQueueTable

import numpy as np

from rocketstore._native.hosts import parse_host
from rocketstore._native.message import PROPERTY_KEYS as _PROPERTY_KEYS
from rocketstore._native.message import PROPERTY_TAGS as _PROPERTY_TAGS
from rocketstore._native.message import PROPERTY_UNIQ_KEY as _PROPERTY_UNIQ_KEY

_log = logging.getLogger(__name__)
from rocketstore._native.topic_queue_table import TopicQueueTable

rs_crc32_init()

cdef str _UNIQ_KEY = _PROPERTY_UNIQ_KEY     # typed: no module-dict lookup on the put path
cdef str _TAGS = _PROPERTY_TAGS             # the keys Message's setters use: known good names
cdef str _KEYS = _PROPERTY_KEYS
cdef UniqKeys* _uniq_keys = uniq_keys()


# ---- results ---------------------------------------------------------------------------------

class PutMessageStatus(enum.IntEnum):
    """RocketMQ's PutMessageStatus, in its order (the results carry these ordinals)."""

    PUT_OK = 0
    FLUSH_DISK_TIMEOUT = 1
    FLUSH_SLAVE_TIMEOUT = 2
    SLAVE_NOT_AVAILABLE = 3
    SERVICE_NOT_AVAILABLE = 4
    CREATE_MAPPED_FILE_FAILED = 5
    MESSAGE_ILLEGAL = 6
    PROPERTIES_SIZE_EXCEEDED = 7
    OS_PAGE_CACHE_BUSY = 8
    UNKNOWN_ERROR = 9


cdef tuple _PUT_STATUS = tuple(PutMessageStatus)


cdef class PutMessageResult:
    """Outcome of one put: status, where it went, and its ids."""

    @property
    def status(self):
        return _PUT_STATUS[self.status_code]

    @property
    def ok(self):
        return self.status_code == S_PUT_OK

    @property
    def uniq_key(self):
        """The message's UNIQ_KEY (the client message id); None when nothing was stored."""
        if self._uniq_len:
            self._uniq = PyUnicode_DecodeASCII(self._uniq_hex, self._uniq_len, NULL)
            self._uniq_len = 0
        return self._uniq

    @property
    def msg_id(self):
        """offsetMsgId (store host:port + CommitLog offset, hex); None when nothing was stored."""
        if self.status_code != S_PUT_OK or self.store_host_raw is None:
            return None
        return msg_id_text(<const unsigned char*>PyBytes_AS_STRING(self.store_host_raw),
                           PyBytes_GET_SIZE(self.store_host_raw), self.store_port,
                           self.commitlog_offset)

    def __repr__(self):
        return (f"PutMessageResult(status={self.status.name}, msg_id={self.msg_id}, "
                f"commitlog_offset={self.commitlog_offset}, queue_offset={self.queue_offset}, "
                f"wrote_bytes={self.wrote_bytes})")


def put_result(int status_code, reason=None):
    """A result carrying only a status (a put that stored nothing), and why."""
    cdef PutMessageResult r = status_result(status_code)
    r.reason = reason
    return r


def with_status(PutMessageResult res not None, int status_code):
    """The same stored message reported with another status (FLUSH_DISK_TIMEOUT ...)."""
    res.status_code = status_code
    return res


def rejected_batch(Py_ssize_t count, int status_code, reason=None):
    """A batch of count messages of which none was stored, and why."""
    cdef PutMessagesResult res = PutMessagesResult.__new__(PutMessagesResult)
    res.count = count
    res.stored = 0
    res.status_code = status_code
    res.reason = reason
    return res


def fail_batch(PutMessagesResult res not None, int status_code, reason=None):
    """Mark a batch cut short: res.stored messages went in, the rest get status_code."""
    res.status_code = status_code
    if reason is not None:
        res.reason = reason
    return res


cdef PutMessageResult status_result(int code):
    cdef PutMessageResult r = PutMessageResult.__new__(PutMessageResult)
    r.status_code = code
    r.commitlog_offset = -1
    r.queue_offset = -1
    return r


cdef class PutMessagesResult:
    """Outcome of a batch put: one status and, per message, offsets and ids (a sequence of
    PutMessageResult built on demand; the offsets are also numpy arrays)."""

    @property
    def status(self):
        return _PUT_STATUS[self.status_code]

    @property
    def ok(self):
        return self.status_code == S_PUT_OK

    @property
    def wrote_bytes(self):
        """The bytes of the stored messages (a loop over the sizes' buffer: a batch's reply
        and statistics read it once per request, numpy's sum costs more than the loop)."""
        cdef Py_buffer view
        cdef const int32_t* sizes
        cdef Py_ssize_t i, n
        cdef int64_t total = 0
        if self.sizes is None:
            return 0
        PyObject_GetBuffer(self.sizes, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT)
        try:
            n = view.len // 4
            if view.itemsize != 4 or view.format == NULL or view.format[0] != b'i' \
                    or view.format[1] != 0 or self.stored > n:   # another int32 spelling
                return int(self.sizes[:self.stored].sum())
            sizes = <const int32_t*>view.buf
            for i in range(self.stored):
                total += sizes[i]
        finally:
            PyBuffer_Release(&view)
        return total

    @property
    def msg_ids(self):
        return [self[i].msg_id for i in range(self.stored)]

    def __len__(self):
        return self.count

    def __getitem__(self, Py_ssize_t i):
        cdef PutMessageResult r
        if i < 0:
            i += self.count
        if i < 0 or i >= self.count:
            raise IndexError("batch result index out of range")
        if i >= self.stored:
            return status_result(self.status_code if self.status_code != S_PUT_OK
                                 else S_UNKNOWN_ERROR)
        r = PutMessageResult.__new__(PutMessageResult)
        # stored messages keep PUT_OK unless the batch's status concerns them all (a flush
        # or replication timeout); a batch cut short fails only the unstored rest
        r.status_code = self.status_code if self.stored == self.count else S_PUT_OK
        r.commitlog_offset = self.commitlog_offsets[i]
        r.queue_offset = self.queue_offsets[i]
        r.wrote_bytes = self.sizes[i]
        r.store_timestamp = self.store_timestamp
        r._uniq = (<Message>self.messages[i]).uniq_key if self.messages is not None else None
        r.store_host_raw = self.store_host_raw
        r.store_port = self.store_port
        return r

    def __iter__(self):
        for i in range(self.count):
            yield self[i]

    def __repr__(self):
        return f"PutMessagesResult(status={self.status.name}, count={self.count}, stored={self.stored})"


# ---- encoding --------------------------------------------------------------------------------

cdef inline void _write_record(char* dst, const RecordSpec* s, const Slice* slices,
                               int64_t phy_offset, int64_t queue_offset,
                               int64_t store_ts) noexcept nogil:
    cdef char* p = dst
    cdef const Slice* sl = slices + s.slice_first
    cdef const Slice* sl_end = sl + s.slice_count
    cdef const unsigned char* host
    cdef uint32_t crc = rs_crc32(0, s.body, s.body_len) & 0x7FFFFFFF
    # TOTALSIZE and MAGICCODE go in last (see the end): until then the record reads as
    # "no data" (zeros), never as a valid header over a partial record
    rs_put_u32(p + 8, crc)
    rs_put_u32(p + 12, s.queue_id)
    rs_put_u32(p + 16, s.flag)
    rs_put_u64(p + 20, queue_offset)
    rs_put_u64(p + 28, phy_offset)
    rs_put_u32(p + 36, s.sys_flag)
    rs_put_u64(p + 40, s.born_ts if s.born_ts >= 0 else store_ts)
    p += 48
    host = s.born_host if s.born_host != NULL else s.born_buf
    if s.born_host_len == 4:
        memcpy(p, host, 4)
    else:
        memcpy(p, host, 16)
    rs_put_u32(p + s.born_host_len, s.born_port)
    p += s.born_host_len + 4
    rs_put_u64(p, store_ts)
    p += 8
    host = s.store_host if s.store_host != NULL else s.store_buf
    if s.store_host_len == 4:
        memcpy(p, host, 4)
    else:
        memcpy(p, host, 16)
    rs_put_u32(p + s.store_host_len, s.store_port)
    p += s.store_host_len + 4
    rs_put_u32(p, s.reconsume)
    rs_put_u64(p + 4, s.prepared_off)
    rs_put_u32(p + 12, s.body_len)
    p += 16
    memcpy(p, s.body, s.body_len)
    p += s.body_len
    p[0] = <char>s.topic_len
    rs_copy_small(p + 1, s.topic, s.topic_len)
    p += 1 + s.topic_len
    rs_put_u16(p, <unsigned short>s.props_len)
    p += 2
    while sl < sl_end:      # name \x01 value, pairs joined by \x02
        rs_copy_small(p, sl[0].p, sl[0].n)
        p += sl[0].n
        p[0] = 1
        rs_copy_small(p + 1, sl[1].p, sl[1].n)
        p += 1 + sl[1].n
        sl += 2
        if sl < sl_end:
            p[0] = 2
            p += 1
    rs_release_fence()
    rs_put_u32(dst + 4, MESSAGE_MAGIC)
    rs_put_u32(dst, s.total)


cdef inline const char* _text(object s, Py_ssize_t* n) except NULL:
    """UTF-8 bytes of a str: ASCII strings are their own UTF-8 (no call, no cache)."""
    if PyUnicode_IS_COMPACT_ASCII(s):
        n[0] = PyUnicode_GET_LENGTH(s)
        return <const char*>PyUnicode_DATA(s)
    return PyUnicode_AsUTF8AndSize(s, n)


cdef inline bint _plain_text(object text, Slice* out) noexcept:
    """out = the UTF-8 of a str property text that needs no check beyond this one: not
    empty, no separator (\\x01, \\x02) or NUL. False for anything else (a str subclass,
    no UTF-8 form, ...): the slow path checks it and refuses in its own order."""
    if type(text) is not str:
        return False
    if PyUnicode_IS_COMPACT_ASCII(text):
        out.p = <const char*>PyUnicode_DATA(text)
        out.n = PyUnicode_GET_LENGTH(text)
    else:
        out.p = PyUnicode_AsUTF8AndSize_or_null(text, &out.n)
        if out.p == NULL:
            PyErr_Clear()
            return False
    return out.n != 0 and not rs_has_byte_below3(out.p, out.n)


cdef inline Py_ssize_t _uniq_pair(Message msg, bint in_dict, int64_t now_ms,
                                  Slice* sl) except -1:
    """Settle msg's generated UNIQ_KEY: none when the dict has one (the dict's wins), else
    the one generated before or a new one. When there is one, its pair goes into sl[0..1],
    after the dict's pairs, where inserting it into the dict used to put it (both texts ASCII
    without separators: a constant and hex digits). Returns the pair's length with its
    separators (0 when none)."""
    if in_dict:
        msg._uniq_len = 0
    elif msg._uniq_len == 0:
        msg._uniq_len = new_uniq_hex_in(_uniq_keys, now_ms, msg._uniq_hex)
    if msg._uniq_len == 0:
        return 0
    sl[0].p = PROPERTY_UNIQ_KEY
    sl[0].n = PROPERTY_UNIQ_KEY_LEN
    sl[1].p = msg._uniq_hex
    sl[1].n = msg._uniq_len
    return PROPERTY_UNIQ_KEY_LEN + msg._uniq_len + 2


cdef str _where(Py_ssize_t index):
    """Error-message prefix naming the batch entry (built only when raising)."""
    return "" if index < 0 else f"messages[{index}]."


cdef class RecordWriter:
    """Encodes messages into CommitLog MappedFiles and owns the topic queue table.

    The CommitLog calls it under its put lock; it never rolls files itself: when a record
    does not fit it writes the END_FILE blank and reports end-of-file. It never writes past
    the blocks a file has on disk: it allocates more first (MappedFile.reserve), and when the
    disk has no room the put stores nothing and says CREATE_MAPPED_FILE_FAILED."""

    def __cinit__(self):
        self.slices = NULL
        self.specs = NULL

    def __init__(self, int64_t file_size, int64_t max_message_size, str store_host,
                 TopicQueueTable queue_table=None):
        if file_size < 64:
            raise ValueError(f"file_size must be >= 64 bytes, got {file_size}")
        if max_message_size <= 0:
            raise ValueError(f"max_message_size must be positive, got {max_message_size}")
        self.file_size = file_size
        self.max_message_size = max_message_size
        self.store_host = store_host
        raw, port = parse_host(store_host)
        self.store_host_raw = raw
        self.store_port = port
        self.default_born_port = port
        self.store_host_len = self.default_born_len = <int32_t>len(raw)
        memcpy(self.store_host_c, PyBytes_AS_STRING(raw), self.store_host_len)
        memcpy(self.default_born_c, PyBytes_AS_STRING(raw), self.default_born_len)
        self.queue_table = queue_table if queue_table is not None else TopicQueueTable()
        self._grow_slices(64)
        self._grow_specs(1)

    def __dealloc__(self):
        free(self.slices)
        free(self.specs)

    cdef int _grow_slices(self, Py_ssize_t need) except -1:
        cdef Py_ssize_t cap = max(need, self.slices_cap * 2)
        cdef Slice* s = <Slice*>realloc(self.slices, cap * sizeof(Slice))
        if s == NULL:
            raise MemoryError()
        self.slices = s
        self.slices_cap = cap
        return 0

    cdef int _grow_specs(self, Py_ssize_t need) except -1:
        cdef Py_ssize_t cap = max(need, self.specs_cap * 2)
        cdef RecordSpec* s = <RecordSpec*>realloc(self.specs, cap * sizeof(RecordSpec))
        if s == NULL:
            raise MemoryError()
        self.specs = s
        self.specs_cap = cap
        return 0

    cdef int _own_host(self, object host, unsigned char* raw_out, int32_t* len_out,
                       int32_t* port_out) except -1:
        """A message's own born or store host into raw_out (4 or 16 bytes)."""
        cdef bytes raw
        raw, port = parse_host(host)
        port_out[0] = port
        len_out[0] = PyBytes_GET_SIZE(raw)
        memcpy(raw_out, PyBytes_AS_STRING(raw), len_out[0])
        return 0

    cdef int _set_topic(self, str topic) except -1:
        """Make topic the cached one: its queue counters (one pointer compare per put
        instead of a dict lookup, redone when the table drops counters) and its text."""
        cdef Py_ssize_t n
        self.last_counters = self.queue_table.counters(topic)    # validates a new topic
        self.last_topic_text = _text(topic, &n)
        self.last_topic_len = <int32_t>n
        self.last_topic = topic
        self.last_version = self.queue_table.version
        return 0

    cdef int _prepare(self, Message msg, int queue_id, RecordSpec* s, Py_ssize_t* slice_pos,
                      int64_t now_ms, Py_ssize_t index) except -1:
        """Fill s for msg; returns S_PUT_OK or another status code. Raises for bad arguments."""
        cdef Py_ssize_t pos = 0, props_len = 0, nprops, j
        cdef PyObject* key
        cdef PyObject* value
        cdef dict props
        cdef Slice* sl
        cdef bint plain = True, has_uniq = False
        # borrowed: msg holds them, and nothing here runs Python code that could drop them
        cdef PyObject* topic = <PyObject*>msg.topic
        cdef PyObject* body = <PyObject*>msg.body
        if queue_id < 0 or queue_id > MAX_QID:
            raise ValueError(f"{_where(index)}queue_id must be in [0, {MAX_QID}], "
                             f"got {queue_id}")
        if topic != <PyObject*>self.last_topic or self.last_version != self.queue_table.version:
            self._set_topic(msg.topic)
        if queue_id >= self.last_counters.n:
            self.last_counters.slot(queue_id)               # grow it now, while preparing
        s.counters = <PyObject*>self.last_counters
        if body == <PyObject*>None:
            raise TypeError(f"{_where(index)}body must be bytes, got None")
        s.body = PyBytes_AS_STRING(<object>body)
        s.body_len = <int32_t>PyBytes_GET_SIZE(<object>body)
        if PyBytes_GET_SIZE(<object>body) > self.max_message_size:
            self.rejection = (f"{_where(index)}body of {PyBytes_GET_SIZE(msg.body):,} bytes is "
                              f"over max_message_size ({self.max_message_size:,} bytes)")
            return S_MESSAGE_ILLEGAL
        s.topic = self.last_topic_text
        s.topic_len = self.last_topic_len
        props = msg._props
        if props is None:
            props = msg._props = {}
        nprops = PyDict_GET_SIZE(props)
        if slice_pos[0] + 2 * nprops + 2 > self.slices_cap:
            self._grow_slices(slice_pos[0] + 2 * nprops + 2)
        # One walk of the dict for plain pairs (str names and values that need no refusal);
        # anything else goes to _props_slow, which checks and refuses in its own order.
        sl = self.slices + slice_pos[0]
        for j in range(nprops):
            PyDict_Next(props, &pos, &key, &value)
            if <object>key is _TAGS:
                sl[0].p = PROPERTY_TAGS
                sl[0].n = PROPERTY_TAGS_LEN
            elif <object>key is _KEYS:
                sl[0].p = PROPERTY_KEYS
                sl[0].n = PROPERTY_KEYS_LEN
            else:
                if not _plain_text(<object>key, &sl[0]):
                    plain = False
                    break
                if (sl[0].n == PROPERTY_UNIQ_KEY_LEN
                        and memcmp(sl[0].p, PROPERTY_UNIQ_KEY, PROPERTY_UNIQ_KEY_LEN) == 0):
                    has_uniq = True
            if not _plain_text(<object>value, &sl[1]):
                plain = False
                break
            props_len += sl[0].n + sl[1].n + 2
            sl += 2
        if plain:
            props_len += _uniq_pair(msg, has_uniq, now_ms, sl)
        else:
            props_len = self._props_slow(msg, props, slice_pos[0], now_ms, index)
        nprops = PyDict_GET_SIZE(props) + (msg._uniq_len > 0)
        if nprops > 0:
            props_len -= 1      # no trailing \x02, as RocketMQ 4.9.8 writes
        s.slice_first = slice_pos[0]
        s.slice_count = 2 * nprops
        slice_pos[0] += 2 * nprops
        if props_len > MAX_PROPERTIES_LENGTH:
            self.rejection = (f"{_where(index)}properties of {props_len:,} bytes are over "
                              f"{MAX_PROPERTIES_LENGTH:,} bytes")
            return S_PROPERTIES_SIZE_EXCEEDED
        s.props_len = <int32_t>props_len
        s.queue_id = queue_id
        s.flag = msg.flag
        s.reconsume = msg.reconsume_times
        s.prepared_off = msg.prepared_transaction_offset
        if msg.born_timestamp is None:
            s.born_ts = -1
        else:
            s.born_ts = msg.born_timestamp
        if msg.born_host is None:       # the store's own host (the common case)
            s.born_host = self.default_born_c
            s.born_host_len = self.default_born_len
            s.born_port = self.default_born_port
        else:
            s.born_host = NULL
            self._own_host(msg.born_host, s.born_buf, &s.born_host_len, &s.born_port)
        if msg.store_host is None:
            s.store_host = self.store_host_c
            s.store_host_len = self.store_host_len
            s.store_port = self.store_port
        else:
            s.store_host = NULL
            self._own_host(msg.store_host, s.store_buf, &s.store_host_len, &s.store_port)
        s.sys_flag = msg.sys_flag & MESSAGE_SYS_FLAGS
        if s.born_host_len == 16:
            s.sys_flag |= SYSFLAG_BORNHOST_V6
        if s.store_host_len == 16:
            s.sys_flag |= SYSFLAG_STOREHOST_V6
        tran = s.sys_flag & SYSFLAG_TRANSACTION_MASK
        s.counted = tran != SYSFLAG_PREPARED and tran != SYSFLAG_ROLLBACK
        s.total = (MIN_RECORD_SIZE + s.body_len + s.topic_len + s.props_len
                   + (s.born_host_len - 4) + (s.store_host_len - 4))
        if s.total + END_FILE_MIN_BLANK_LENGTH > self.file_size:
            self.rejection = (f"{_where(index)}record of {s.total:,} bytes does not fit a "
                              f"CommitLog segment of {self.file_size:,} bytes")
            return S_MESSAGE_ILLEGAL
        return S_PUT_OK

    cdef Py_ssize_t _props_slow(self, Message msg, dict props, Py_ssize_t slice_pos,
                                int64_t now_ms, Py_ssize_t index) except -1:
        """_prepare's properties when a pair is not plain: the UNIQ_KEY settled first, then
        every pair checked in dict order, the first bad one refused. Fills the slices from
        slice_pos (len(props) pairs, then a generated UNIQ_KEY); returns the text's length
        with a separator after every pair (the caller drops the last)."""
        cdef Py_ssize_t pos = 0, props_len, pairs = len(props)
        cdef PyObject* key
        cdef PyObject* value
        cdef Slice* sl
        if slice_pos + 2 * pairs + 2 > self.slices_cap:
            self._grow_slices(slice_pos + 2 * pairs + 2)
        props_len = _uniq_pair(msg, PyDict_Contains(props, _UNIQ_KEY), now_ms,
                               self.slices + slice_pos + 2 * pairs)
        sl = self.slices + slice_pos
        while PyDict_Next(props, &pos, &key, &value):
            if type(<object>key) is not str or type(<object>value) is not str:
                _check_property_text(f"{_where(index)}property name", <object>key)
                _check_property_text(f"{_where(index)}property {<object>key!r}", <object>value)
            sl[0].p = _text(<object>key, &sl[0].n)
            sl[1].p = _text(<object>value, &sl[1].n)
            if sl[0].n == 0:
                raise ValueError(f"{_where(index)}property name must not be empty")
            if sl[1].n == 0:
                raise ValueError(f"{_where(index)}property {<object>key!r} has an empty value")
            if rs_has_byte_below3(sl[0].p, sl[0].n) or rs_has_byte_below3(sl[1].p, sl[1].n):
                raise ValueError(f"{_where(index)}property {<object>key!r} contains a separator "
                                 "character (\\x01 or \\x02) or NUL")
            props_len += sl[0].n + sl[1].n + 2
            sl += 2
        return props_len

    cdef int _room(self, MappedFile mf, int64_t end):
        """0 when [0, end) of mf has blocks on disk (allocated now if needed), else the errno
        of the failed allocation, noted for no_space."""
        cdef int rc
        if end <= rs_load_i64(&mf.alloc_pos):
            return 0
        with nogil:
            rc = mf.reserve(end)
        if rc != 0:
            if self.alloc_errno != rc:
                _log.error("no room on disk for CommitLog file %s (%s): puts fail with "
                           "CREATE_MAPPED_FILE_FAILED until there is", mf.file_name,
                           os.strerror(rc))
            self.alloc_errno = rc
            self.rejection = (f"no room on disk for CommitLog file {mf.file_name}: "
                              f"{os.strerror(rc)}")
        elif self.alloc_errno != 0:
            _log.warning("CommitLog file %s got its blocks: puts go on", mf.file_name)
            self.alloc_errno = 0
        return rc

    cdef PutMessageResult _no_space(self):
        cdef PutMessageResult r = status_result(S_CREATE_MAPPED_FILE_FAILED)
        r.reason = self.rejection
        return r

    cdef inline void _write_blank(self, MappedFile mf) noexcept:
        cdef int64_t remaining = mf.file_size - mf.wrote_pos
        if remaining >= 8:
            rs_put_u32(mf.wbase + mf.wrote_pos, <uint32_t>remaining)
            rs_put_u32(mf.wbase + mf.wrote_pos + 4, BLANK_MAGIC)
        elif remaining > 0:
            memset(mf.wbase + mf.wrote_pos, 0, remaining)
        mf.wrote_pos = mf.file_size

    def append(self, MappedFile mf not None, Message message not None, int queue_id):
        """Encode one message at mf's write position.

        Returns a PutMessageResult, or None when it did not fit: the END_FILE blank was
        written and the caller must roll to the next file and call again. When the blocks it
        needs cannot be allocated, the result is CREATE_MAPPED_FILE_FAILED (reason says why)
        and nothing is written."""
        return self._append(mf, message, queue_id)

    cdef object _append(self, MappedFile mf, Message message, int queue_id):
        cdef RecordSpec* s = self.specs
        cdef Py_ssize_t slice_pos = 0
        cdef int64_t now_ms = wall_clock_ms()
        cdef int64_t phy, qoff
        cdef int64_t* slot
        cdef int code
        cdef PutMessageResult r
        if mf.read_only or not mf.available:
            raise ValueError(f"mapped file {mf.file_name} is not writable")
        code = self._prepare(message, queue_id, s, &slice_pos, now_ms, -1)
        if code != S_PUT_OK:
            r = status_result(code)
            r.reason = self.rejection
            _log.warning("put refused (%s): %s", _PUT_STATUS[code].name, r.reason)
            return r
        if mf.wrote_pos + s.total + END_FILE_MIN_BLANK_LENGTH > mf.file_size:
            if self._room(mf, mf.wrote_pos + END_FILE_MIN_BLANK_LENGTH) != 0:
                return self._no_space()
            self._write_blank(mf)
            return None
        # the record and room for the END_FILE blank after it have blocks
        if mf.wrote_pos + s.total + END_FILE_MIN_BLANK_LENGTH > rs_load_i64(&mf.alloc_pos):
            if self._room(mf, mf.wrote_pos + s.total + END_FILE_MIN_BLANK_LENGTH) != 0:
                return self._no_space()
        phy = mf.file_from_offset + mf.wrote_pos
        slot = &(<QueueCounters>s.counters).next[s.queue_id]
        qoff = 0
        if s.counted:
            qoff = slot[0] if slot[0] >= 0 else 0
        if s.total >= 16384:
            with nogil:
                _write_record(mf.wbase + mf.wrote_pos, s, self.slices, phy, qoff, now_ms)
        else:   # releasing the GIL costs more than copying a small record
            _write_record(mf.wbase + mf.wrote_pos, s, self.slices, phy, qoff, now_ms)
        mf.wrote_pos += s.total
        mf.store_ts = now_ms
        if s.counted:
            slot[0] = qoff + 1
        elif slot[0] < 0:
            slot[0] = 0
        r = PutMessageResult.__new__(PutMessageResult)
        r.status_code = S_PUT_OK
        r.commitlog_offset = phy
        r.queue_offset = qoff
        r.wrote_bytes = s.total
        r.store_timestamp = now_ms
        if message._uniq_len:
            r._uniq_len = message._uniq_len
            memcpy(r._uniq_hex, message._uniq_hex, message._uniq_len)
        else:
            r._uniq = message._props.get(_UNIQ_KEY)
        r.store_host_raw = self.store_host_raw if message.store_host is None else None
        r.store_port = self.store_port
        if message.store_host is not None:
            raw, port = parse_host(message.store_host)
            r.store_host_raw = raw
            r.store_port = port
        return r

    def prepare_batch(self, list messages not None, queue_ids):
        """Validate a whole batch (nothing is written). Returns a PutMessagesResult that
        write_batch fills; its status is not S_PUT_OK when the batch is rejected as a whole."""
        cdef Py_ssize_t i, count = len(messages), slice_pos = 0
        cdef int64_t now_ms = wall_clock_ms()
        cdef int code, qid = 0
        cdef bint one_qid = isinstance(queue_ids, int)
        cdef list qids = None
        cdef PutMessagesResult res = PutMessagesResult.__new__(PutMessagesResult)
        if not one_qid:
            if not isinstance(queue_ids, (list, tuple)):
                raise TypeError("queue_ids must be an int or a list of int, one per message")
            if len(queue_ids) != count:
                raise ValueError(f"queue_ids has {len(queue_ids)} entries for {count} messages")
            qids = queue_ids if type(queue_ids) is list else list(queue_ids)
        else:
            qid = queue_ids
        if count > self.specs_cap:
            self._grow_specs(count)
        res.count = count
        res.stored = 0
        res.store_timestamp = now_ms
        res.status_code = S_PUT_OK
        for i in range(count):
            msg = messages[i]
            if not isinstance(msg, Message):
                raise TypeError(f"messages[{i}] must be a Message, got {type(msg).__name__}")
            if not one_qid:
                q = qids[i]
                if not isinstance(q, int):
                    raise TypeError(f"queue_ids[{i}] must be an int")
                qid = q
            code = self._prepare(<Message>msg, qid, &self.specs[i], &slice_pos, now_ms, i)
            if code != S_PUT_OK:
                res.status_code = code
                res.reason = self.rejection
                _log.warning("batch put refused (%s): %s", _PUT_STATUS[code].name, res.reason)
                return res
        res.commitlog_offsets = np.empty(count, dtype=np.int64)
        res.queue_offsets = np.empty(count, dtype=np.int64)
        res.sizes = np.empty(count, dtype=np.int32)
        res.store_host_raw = self.store_host_raw
        res.store_port = self.store_port
        res.messages = messages
        return res

    def write_batch(self, MappedFile mf not None, PutMessagesResult res not None):
        """Write the prepared batch from res.stored on, as far as mf has room.

        Returns True when the batch is done: complete, or cut short because the disk has no
        room for the blocks it needs (res.status_code CREATE_MAPPED_FILE_FAILED, res.stored
        the messages written); False when the END_FILE blank was written and the rest must go
        into the next file. Must follow prepare_batch with no other call of this writer in
        between (the caller's put lock guarantees it)."""
        cdef Py_ssize_t i, start = res.stored, count = res.count
        cdef int64_t[::1] phys = res.commitlog_offsets
        cdef int64_t[::1] qoffs = res.queue_offsets
        cdef int32_t[::1] sizes = res.sizes
        cdef RecordSpec* s
        cdef int64_t pos = mf.wrote_pos, qoff, allocated
        cdef int64_t ts = res.store_timestamp
        cdef int64_t* slot
        cdef bint full = False, no_room = False
        cdef Py_ssize_t stop
        if mf.read_only or not mf.available:
            raise ValueError(f"mapped file {mf.file_name} is not writable")
        # How many fit in the file; then blocks for them and the END_FILE blank after them.
        i = start
        while i < count:
            if pos + self.specs[i].total + END_FILE_MIN_BLANK_LENGTH > mf.file_size:
                full = True
                break
            pos += self.specs[i].total
            i += 1
        stop = i
        if self._room(mf, pos + END_FILE_MIN_BLANK_LENGTH) != 0:
            # as many as the blocks already there hold (each with room for a blank after it)
            no_room = True
            full = False
            allocated = rs_load_i64(&mf.alloc_pos)
            pos = mf.wrote_pos
            i = start
            while i < stop and pos + self.specs[i].total + END_FILE_MIN_BLANK_LENGTH <= allocated:
                pos += self.specs[i].total
                i += 1
            stop = i
        # Assign positions and queue offsets (cheap, GIL held), then copy without the GIL.
        pos = mf.wrote_pos
        for i in range(start, stop):
            s = &self.specs[i]
            phys[i] = mf.file_from_offset + pos
            sizes[i] = s.total
            slot = &(<QueueCounters>s.counters).next[s.queue_id]
            if s.counted:
                qoff = slot[0] if slot[0] >= 0 else 0
                slot[0] = qoff + 1
            else:
                qoff = 0
                if slot[0] < 0:
                    slot[0] = 0
            qoffs[i] = qoff
            pos += s.total
        pos = mf.wrote_pos
        with nogil:
            for i in range(start, stop):
                _write_record(mf.wbase + pos, &self.specs[i], self.slices, phys[i], qoffs[i], ts)
                pos += self.specs[i].total
        mf.wrote_pos = pos
        if stop > start:
            mf.store_ts = ts
        res.stored = stop
        if no_room:
            res.status_code = S_CREATE_MAPPED_FILE_FAILED
            res.reason = self.rejection
            return True
        if full:
            self._write_blank(mf)
            return False
        return True

    def write_blank(self, MappedFile mf not None):
        """Close mf with an END_FILE blank at its write position."""
        self._write_blank(mf)
