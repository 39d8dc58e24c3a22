# The CommitLog record codec (FORMAT.md "CommitLog record (v1)"): shared declarations.
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint32_t


cdef extern from "rs_bytes.h" nogil:
    void rs_put_u16(char* p, unsigned short v)
    void rs_put_u32(char* p, uint32_t v)
    void rs_put_u64(char* p, unsigned long long v)
    int16_t rs_get_i16(const char* p)
    int32_t rs_get_i32(const char* p)
    int64_t rs_get_i64(const char* p)
    unsigned short rs_get_u16(const char* p)
    uint32_t rs_get_u32(const char* p)
    void rs_release_fence()
    bint rs_has_byte_below3(const char* p, size_t n)
    const char* rs_find_below3(const char* p, const char* end)


cdef extern from "Python.h":
    # released by hand where a loop is worth it (dispatch_region, write_units, build_index)
    ctypedef struct PyThreadState
    PyThreadState* PyEval_SaveThread()
    void PyEval_RestoreThread(PyThreadState* state)

cdef extern from "rs_crc32.h" nogil:
    void rs_crc32_init()
    uint32_t rs_crc32(uint32_t crc, const void* buf, size_t length)
    const char* rs_crc32_impl()

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

# sizes and field offsets only (no magic/offset/CRC): NULL when consistent, else the reason
cdef const char* record_layout(const char* p, int64_t avail, RecordInfo* r) noexcept nogil
cdef RecordInfo check_record(const char* p, int64_t avail, bint check_crc,
                             int64_t expected_phy) noexcept nogil
cdef int32_t java_hash_str(str s)
# Java String.hashCode continued over the UTF-16 units Java's UTF-8 decoder makes of s[0:n]
cdef uint32_t hash_utf8(uint32_t h, const unsigned char* s, Py_ssize_t n) noexcept nogil
cdef int64_t tags_code_of(const char* props, int32_t props_len) noexcept nogil
# end of the property pair at p (its \x02 or end); sep: its first \x01 or NULL
cdef const char* next_property(const char* p, const char* end, const char** sep) noexcept nogil
