# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""CommitLog records read back: validation results, MessageExt (a record decoded, with
zero-copy views) and scans that walk a region record by record. The record's layout and the
validation every decoder inlines are in record.pxd."""
cimport cython
from libc.stdint cimport int32_t, int64_t, uint32_t
from libc.string cimport memset

from rocketstore._native.hosts cimport HOST_TEXT, format_host_into, msg_id_text
from rocketstore._native.includes.byteorder cimport rs_get_i32, rs_get_i64
from rocketstore._native.includes.crc32 cimport rs_crc32_init
from rocketstore._native.includes.record_checks cimport rs_find_either_byte
from rocketstore._native.includes.python cimport PyUnicode_DecodeASCII, PyUnicode_DecodeUTF8
from rocketstore._native.mapped_file cimport MappedFile
from rocketstore._native.properties cimport properties_dict, tags_code_of
from rocketstore._native.read_source cimport ReadSource

import numpy as np

from rocketstore.common.properties import MessageProperty as _MessageProperty

cdef str _TAGS = _MessageProperty.TAGS
cdef str _KEYS = _MessageProperty.KEYS
cdef str _UNIQ_KEY = _MessageProperty.UNIQ_KEY

rs_crc32_init()     # this module's copy of the CRC tables (check_record is inlined here)

# record_status's and the scans' names of the REC_* statuses, by value
STATUS_NAMES = ("ok", "blank", "end", "corrupt")


class CorruptRecordError(ValueError):
    """A record that fails validation (bad magic, lengths, CRC); .offset says where."""

    def __init__(self, message, offset=None):
        super().__init__(message if offset is None else f"{message} at offset {offset}")
        self.offset = offset


@cython.final
cdef class MessageExt:
    """A message read back from the embedded store (``rocketstore.MessageExt``); a consumer of
    a broker gets ``rocketstore.client.MessageExt`` instead.

    Decoded from its record; body and raw fields are zero-copy views."""
    cdef readonly object record        # memoryview of the whole record (pins its file)
    cdef readonly str topic
    cdef readonly int32_t queue_id
    cdef readonly int64_t queue_offset
    cdef readonly int64_t commitlog_offset
    cdef readonly int32_t store_size
    cdef readonly int32_t body_crc
    cdef readonly int32_t flag
    cdef readonly int32_t sys_flag
    cdef readonly int64_t born_timestamp
    cdef readonly int64_t store_timestamp
    cdef readonly int32_t reconsume_times
    cdef readonly int64_t prepared_transaction_offset
    cdef RecordInfo info
    cdef dict _props

    @property
    def body(self):
        return self.record[self.info.body_offset:self.info.body_offset + self.info.body_len]

    @property
    def properties_string(self):
        cdef const unsigned char[::1] v = self.record
        return PyUnicode_DecodeUTF8(<const char*>&v[0] + self.info.props_offset,
                                    self.info.props_len, "replace")

    @property
    def properties(self):
        """Parsed as RocketMQ's string2messageProperties (empty values dropped)."""
        cdef const unsigned char[::1] v
        if self._props is None:
            v = self.record
            self._props = properties_dict(<const char*>&v[0] + self.info.props_offset,
                                          self.info.props_len)
        return self._props

    @property
    def tags(self):
        return self.properties.get(_TAGS)

    @property
    def keys(self):
        value = self.properties.get(_KEYS)
        return [k for k in value.split(" ") if k] if value else []

    @property
    def uniq_key(self):
        return self.properties.get(_UNIQ_KEY)

    @property
    def tags_code(self):
        cdef const unsigned char[::1] v = self.record
        return tags_code_of(<const char*>&v[0] + self.info.props_offset, self.info.props_len)

    cdef str _host_text(self, int32_t off, int32_t alen):
        cdef const unsigned char[::1] v = self.record
        cdef const char* p = <const char*>&v[0] + off
        cdef char out[HOST_TEXT]
        cdef int n = format_host_into(<const unsigned char*>p, alen, rs_get_i32(p + alen), out)
        return PyUnicode_DecodeASCII(out, n, NULL)

    @property
    def born_host(self):
        return self._host_text(48, self.info.born_host_len)

    @property
    def store_host(self):
        return self._host_text(self.info.store_ts_offset + 8, self.info.store_host_len)

    @property
    def msg_id(self):
        cdef const unsigned char[::1] v = self.record
        cdef const char* p = <const char*>&v[0] + self.info.store_ts_offset + 8
        return msg_id_text(<const unsigned char*>p, self.info.store_host_len,
                           rs_get_i32(p + self.info.store_host_len), self.commitlog_offset)

    @property
    def transaction_type(self):
        return self.sys_flag & SYSFLAG_TRANSACTION_MASK

    def to_dict(self, bint body_b64=True):
        """The fields with the names of the RocketMQ fixture's messages.jsonl."""
        import base64
        d = {
            "topic": self.topic, "queueId": self.queue_id, "queueOffset": self.queue_offset,
            "commitLogOffset": self.commitlog_offset, "storeSize": self.store_size,
            "msgId": self.msg_id, "tags": self.tags, "tagsCode": self.tags_code,
            "keys": self.properties.get(_KEYS), "uniqKey": self.uniq_key,
            "properties": dict(sorted(self.properties.items())),
            "propertiesString": self.properties_string, "bodyCRC": self.body_crc,
            "bodyLen": self.info.body_len, "flag": self.flag, "sysFlag": self.sys_flag,
            "reconsumeTimes": self.reconsume_times,
            "preparedTransactionOffset": self.prepared_transaction_offset,
            "bornTimestamp": self.born_timestamp, "bornHost": self.born_host,
            "storeTimestamp": self.store_timestamp, "storeHost": self.store_host,
        }
        if body_b64:
            d["body_b64"] = base64.b64encode(self.body).decode("ascii")
        else:
            d["body"] = bytes(self.body)
        return d

    def __repr__(self):
        return (f"MessageExt(topic={self.topic!r}, queue_id={self.queue_id}, "
                f"queue_offset={self.queue_offset}, commitlog_offset={self.commitlog_offset}, "
                f"store_size={self.store_size})")


cdef MessageExt _decode(object record, const char* p, RecordInfo info):
    cdef MessageExt m = MessageExt.__new__(MessageExt)
    m.record = record
    m.info = info
    m.topic = PyUnicode_DecodeUTF8(p + info.topic_offset, info.topic_len, "replace")
    m.queue_id = info.queue_id
    m.queue_offset = info.queue_offset
    m.commitlog_offset = info.phy_offset
    m.store_size = info.size
    m.body_crc = rs_get_i32(p + 8)
    m.flag = rs_get_i32(p + 16)
    m.sys_flag = info.sys_flag
    m.born_timestamp = rs_get_i64(p + 40)
    m.store_timestamp = info.store_ts
    m.reconsume_times = rs_get_i32(p + info.store_ts_offset + 8 + info.store_host_len + 4)
    m.prepared_transaction_offset = rs_get_i64(p + info.store_ts_offset + 8 + info.store_host_len + 8)
    return m


def decode_message(buffer, Py_ssize_t pos=0, *, bint check_crc=False):
    """Decode the record at pos of a buffer. Raises CorruptRecordError if it is not a valid
    message record (an END_FILE blank or end of data included)."""
    cdef const unsigned char[::1] v = buffer
    cdef Py_ssize_t n = v.shape[0]
    cdef const char* p
    cdef RecordInfo info
    if pos < 0 or pos > n:
        raise ValueError(f"pos {pos} outside the buffer of {n} bytes")
    if n == pos:
        raise CorruptRecordError("no record (end of data)", pos)
    p = <const char*>&v[0] + pos
    info = check_record(p, n - pos, check_crc, -1)
    if info.status != REC_OK:
        raise CorruptRecordError(status_text(info), pos)
    mv = memoryview(buffer)
    if mv.ndim != 1 or mv.itemsize != 1:
        mv = mv.cast("B")
    return _decode(mv[pos:pos + info.size], p, info)


cdef str status_text(RecordInfo info):
    if info.status == REC_BLANK:
        return "an END_FILE blank, not a message"
    if info.status == REC_END:
        return "no record (end of data)"
    return (<bytes>info.reason).decode() if info.reason != NULL else "corrupt record"


def decode_at(MappedFile mf not None, int64_t pos, *, bint check_crc=False):
    """Decode the record at pos of a MappedFile into a MessageExt whose views pin the file."""
    cdef RecordInfo info
    cdef int64_t limit
    if not mf.hold():
        raise ValueError(f"mapped file {mf.file_name} is being destroyed")
    try:
        limit = mf.read_limit()
        if pos < 0 or pos >= limit:
            raise ValueError(f"position {pos} outside the written part [0, {limit}) "
                             f"of {mf.file_name}")
        info = check_record(mf.base + pos, limit - pos, check_crc, mf.file_from_offset + pos)
        if info.status != REC_OK:
            raise CorruptRecordError(status_text(info), mf.file_from_offset + pos)
        return _decode(mf.view(pos, info.size), mf.base + pos, info)
    finally:
        mf.release()


def record_status(buffer, Py_ssize_t pos=0, *, bint check_crc=True, int64_t expected_phy=-1):
    """(status, size, reason) of the record at pos: status 'ok', 'blank', 'end' or 'corrupt'."""
    cdef const unsigned char[::1] v = buffer
    cdef Py_ssize_t n = v.shape[0]
    cdef RecordInfo info
    if pos < 0 or pos > n:
        raise ValueError(f"pos {pos} outside the buffer of {n} bytes")
    if pos == n:
        return ("end", 0, None)
    info = check_record(<const char*>&v[0] + pos, n - pos, check_crc, expected_phy)
    return (STATUS_NAMES[info.status], info.size,
            None if info.status == REC_OK else status_text(info))


@cython.final
cdef class ScanResult:
    """Records found by scan_region: arrays of (file-relative) offsets and sizes, and why and
    where the scan stopped (stop_status: 'end', 'blank', 'corrupt' or 'limit')."""
    cdef readonly object offsets
    cdef readonly object sizes
    cdef readonly object store_timestamps
    cdef readonly str stop_status
    cdef readonly int64_t stop_position
    cdef readonly object reason

    def __len__(self):
        return len(self.offsets)

    def __iter__(self):
        for o, s in zip(self.offsets.tolist(), self.sizes.tolist()):
            yield (o, s, "ok")

    def __repr__(self):
        return (f"ScanResult({len(self.offsets)} records, stop={self.stop_status} "
                f"at {self.stop_position})")


def scan_region(buffer, int64_t start=0, int64_t end=-1, *, bint check_crc=True,
                int64_t base_offset=-1, Py_ssize_t max_records=-1):
    """Walk records from start until end (default: the buffer's end), a blank, the end of
    data, a corrupt record or max_records. With base_offset >= 0 each record's PHYSICALOFFSET
    must equal base_offset + its position. Works on bytes or on MappedFile (up to its
    readable position). Never reads outside the buffer."""
    cdef int64_t pos
    cdef RecordInfo info
    cdef Py_ssize_t count = 0, cap
    cdef ScanResult res = ScanResult.__new__(ScanResult)
    cdef ReadSource src = ReadSource(buffer)
    cdef const char* p = src.base
    cdef int64_t n = src.limit
    try:
        if end < 0 or end > n:
            end = n
        if start < 0 or start > end:
            raise ValueError(f"start {start} outside [0, {end}]")
        cap = (end - start) // MIN_RECORD_SIZE + 1
        if max_records >= 0 and max_records < cap:
            cap = max_records
        offsets = np.empty(cap, dtype=np.int64)
        sizes = np.empty(cap, dtype=np.int32)
        stamps = np.empty(cap, dtype=np.int64)
        _scan(p, start, end, check_crc, base_offset, cap, offsets, sizes, stamps, &count, &info,
              &pos)
        res.offsets = offsets[:count]
        res.sizes = sizes[:count]
        res.store_timestamps = stamps[:count]
        res.stop_position = pos
        if count == cap and info.status == REC_OK:
            res.stop_status = "limit"
        elif pos >= end and info.status == REC_OK:
            res.stop_status = "end"
        else:
            res.stop_status = STATUS_NAMES[info.status]
            res.reason = None if info.status in (REC_OK, REC_END) else status_text(info)
        return res
    finally:
        src.release()


cdef void _scan(const char* p, int64_t start, int64_t end, bint check_crc, int64_t base_offset,
                Py_ssize_t cap, int64_t[::1] offsets, int32_t[::1] sizes, int64_t[::1] stamps,
                Py_ssize_t* count_out, RecordInfo* info_out, int64_t* pos_out) noexcept:
    cdef int64_t pos = start
    cdef Py_ssize_t count = 0
    cdef RecordInfo info
    cdef TopicCache topics
    topics.ptr = NULL
    topics.len = -1
    memset(&info, 0, sizeof(RecordInfo))
    info.status = REC_OK
    with nogil:
        while pos < end and count < cap:
            # into one RecordInfo: no zeroing and no copy per record
            if check_record_cached(p + pos, end - pos, check_crc,
                                   base_offset + pos if base_offset >= 0 else -1,
                                   &info, &topics) != REC_OK:
                break
            offsets[count] = pos
            sizes[count] = info.size
            stamps[count] = info.store_ts
            count += 1
            pos += info.size
    count_out[0] = count
    info_out[0] = info
    pos_out[0] = pos


cdef int64_t _find_record(const char* p, int64_t start, int64_t end, int64_t segment_end,
                          bint check_crc, int64_t base_offset) noexcept nogil:
    """The first position q in [start, end) where a valid record starts (PHYSICALOFFSET equal
    to base_offset + q, so a record only matches at its own position) or where an END_FILE
    blank fills the rest of the segment exactly (size == segment_end - q); -1 when none."""
    cdef int64_t q = start, at
    cdef RecordInfo info
    cdef uint32_t magic
    while q + 8 <= end:
        # candidates: a magic code's first byte at q + 4
        at = rs_find_either_byte(p + q + 4, end - q - 4, MESSAGE_MAGIC_BYTE0, BLANK_MAGIC_BYTE0)
        q += at
        if q + 8 > end:
            return -1
        magic = rs_get_u32(p + q + 4)
        if magic == MESSAGE_MAGIC:
            if check_record_into(p + q, end - q, check_crc, base_offset + q, &info) == REC_OK:
                return q
        elif magic == BLANK_MAGIC:
            if <int64_t>rs_get_i32(p + q) == segment_end - q:
                return q
        q += 1
    return -1


def find_record(buffer, int64_t start=0, int64_t end=-1, *, bint check_crc=True,
                int64_t base_offset=0, int64_t segment_end=-1):
    """Where records resume after damage: the first position q >= start (and < end, default
    the buffer's end / the MappedFile's readable limit) where a valid record starts whose
    PHYSICALOFFSET is base_offset + q, or an END_FILE blank that fills the segment exactly
    (segment_end, default end, is where the segment ends); -1 when there is none. Works on
    bytes or a MappedFile; never reads outside it; the search runs without the GIL."""
    cdef int64_t found
    cdef ReadSource src = ReadSource(buffer)
    cdef const char* p = src.base
    cdef int64_t n = src.limit
    try:
        if end < 0 or end > n:
            end = n
        if segment_end < 0:
            segment_end = end
        if start < 0:
            raise ValueError(f"start {start} is negative")
        if start >= end or p == NULL:
            return -1
        with nogil:
            found = _find_record(p, start, end, segment_end, check_crc, base_offset)
        return found
    finally:
        src.release()
