# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""A SEND_BATCH_MESSAGE body put without a Python object per message.

The body is RocketMQ's MessageDecoder.encodeMessages layout (rocketstore.common.batch): per
message TOTALSIZE, MAGICCODE, BODYCRC, FLAG, BODYLENGTH, BODY, PROPERTIESLENGTH (2 bytes),
PROPERTIES (the properties text). :func:`read_batch_body` walks it once, every length checked,
and keeps, per message, where its body is and the name/value slices of the text it will store;
:func:`prepare_encoded_batch` turns them into the record writer's specs under the put lock,
and the writer's ``write_batch`` copies the records as for a batch of Messages.

The stored text is byte for byte what the Message path (rocketstore.broker.processors.send.batch)
stores for the same batch: the message's pairs in order, a pair whose name the request's own
properties (``outer``: the client's WAIT, the broker's CLUSTER) have taking the outer value,
then the outer pairs the message lacks, then a generated UNIQ_KEY when neither has one. Any
text that path would read differently or refuse (bytes that are not UTF-8, NUL, a pair
without exactly one \\x01 or with an empty name or value, a name twice, DELAY, TRAN_MSG) and
any body whose lengths do not fit makes :func:`read_batch_body` return None: the Message path
decides, with its checks and its refusals.
"""
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.object cimport PyObject
from cpython.unicode cimport PyUnicode_DecodeASCII
from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.stdlib cimport free, realloc
from libc.string cimport memcmp, memcpy

from rocketstore._native.includes.byteorder cimport rs_get_i16, rs_get_i32
from rocketstore._native.includes.vocabulary cimport (
    PROPERTY_DELAY, PROPERTY_DELAY_LEN, PROPERTY_UNIQ_KEY, PROPERTY_UNIQ_KEY_LEN)
from rocketstore._native.hosts cimport MSG_ID_TEXT, msg_id_into
from rocketstore._native.message cimport UNIQ_HEX_MAX, new_uniq_hex_in, uniq_keys, wall_clock_ms
from rocketstore._native.record cimport (
    END_FILE_MIN_BLANK_LENGTH, MAX_PROPERTIES_LENGTH, MESSAGE_SYS_FLAGS, MIN_RECORD_SIZE,
    SYSFLAG_BORNHOST_V6, SYSFLAG_PREPARED, SYSFLAG_ROLLBACK, SYSFLAG_STOREHOST_V6,
    SYSFLAG_TRANSACTION_MASK)
from rocketstore._native.record_writer cimport (
    S_MESSAGE_ILLEGAL, S_PROPERTIES_SIZE_EXCEEDED, S_PUT_OK, PutMessagesResult, RecordSpec,
    RecordWriter, Slice)
from rocketstore._native.topic_queue_table cimport MAX_QID

import logging

import numpy as np

from rocketstore._native.hosts import parse_host
from rocketstore.common.properties import MessageProperty

_log = logging.getLogger(__name__)

cdef enum:
    _HEAD = 20              # TOTALSIZE MAGICCODE BODYCRC FLAG BODYLENGTH
    _MAX_PAIRS = 64         # pairs of a message's text read here; more: the Message path

cdef bytes _TRAN_MSG = MessageProperty.TRAN_MSG.encode()
cdef bytes _WAIT = MessageProperty.WAIT.encode()


cdef struct Entry:
    const char* body
    int32_t body_len
    int32_t flag
    int32_t props_len           # the stored text's length, separators between pairs
    Py_ssize_t slice_first      # into EncodedBatch.slices: name, value, name, value ...
    Py_ssize_t slice_count


cdef bint _utf8(const char* text, Py_ssize_t n) noexcept:
    """True when text[0:n] is UTF-8 as Python's strict decoder has it (no overlong form, no
    surrogate, nothing over U+10FFFF)."""
    cdef Py_ssize_t i = 0, j, more
    cdef uint8_t c, low, high
    while i < n:
        c = <uint8_t>text[i]
        if c < 0x80:
            i += 1
            continue
        low, high = 0x80, 0xBF      # the range of the byte after the lead
        if 0xC2 <= c <= 0xDF:
            more = 1
        elif 0xE0 <= c <= 0xEF:
            more = 2
            if c == 0xE0:
                low = 0xA0
            elif c == 0xED:
                high = 0x9F
        elif 0xF0 <= c <= 0xF4:
            more = 3
            if c == 0xF0:
                low = 0x90
            elif c == 0xF4:
                high = 0x8F
        else:
            return False
        if i + more >= n:           # cut before its last byte
            return False
        c = <uint8_t>text[i + 1]
        if c < low or c > high:
            return False
        for j in range(i + 2, i + 1 + more):
            c = <uint8_t>text[j]
            if c < 0x80 or c > 0xBF:
                return False
        i += 1 + more
    return True


cdef inline bint _same(const char* a, Py_ssize_t an, const char* b, Py_ssize_t bn) noexcept:
    return an == bn and memcmp(a, b, an) == 0


cdef class EncodedBatch:
    """A batch body read for a put: per message its body and the slices of its stored
    properties text, pointing into ``body`` and the outer pairs' bytes, which it holds."""

    cdef bytes body
    cdef list outer_texts           # the outer names and values as UTF-8, alternating
    cdef Slice* slices
    cdef Py_ssize_t nslices
    cdef Py_ssize_t slices_cap
    cdef Entry* entries
    cdef readonly Py_ssize_t count
    cdef Py_ssize_t entries_cap
    cdef char* uniq                 # count * UNIQ_HEX_MAX: the generated UNIQ_KEYs
    cdef readonly bint waits        # a message whose WAIT is not "false"
    cdef int32_t reconsume
    cdef int32_t sys_flag
    cdef int64_t born_ts
    cdef unsigned char born_raw[16]
    cdef int32_t born_len
    cdef int32_t born_port

    def __cinit__(self):
        self.slices = NULL
        self.entries = NULL
        self.uniq = NULL

    def __dealloc__(self):
        free(self.slices)
        free(self.entries)
        free(self.uniq)

    cdef int _room(self, Py_ssize_t slices, Py_ssize_t entries) except -1:
        cdef void* p
        if slices > self.slices_cap:
            slices = max(slices, 2 * self.slices_cap)
            p = realloc(self.slices, slices * sizeof(Slice))
            if p == NULL:
                raise MemoryError()
            self.slices = <Slice*>p
            self.slices_cap = slices
        if entries > self.entries_cap:
            entries = max(entries, 2 * self.entries_cap)
            p = realloc(self.entries, entries * sizeof(Entry))
            if p == NULL:
                raise MemoryError()
            self.entries = <Entry*>p
            p = realloc(self.uniq, entries * UNIQ_HEX_MAX)
            if p == NULL:
                raise MemoryError()
            self.uniq = <char*>p
            self.entries_cap = entries
        return 0

    def __repr__(self):
        return f"EncodedBatch(count={self.count}, waits={self.waits})"


def read_batch_body(bytes body not None, dict outer not None, born_host, long long born_timestamp,
                    int sys_flag, long long reconsume_times):
    """The batch in ``body`` with the request's own properties ``outer`` (str names and values,
    the CLUSTER included) ready for :func:`prepare_encoded_batch`, or None when the Message
    path must decide (see the module's text). Every message gets ``born_host``,
    ``born_timestamp`` (>= 0), the masked ``sys_flag`` and ``reconsume_times`` (>= 0)."""
    cdef EncodedBatch b = EncodedBatch.__new__(EncodedBatch)
    cdef const char* data = PyBytes_AS_STRING(body)
    cdef Py_ssize_t size = PyBytes_GET_SIZE(body), pos = 0, at, end, total, body_len, props_len
    cdef Py_ssize_t n_outer, i, j, k, p, seg, split, pairs, stored_len, used
    cdef Slice* sl
    cdef Entry* e
    cdef const char* text
    cdef const char* wait_value = NULL
    cdef Py_ssize_t wait_len = 0
    cdef bint outer_uniq = False, has_uniq
    cdef uint8_t c
    cdef uint8_t[64] outer_used          # outer pairs a message's own pair took the place of
    cdef const char* outer_p[128]        # the outer names and values (b.outer_texts' bytes)
    cdef Py_ssize_t outer_n[128]
    cdef bint high
    cdef int64_t now_ms = wall_clock_ms()
    cdef bytes raw
    if born_timestamp < 0 or not 0 <= reconsume_times <= 2147483647 or sys_flag & ~MESSAGE_SYS_FLAGS:
        return None
    b.body = body
    b.born_ts = born_timestamp
    b.reconsume = <int32_t>reconsume_times
    b.sys_flag = sys_flag
    try:
        raw, port = parse_host(born_host)
    except (ValueError, TypeError):
        return None
    b.born_len = <int32_t>PyBytes_GET_SIZE(raw)
    b.born_port = port
    memcpy(b.born_raw, PyBytes_AS_STRING(raw), b.born_len)
    # the outer pairs, as UTF-8; anything the Message path would refuse or treat apart: it decides
    b.outer_texts = []
    for name, value in outer.items():
        if type(name) is not str or type(value) is not str or not name or not value:
            return None
        b.outer_texts.append((<str>name).encode())
        b.outer_texts.append((<str>value).encode())
    n_outer = len(b.outer_texts) // 2
    if n_outer > 64:
        return None
    for k in range(2 * n_outer):
        outer_p[k] = PyBytes_AS_STRING(b.outer_texts[k])
        outer_n[k] = PyBytes_GET_SIZE(b.outer_texts[k])
    for k in range(2 * n_outer):
        text = PyBytes_AS_STRING(b.outer_texts[k])
        for p in range(PyBytes_GET_SIZE(b.outer_texts[k])):
            if <uint8_t>text[p] < 3:
                return None
    for k in range(n_outer):
        text = PyBytes_AS_STRING(b.outer_texts[2 * k])
        used = PyBytes_GET_SIZE(b.outer_texts[2 * k])
        if _same(text, used, PROPERTY_DELAY, PROPERTY_DELAY_LEN) or \
                _same(text, used, PyBytes_AS_STRING(_TRAN_MSG), PyBytes_GET_SIZE(_TRAN_MSG)):
            return None
        if _same(text, used, PROPERTY_UNIQ_KEY, PROPERTY_UNIQ_KEY_LEN):
            outer_uniq = True
        if _same(text, used, PyBytes_AS_STRING(_WAIT), PyBytes_GET_SIZE(_WAIT)):
            wait_value = PyBytes_AS_STRING(b.outer_texts[2 * k + 1])
            wait_len = PyBytes_GET_SIZE(b.outer_texts[2 * k + 1])
    b._room(64, 32)
    while pos < size:
        if size - pos < _HEAD + 2:
            return None
        total = rs_get_i32(data + pos)
        body_len = rs_get_i32(data + pos + 16)
        if total < _HEAD + 2 or total > size - pos or body_len < 0 or _HEAD + body_len + 2 > total:
            return None
        at = pos + _HEAD + body_len
        props_len = rs_get_i16(data + at)
        at += 2
        if props_len < 0 or at + props_len != pos + total:
            return None
        b._room(b.nslices + 2 * (_MAX_PAIRS + n_outer + 1), b.count + 1)
        e = &b.entries[b.count]
        e.body = data + pos + _HEAD
        e.body_len = <int32_t>body_len
        e.flag = rs_get_i32(data + pos + 12)
        e.slice_first = b.nslices
        sl = b.slices + b.nslices
        # the message's own pairs: segments between \x02, each name \x01 value
        for k in range(n_outer):
            outer_used[k] = 0
        has_uniq = outer_uniq
        pairs = 0
        stored_len = 0
        seg = at
        end = at + props_len
        high = False
        while seg < end:
            split = -1
            p = seg
            while p < end:
                c = <uint8_t>data[p]
                if c == 2:
                    break
                if c == 1:
                    if split != -1:
                        return None         # a second \x01: the Message path refuses it
                    split = p
                elif c < 3:
                    return None             # NUL: the Message path refuses it
                elif c >= 0x80:
                    high = True
                p += 1
            if p > seg:                     # an empty segment (a trailing \x02) is no pair
                if split == -1 or split == seg or split == p - 1 or pairs == _MAX_PAIRS:
                    return None
                text = data + seg
                for j in range(pairs):       # a name twice: the Message path's dict decides
                    if _same(sl[2 * j].p, sl[2 * j].n, text, split - seg):
                        return None
                sl[2 * pairs].p = text
                sl[2 * pairs].n = split - seg
                sl[2 * pairs + 1].p = data + split + 1
                sl[2 * pairs + 1].n = p - split - 1
                if _same(text, split - seg, PROPERTY_DELAY, PROPERTY_DELAY_LEN) or \
                        _same(text, split - seg, PyBytes_AS_STRING(_TRAN_MSG), PyBytes_GET_SIZE(_TRAN_MSG)):
                    return None
                if _same(text, split - seg, PROPERTY_UNIQ_KEY, PROPERTY_UNIQ_KEY_LEN):
                    has_uniq = True
                for k in range(n_outer):     # the outer value in the message's place
                    if _same(text, split - seg, outer_p[2 * k], outer_n[2 * k]):
                        outer_used[k] = 1
                        sl[2 * pairs + 1].p = outer_p[2 * k + 1]
                        sl[2 * pairs + 1].n = outer_n[2 * k + 1]
                        break
                stored_len += sl[2 * pairs].n + sl[2 * pairs + 1].n + 2
                pairs += 1
            seg = p + 1
        if high and not _utf8(data + at, props_len):   # not ASCII: taken only when UTF-8
            return None
        if wait_value == NULL:               # the message's own WAIT, the outer has none
            for j in range(pairs):
                if _same(sl[2 * j].p, sl[2 * j].n, PyBytes_AS_STRING(_WAIT), PyBytes_GET_SIZE(_WAIT)):
                    if not _same(sl[2 * j + 1].p, sl[2 * j + 1].n, b"false", 5):
                        b.waits = True
                    break
            else:
                b.waits = True
        elif not _same(wait_value, wait_len, b"false", 5):
            b.waits = True
        for k in range(n_outer):
            if not outer_used[k]:
                sl[2 * pairs].p = outer_p[2 * k]
                sl[2 * pairs].n = outer_n[2 * k]
                sl[2 * pairs + 1].p = outer_p[2 * k + 1]
                sl[2 * pairs + 1].n = outer_n[2 * k + 1]
                stored_len += sl[2 * pairs].n + sl[2 * pairs + 1].n + 2
                pairs += 1
        if not has_uniq:
            used = new_uniq_hex_in(uniq_keys(), now_ms, b.uniq + b.count * UNIQ_HEX_MAX)
            sl[2 * pairs].p = PROPERTY_UNIQ_KEY
            sl[2 * pairs].n = PROPERTY_UNIQ_KEY_LEN
            sl[2 * pairs + 1].p = b.uniq + b.count * UNIQ_HEX_MAX
            sl[2 * pairs + 1].n = used
            stored_len += PROPERTY_UNIQ_KEY_LEN + used + 2
            pairs += 1
        e.props_len = <int32_t>(stored_len - 1 if pairs else 0)
        e.slice_count = 2 * pairs
        b.nslices += 2 * pairs
        b.count += 1
        pos += total
    if b.count == 0:
        return None
    return b


cdef str _where(Py_ssize_t index):
    return f"messages[{index}]."


def prepare_encoded_batch(RecordWriter writer not None, EncodedBatch batch not None, str topic not None,
                          int queue_id):
    """RecordWriter.prepare_batch for an EncodedBatch, all to ``queue_id`` of ``topic``: the
    same checks in the same order (body over max_message_size, properties over 32,767 bytes,
    a record over a CommitLog file), the same refusals; nothing is written. Call under the
    put lock, then ``writer.write_batch``, as for a prepared batch of Messages."""
    cdef Py_ssize_t i, count = batch.count
    cdef int64_t now_ms = wall_clock_ms()
    cdef RecordSpec* s
    cdef Entry* e
    cdef int code = S_PUT_OK, tran
    cdef PutMessagesResult res = PutMessagesResult.__new__(PutMessagesResult)
    if queue_id < 0 or queue_id > MAX_QID:
        raise ValueError(f"{_where(0)}queue_id must be in [0, {MAX_QID}], got {queue_id}")
    if <object>topic is not writer.last_topic or writer.last_version != writer.queue_table.version:
        writer._set_topic(topic)
    if queue_id >= writer.last_counters.n:
        writer.last_counters.slot(queue_id)
    if count > writer.specs_cap:
        writer._grow_specs(count)
    if batch.nslices > writer.slices_cap:
        writer._grow_slices(batch.nslices)
    memcpy(writer.slices, batch.slices, batch.nslices * sizeof(Slice))
    res.count = count
    res.stored = 0
    res.store_timestamp = now_ms
    res.status_code = S_PUT_OK
    for i in range(count):
        e = &batch.entries[i]
        s = &writer.specs[i]
        s.counters = <PyObject*>writer.last_counters
        s.body = e.body
        s.body_len = e.body_len
        if e.body_len > writer.max_message_size:
            writer.rejection = (f"{_where(i)}body of {e.body_len:,} bytes is over "
                                f"max_message_size ({writer.max_message_size:,} bytes)")
            code = S_MESSAGE_ILLEGAL
            break
        s.topic = writer.last_topic_text
        s.topic_len = writer.last_topic_len
        s.slice_first = e.slice_first
        s.slice_count = e.slice_count
        if e.props_len > MAX_PROPERTIES_LENGTH:
            writer.rejection = (f"{_where(i)}properties of {e.props_len:,} bytes are over "
                                f"{MAX_PROPERTIES_LENGTH:,} bytes")
            code = S_PROPERTIES_SIZE_EXCEEDED
            break
        s.props_len = e.props_len
        s.queue_id = queue_id
        s.flag = e.flag
        s.reconsume = batch.reconsume
        s.prepared_off = 0
        s.born_ts = batch.born_ts
        s.born_host = NULL
        memcpy(s.born_buf, batch.born_raw, batch.born_len)
        s.born_host_len = batch.born_len
        s.born_port = batch.born_port
        s.store_host = writer.store_host_c
        s.store_host_len = writer.store_host_len
        s.store_port = writer.store_port
        s.sys_flag = batch.sys_flag
        if s.born_host_len == 16:
            s.sys_flag |= SYSFLAG_BORNHOST_V6
        if s.store_host_len == 16:
            s.sys_flag |= SYSFLAG_STOREHOST_V6
        tran = s.sys_flag & SYSFLAG_TRANSACTION_MASK
        s.counted = tran != SYSFLAG_PREPARED and tran != SYSFLAG_ROLLBACK
        s.total = (MIN_RECORD_SIZE + s.body_len + s.topic_len + s.props_len
                   + (s.born_host_len - 4) + (s.store_host_len - 4))
        if s.total + END_FILE_MIN_BLANK_LENGTH > writer.file_size:
            writer.rejection = (f"{_where(i)}record of {s.total:,} bytes does not fit a "
                                f"CommitLog segment of {writer.file_size:,} bytes")
            code = S_MESSAGE_ILLEGAL
            break
    if code != S_PUT_OK:
        res.status_code = code
        res.reason = writer.rejection
        _log.warning("batch put refused (%s): %s",
                     "MESSAGE_ILLEGAL" if code == S_MESSAGE_ILLEGAL else "PROPERTIES_SIZE_EXCEEDED",
                     res.reason)
        return res
    res.commitlog_offsets = np.empty(count, dtype=np.int64)
    res.queue_offsets = np.empty(count, dtype=np.int64)
    res.sizes = np.empty(count, dtype=np.int32)
    res.store_host_raw = writer.store_host_raw
    res.store_port = writer.store_port
    res.messages = None
    return res


def batch_msg_ids(PutMessagesResult result not None):
    """The offsetMsgIds of a batch's stored messages, comma-separated (the reply's msgId)."""
    cdef Py_ssize_t i, n = result.stored, at = 0
    cdef const unsigned char* host
    cdef int32_t host_len
    cdef int64_t[::1] offsets
    cdef bytearray out
    cdef char* p
    if n == 0 or result.store_host_raw is None:
        return ""
    offsets = result.commitlog_offsets
    host = <const unsigned char*>PyBytes_AS_STRING(result.store_host_raw)
    host_len = <int32_t>PyBytes_GET_SIZE(result.store_host_raw)
    out = bytearray(n * (MSG_ID_TEXT + 1))
    p = out
    for i in range(n):
        if i:
            p[at] = 44      # ','
            at += 1
        at += msg_id_into(host, host_len, result.store_port, offsets[i], p + at)
    return PyUnicode_DecodeASCII(p, at, NULL)
