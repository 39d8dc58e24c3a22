# cython: boundscheck=False, wraparound=False, initializedcheck=False
"""Stored records to MessageExt, natively: the per-message half of rocketstore.client.records.

The same checks as the pure-Python decoder (rocketstore.client.records.decode_message, the
reference the tests compare it with): every length is checked against the record and the
buffer before it is used, and a record that does not fit raises CorruptMessageError.
"""

from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t

from rocketstore.client.message import MessageExt
from rocketstore.common import properties as _properties
from rocketstore.common import record as _record

cdef uint32_t MAGIC_V1 = _record.MESSAGE_MAGIC_CODE
cdef uint32_t MAGIC_V2 = _record.MESSAGE_MAGIC_CODE_V2
cdef int MIN_RECORD = _record.MIN_RECORD_SIZE
cdef int COMPRESSED = _record.SysFlag.COMPRESSED
cdef int BORN_V6 = _record.SysFlag.BORNHOST_V6
cdef int STORE_V6 = _record.SysFlag.STOREHOST_V6
cdef str NAME_VALUE_SEPARATOR = _properties.NAME_VALUE_SEPARATOR
cdef str PROPERTY_SEPARATOR = _properties.PROPERTY_SEPARATOR

cdef object _new_ext = MessageExt.__new__
cdef object _CorruptMessageError = None
cdef object _decompressed_or_stored = None


cdef inline uint32_t u32(const uint8_t* p) noexcept nogil:
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | <uint32_t>p[3]


cdef inline int32_t i32(const uint8_t* p) noexcept nogil:
    return <int32_t>u32(p)


cdef inline int64_t i64(const uint8_t* p) noexcept nogil:
    return <int64_t>((<uint64_t>u32(p) << 32) | <uint64_t>u32(p + 4))


cdef inline int16_t i16(const uint8_t* p) noexcept nogil:
    return <int16_t>((<uint32_t>p[0] << 8) | <uint32_t>p[1])


cdef object corrupt(str message):
    global _CorruptMessageError
    if _CorruptMessageError is None:
        from rocketstore.client.records import CorruptMessageError
        _CorruptMessageError = CorruptMessageError
    return _CorruptMessageError(message)


cdef object decompressed(bytes body, int sys_flag, str topic, int32_t queue_id, int64_t queue_offset):
    """records.decompressed_or_stored (the codec named by the sysFlag; the stored body and a
    logged line when it does not decode)."""
    global _decompressed_or_stored
    if _decompressed_or_stored is None:
        from rocketstore.client.records import decompressed_or_stored
        _decompressed_or_stored = decompressed_or_stored
    return _decompressed_or_stored(body, sys_flag, topic, queue_id, queue_offset)


cdef dict decode_properties(const uint8_t* p, Py_ssize_t n):
    """common.properties.decode_properties over UTF-8 bytes (its fast path)."""
    cdef dict properties = {}
    cdef str text = PyUnicode_DecodeUTF8(<const char*>p, n, NULL)
    cdef str item, name, value
    cdef Py_ssize_t sep
    for item in text.split(PROPERTY_SEPARATOR):
        sep = item.find(NAME_VALUE_SEPARATOR)
        if sep > 0 and sep + 1 < len(item):
            properties[item[:sep]] = item[sep + 1:]
    return properties


def decode_messages(body, bint decompress=True, broker_name=None):
    """Every record of a pull, query or view reply body, in order (see codec.decode_messages)."""
    cdef const uint8_t[::1] view
    if body is None or len(body) == 0:
        return []
    view = memoryview(body).cast("B")
    cdef const uint8_t* base = &view[0]
    cdef Py_ssize_t end = view.shape[0]
    cdef Py_ssize_t pos = 0, left, total, p, rec_end
    cdef uint32_t magic
    cdef int sys_flag, born_size, store_size, fixed
    cdef int32_t body_length, topic_length, properties_length
    cdef list messages = []
    cdef object msg, msg_body, topic, properties
    while pos < end:
        left = end - pos
        if left < 8:
            raise corrupt(f"record at {pos}: {left} bytes left, a record needs at least 8")
        total = i32(base + pos)
        magic = u32(base + pos + 4)
        if magic != MAGIC_V1 and magic != MAGIC_V2:
            raise corrupt(f"record at {pos}: MAGICCODE is {magic:#010x}")
        if total < MIN_RECORD or total > left:
            raise corrupt(f"record at {pos}: TOTALSIZE {total} is outside [{MIN_RECORD}, {left}]")
        rec_end = pos + total
        sys_flag = i32(base + pos + 36)
        born_size = 20 if sys_flag & BORN_V6 else 8
        store_size = 20 if sys_flag & STORE_V6 else 8
        fixed = MIN_RECORD + born_size - 8 + store_size - 8
        if total < fixed:
            raise corrupt(f"record at {pos}: TOTALSIZE {total} is below {fixed} for its hosts")
        p = pos + 48 + born_size + 8 + store_size + 12
        body_length = i32(base + p)
        p += 4
        if body_length < 0 or p + body_length > rec_end - 3:
            raise corrupt(f"record at {pos}: BODYLENGTH {body_length} runs past the record")
        msg_body = PyBytes_FromStringAndSize(<const char*>base + p, body_length)
        p += body_length
        if magic == MAGIC_V1:
            topic_length = base[p]
            p += 1
        else:
            topic_length = i16(base + p)
            p += 2
        if topic_length <= 0 or p + topic_length > rec_end - 2:
            raise corrupt(f"record at {pos}: TOPICLENGTH {topic_length} runs past the record")
        try:
            topic = PyUnicode_DecodeUTF8(<const char*>base + p, topic_length, NULL)
        except UnicodeDecodeError:
            raise corrupt(f"record at {pos}: TOPIC is not UTF-8") from None
        p += topic_length
        properties_length = i16(base + p)
        p += 2
        if properties_length < 0 or p + properties_length != rec_end:
            raise corrupt(f"record at {pos}: PROPERTIESLENGTH {properties_length} does not end the record")
        try:
            properties = decode_properties(base + p, properties_length)
        except UnicodeDecodeError:
            raise corrupt(f"record at {pos}: PROPERTIES are not UTF-8") from None
        if decompress and sys_flag & COMPRESSED and body_length:
            msg_body = decompressed(msg_body, sys_flag, topic, i32(base + pos + 12),
                                   i64(base + pos + 20))
        msg = _new_ext(MessageExt)
        msg._topic = topic
        msg._body = msg_body
        msg.flag = i32(base + pos + 16)
        msg.properties = properties
        msg.transaction_id = None
        msg.queue_id = i32(base + pos + 12)
        msg.store_size = total
        msg.queue_offset = i64(base + pos + 20)
        msg.sys_flag = sys_flag
        msg.born_timestamp = i64(base + pos + 40)
        p = pos + 48
        msg._born_host = PyBytes_FromStringAndSize(<const char*>base + p, born_size)
        p += born_size
        msg.store_timestamp = i64(base + p)
        p += 8
        msg._store_host = PyBytes_FromStringAndSize(<const char*>base + p, store_size)
        p += store_size
        msg.commit_log_offset = i64(base + pos + 28)
        msg.body_crc = i32(base + pos + 8)
        msg.reconsume_times = i32(base + p)
        msg.prepared_transaction_offset = i64(base + p + 4)
        msg.broker_name = broker_name
        msg._offset_msg_id = None
        messages.append(msg)
        pos = rec_end
    return messages
