# The CommitLog record codec (FORMAT.md "CommitLog record (v1)"): shared declarations.
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy, memset


from rocketstore._native.includes.byteorder cimport (
    rs_get_i16, rs_get_i32, rs_get_i64, rs_get_u16, rs_get_u32, rs_put_u16, rs_put_u32,
    rs_put_u64,
)
from rocketstore._native.includes.crc32 cimport rs_crc32, rs_crc32_impl, rs_crc32_init
from rocketstore._native.includes.python cimport (
    PyEval_RestoreThread, PyEval_SaveThread, PyThreadState,
)
from rocketstore._native.includes.scan cimport rs_find_pair_end


# Record layout constants (offsets for IPv4 hosts).
cdef enum:
    MESSAGE_MAGIC = 0xDAA320A7
    BLANK_MAGIC = 0xCBD43194
    MIN_RECORD_SIZE = 91
    END_FILE_MIN_BLANK_LENGTH = 8
    MAX_TOPIC_LENGTH = 127
    MAX_PROPERTIES_LENGTH = 32767
    SYSFLAG_TRANSACTION_MASK = 0xC
    SYSFLAG_PREPARED = 0x4
    SYSFLAG_ROLLBACK = 0xC
    SYSFLAG_BORNHOST_V6 = 0x10
    SYSFLAG_STOREHOST_V6 = 0x20

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

# The record validation, inline so that every decoder compiles it into its loop.

cdef inline const char* record_layout(const char* p, int64_t avail, RecordInfo* r) noexcept nogil:
    """Size and field offsets of the v1 record at p (magic, offset and CRC not checked), every
    length bounds-checked against avail: NULL when they are consistent, else why not. Shared
    by check_record and by decoders re-reading a record check_record already accepted."""
    cdef int32_t off, bh, sh
    r.size = rs_get_i32(p) if avail >= 4 else 0
    if r.size < MIN_RECORD_SIZE or r.size > avail:
        return "total size out of range"
    r.queue_id = rs_get_i32(p + 12)
    r.queue_offset = rs_get_i64(p + 20)
    r.phy_offset = rs_get_i64(p + 28)
    r.sys_flag = rs_get_i32(p + 36)
    bh = 16 if r.sys_flag & SYSFLAG_BORNHOST_V6 else 4
    sh = 16 if r.sys_flag & SYSFLAG_STOREHOST_V6 else 4
    r.born_host_len = bh
    r.store_host_len = sh
    off = 48 + bh + 4
    r.store_ts_offset = off
    if off + 8 + sh + 4 + 4 + 8 + 4 > r.size:
        return "header runs past the record"
    r.store_ts = rs_get_i64(p + off)
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


cdef int32_t java_hash_str(str s)
# Java String.hashCode continued over the UTF-16 units Java's UTF-8 decoder makes of s[0:n]
cdef uint32_t hash_utf8(uint32_t h, const unsigned char* s, Py_ssize_t n) noexcept nogil
cdef int64_t tags_code_of(const char* props, int32_t props_len) noexcept nogil


# ---- the properties dispatch reads: TAGS (tags code), KEYS and UNIQ_KEY (index keys) ----------

cdef struct KeyProps:
    const char* tags        # each value, NULL when absent
    const char* keys
    const char* uniq
    int32_t tags_len
    int32_t keys_len
    int32_t uniq_len


cdef inline void find_key_props(const char* props, int32_t props_len, KeyProps* out) noexcept nogil:
    """TAGS, KEYS and UNIQ_KEY in one walk of a record's properties, as RocketMQ's
    string2messageProperties reads them: pairs split on \x02, name and value on the first
    \x01, both non-empty; a later pair with the same name wins (HashMap.put). Only the pair
    ends are searched for: a pair is one of the three when it starts with the name and a
    \x01 (a name holds no \x01, so that is its first). Reads only [props, props_len)."""
    cdef const char* p = props
    cdef const char* end = props + props_len
    cdef const char* q
    cdef Py_ssize_t n
    out.tags = out.keys = out.uniq = NULL
    out.tags_len = out.keys_len = out.uniq_len = 0
    while p < end:
        q = rs_find_pair_end(p, end)
        n = q - p
        if n > 5 and p[4] == 1:
            if memcmp(p, b"TAGS", 4) == 0:
                out.tags = p + 5
                out.tags_len = <int32_t>(n - 5)
            elif memcmp(p, b"KEYS", 4) == 0:
                out.keys = p + 5
                out.keys_len = <int32_t>(n - 5)
        elif n > 9 and p[8] == 1 and memcmp(p, b"UNIQ_KEY", 8) == 0:
            out.uniq = p + 9
            out.uniq_len = <int32_t>(n - 9)
        p = q + 1


cdef inline uint32_t hash_text(uint32_t h, const unsigned char* s, Py_ssize_t n) noexcept nogil:
    """hash_utf8, with ASCII text hashed here, eight bytes a step (Java's h*31 + c, unrolled:
    the eight bytes' terms do not wait on h); from the first non-ASCII byte on, hash_utf8."""
    cdef uint64_t w
    cdef Py_ssize_t i = 0
    while i + 8 <= n:
        memcpy(&w, s + i, 8)
        if w & 0x8080808080808080ULL:
            return hash_utf8(h, s + i, n - i)
        h = (h * 2487512833u                                    # 31^8 mod 2^32
             + <uint32_t>s[i] * 1742810335u + <uint32_t>s[i + 1] * 887503681u
             + <uint32_t>s[i + 2] * 28629151u + <uint32_t>s[i + 3] * 923521u
             + <uint32_t>s[i + 4] * 29791u + <uint32_t>s[i + 5] * 961u
             + <uint32_t>s[i + 6] * 31u + <uint32_t>s[i + 7])
        i += 8
    while i < n and s[i] < 0x80:
        h = h * 31 + s[i]
        i += 1
    return hash_utf8(h, s + i, n - i) if i < n else h


cdef inline int64_t tags_code_in(const KeyProps* kp) noexcept nogil:
    """tagsCode from the properties find_key_props read: hashCode of TAGS, 0 when absent."""
    if kp.tags == NULL:
        return 0
    return <int32_t>hash_text(0, <const unsigned char*>kp.tags, kp.tags_len)
