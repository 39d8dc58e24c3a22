# The CommitLog record (docs/format.md, 3.1 "Message record (v1)"): its constants and the validation
# every decoder inlines into its loop.
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t
from libc.string cimport memset

from rocketstore._native.includes.byteorder cimport rs_get_i32, rs_get_i64, rs_get_u16, rs_get_u32
from rocketstore._native.includes.crc32 cimport rs_crc32
from rocketstore._native.includes.record_checks cimport rs_short_equal, rs_topic_legal

# The record's constants, from rocketstore/common/record.py through the header setup.py
# generates (src/rs_vocabulary.h): C macros, as fast as literals.
cdef extern from "rs_vocabulary.h":
    const uint32_t MESSAGE_MAGIC "RS_MESSAGE_MAGIC_CODE"
    const uint32_t BLANK_MAGIC "RS_BLANK_MAGIC_CODE"
    enum:
        MESSAGE_MAGIC_BYTE0 "RS_MESSAGE_MAGIC_BYTE0"
        BLANK_MAGIC_BYTE0 "RS_BLANK_MAGIC_BYTE0"
        MIN_RECORD_SIZE "RS_MIN_RECORD_SIZE"
        END_FILE_MIN_BLANK_LENGTH "RS_END_FILE_MIN_BLANK_LENGTH"
        MAX_TOPIC_LENGTH "RS_MAX_TOPIC_LENGTH"
        MAX_PROPERTIES_LENGTH "RS_MAX_PROPERTIES_LENGTH"
        SYSFLAG_TRANSACTION_MASK "RS_TRANSACTION_TYPE_MASK"
        SYSFLAG_MULTI_TAGS "RS_SYSFLAG_MULTI_TAGS"
        MESSAGE_SYS_FLAGS "RS_MESSAGE_SYS_FLAGS"
        SYSFLAG_PREPARED "RS_SYSFLAG_TRANSACTION_PREPARED"
        SYSFLAG_ROLLBACK "RS_SYSFLAG_TRANSACTION_ROLLBACK"
        SYSFLAG_BORNHOST_V6 "RS_SYSFLAG_BORNHOST_V6"
        SYSFLAG_STOREHOST_V6 "RS_SYSFLAG_STOREHOST_V6"
        QUEUEID_OFFSET "RS_QUEUEID_OFFSET"
        QUEUEOFFSET_OFFSET "RS_QUEUEOFFSET_OFFSET"
        PHYSICALOFFSET_OFFSET "RS_PHYSICALOFFSET_OFFSET"
        SYSFLAG_OFFSET "RS_SYSFLAG_OFFSET"
        BORNHOST_OFFSET "RS_BORNHOST_OFFSET"

cdef enum:
    MAX_PORT = 65535

# What check_record finds at a position.
cdef enum:
    REC_OK = 0        # a valid message record
    REC_BLANK = 1     # END_FILE blank: the rest of the segment is unused
    REC_END = 2       # no more data (zero size, or no room for a header)
    REC_CORRUPT = 3   # a record that fails validation

cdef struct RecordInfo:
    int status
    int32_t size
    int32_t queue_id
    int32_t sys_flag
    int32_t body_offset      # from the record start
    int32_t body_len
    int32_t topic_offset
    int32_t topic_len
    int32_t props_offset
    int32_t props_len
    int32_t born_host_len    # 4 or 16 (address bytes, port follows)
    int32_t store_host_len
    int32_t store_ts_offset
    int64_t queue_offset
    int64_t phy_offset
    int64_t store_ts
    const char* reason       # for REC_CORRUPT

cdef inline const char* record_layout(const char* p, int64_t avail, RecordInfo* r) noexcept nogil:
    """Size and field offsets of the v1 record at p (magic, offset and CRC not checked), every
    length bounds-checked against avail: NULL when they are consistent, else why not. Shared
    by check_record and by decoders re-reading a record check_record already accepted."""
    cdef int32_t off, bh, sh
    r.size = rs_get_i32(p) if avail >= 4 else 0
    if r.size < MIN_RECORD_SIZE or r.size > avail:
        return "total size out of range"
    r.queue_id = rs_get_i32(p + QUEUEID_OFFSET)
    r.queue_offset = rs_get_i64(p + QUEUEOFFSET_OFFSET)
    r.phy_offset = rs_get_i64(p + PHYSICALOFFSET_OFFSET)
    r.sys_flag = rs_get_i32(p + SYSFLAG_OFFSET)
    bh = 16 if r.sys_flag & SYSFLAG_BORNHOST_V6 else 4
    sh = 16 if r.sys_flag & SYSFLAG_STOREHOST_V6 else 4
    r.born_host_len = bh
    r.store_host_len = sh
    off = BORNHOST_OFFSET + bh + 4
    r.store_ts_offset = off
    if off + 8 + sh + 4 + 4 + 8 + 4 > r.size:
        return "header runs past the record"
    r.store_ts = rs_get_i64(p + off)
    # host ports are not covered by the CRC: a TCP port (its two high bytes zero), or the
    # record is damaged
    if rs_get_u16(p + BORNHOST_OFFSET + bh) | rs_get_u16(p + off + 8 + sh):
        return "host port out of range"
    off += 8 + sh + 4 + 4 + 8
    r.body_len = rs_get_i32(p + off)
    off += 4
    if r.body_len < 0 or r.body_len > r.size - off - 1 - 2:
        return "body length runs past the record"
    r.body_offset = off
    off += r.body_len
    r.topic_len = <uint8_t>p[off]
    off += 1
    if r.topic_len > MAX_TOPIC_LENGTH:      # Java reads a signed byte: > 127 is negative
        return "topic length over 127"
    if r.topic_len > r.size - off - 2:
        return "topic length runs past the record"
    r.topic_offset = off
    off += r.topic_len
    r.props_len = <int32_t>rs_get_u16(p + off)
    off += 2
    if r.props_len > 0x7FFF:
        return "negative properties length"
    r.props_offset = off
    if off + r.props_len != r.size:
        return "total size does not match the sum of the fields"
    return NULL


cdef inline int check_record_into(const char* p, int64_t avail, bint check_crc,
                                  int64_t expected_phy, RecordInfo* r) noexcept nogil:
    """Validate the record at p with avail readable bytes into r and return r.status; never
    reads outside [p, p+avail). Only status and reason (and size, for a blank) are set when
    the record is not REC_OK: check_record gives a zeroed rest."""
    if check_record_but_topic_into(p, avail, check_crc, expected_phy, r) != REC_OK:
        return r.status
    if not rs_topic_legal(p + r.topic_offset, r.topic_len):
        return _illegal_topic(r)
    return REC_OK


cdef struct TopicCache:
    # the last topic found legal (in memory the caller holds), so a walk checks each
    # distinct run of topics once
    const char* ptr
    int32_t len


cdef inline int check_record_cached(const char* p, int64_t avail, bint check_crc,
                                    int64_t expected_phy, RecordInfo* r,
                                    TopicCache* tc) noexcept nogil:
    """check_record_into, the topic checked only when it differs from the last legal one."""
    cdef const char* t
    if check_record_but_topic_into(p, avail, check_crc, expected_phy, r) != REC_OK:
        return r.status
    t = p + r.topic_offset
    if r.topic_len == tc.len and rs_short_equal(t, tc.ptr, r.topic_len):
        return REC_OK
    if not rs_topic_legal(t, r.topic_len):
        return _illegal_topic(r)
    tc.ptr = t
    tc.len = r.topic_len
    return REC_OK


cdef inline int _illegal_topic(RecordInfo* r) noexcept nogil:
    # the CRC covers the body only: a damaged topic must not name a queue
    r.status = REC_CORRUPT
    r.reason = "illegal topic"
    return REC_CORRUPT


cdef inline int check_record_but_topic_into(const char* p, int64_t avail, bint check_crc,
                                            int64_t expected_phy, RecordInfo* r
                                            ) noexcept nogil:
    """check_record_into but for the topic's characters, which the caller checks (once per
    distinct topic: rs_topic_legal)."""
    cdef uint32_t magic
    r.reason = NULL
    if avail < 8:
        r.status = REC_END
        return REC_END
    r.size = rs_get_i32(p)
    magic = rs_get_u32(p + 4)
    if magic == BLANK_MAGIC:
        r.status = REC_BLANK
        if r.size < 8 or r.size > avail:
            r.status = REC_CORRUPT
            r.reason = "END_FILE blank size out of range"
        return r.status
    if r.size == 0 and magic == 0:
        r.status = REC_END
        return REC_END
    r.status = REC_CORRUPT
    if magic != MESSAGE_MAGIC:
        r.reason = "bad magic code"
        return REC_CORRUPT
    r.reason = record_layout(p, avail, r)
    if r.reason != NULL:
        return REC_CORRUPT
    if r.props_len > 0 and p[r.size - 1] == 0:
        # the writer never ends properties with NUL: a zeroed tail is a torn record
        r.reason = "properties end in NUL bytes (torn record)"
        return REC_CORRUPT
    if expected_phy >= 0 and r.phy_offset != expected_phy:
        r.reason = "physical offset does not match the record's position"
        return REC_CORRUPT
    if (r.queue_offset | r.queue_id) < 0:
        r.reason = "negative queue id or queue offset"
        return REC_CORRUPT
    if check_crc and (rs_crc32(0, p + r.body_offset, r.body_len) & 0x7FFFFFFF) != rs_get_u32(p + 8):
        r.reason = "body CRC mismatch"
        return REC_CORRUPT
    r.status = REC_OK
    return REC_OK


cdef inline RecordInfo check_record(const char* p, int64_t avail, bint check_crc,
                                    int64_t expected_phy) noexcept nogil:
    """Validate the record at p with avail readable bytes; never reads outside [p, p+avail)."""
    cdef RecordInfo r
    memset(&r, 0, sizeof(RecordInfo))
    check_record_into(p, avail, check_crc, expected_phy, &r)
    return r


# Why a record is not REC_OK, as text
cdef str status_text(RecordInfo info)
