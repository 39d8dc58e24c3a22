# The columnar decode's state and its pass over the records (columnar_decode.pyx), driven by
# columnar.pyx.
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t

from rocketstore._native.columnar_buffers cimport B_COUNT, Buf
from rocketstore._native.hosts cimport HOST_TEXT
from rocketstore._native.properties cimport PairTable, Props
from rocketstore._native.record cimport RecordInfo

cdef enum:
    MAX_BYTES = 2147483647      # of data in one string/binary column (32-bit offsets)
    BORN_SLOTS = 64             # host caches (powers of two)
    STORE_SLOTS = 8
    HEADROOM_MAX = 16 << 10     # the most a refresh makes room for ahead of the rows' bounds


cdef struct HostCache:
    int alen                    # address length (4 or 16); 0 = empty
    uint64_t k0                 # the raw address + port, as words
    uint64_t k1
    uint32_t k2
    int text_len
    char text[HOST_TEXT]        # 'ip:port'
    char hex[40]                # upper-case hex of address + port: the msg_id prefix


cdef struct Totals:
    int64_t topic
    int64_t born
    int64_t store
    int64_t msg_id
    int64_t tags
    int64_t key_tokens
    int64_t keys
    int64_t pairs
    int64_t names
    int64_t values
    int64_t body


cdef struct Ctx:
    const char* base
    int64_t limit               # readable bytes of the source
    int64_t base_offset         # -1: take PHYSICALOFFSET from the record, unchecked
    bint include_body
    bint body_view              # body as binary_view into the source (not spark)
    int row_width[B_COUNT]      # _ROW_WIDTH, with 16 for the body views
    int view_shift              # a body view's data buffer: its source offset >> view_shift
    int64_t* extra              # (offset, length) of bodies too long for those buffers
    int64_t nextra
    int64_t extra_cap
    bint check_crc
    bint ts_us
    int64_t max_bytes
    # scratch
    PairTable pt
    char* props_buf             # allocated on the first invalid UTF-8
    char* topic_buf
    HostCache* hosts            # BORN_SLOTS born-host entries, then STORE_SLOTS store-host ones
    HostCache* last_born        # the entries the previous record used (IPv4 fast path)
    HostCache* last_store
    # the output: rows taken, buffers, and how much of each data/item buffer is filled
    int64_t rows
    int64_t row_cap             # the row-indexed buffers hold row_cap + 1 entries
    Buf b[B_COUNT]
    Totals fill
    int64_t tag_nulls           # rows without TAGS
    int64_t budget              # bytes of record bounds that fit without a check (_refresh)
    int64_t headroom            # the next refresh's headroom
    int64_t spent               # the sum of the rows' bounds: no column holds more
    # where and why the walk stopped
    RecordInfo stop_info
    int64_t stop_pos
    int64_t bad_index           # decode_positions: the failing position's index, or -1
    int oversize                # 1: stopped for max_bytes
    int oom                     # 1: out of memory


cdef struct Rec:
    # one record's parse
    RecordInfo info
    const char* topic
    int32_t topic_len
    const char* topic_end       # readable up to here (for the block copies of _put)
    const char* props
    int32_t props_len
    const char* props_end
    Props pr                    # the pair table's parse (taken only when needed)
    const char* tag_v           # the TAGS value, when tag_n >= 0
    int32_t tag_n
    const char* key_v           # the KEYS value, when key_n >= 0
    int32_t key_n


# Set up c for a decode (MemoryError, or ValueError naming a bad argument); ctx_free frees
# what it holds, the buffers not handed to Arrow included
cdef int ctx_init(Ctx* c, int64_t base_offset, bint include_body, bint check_crc, bint spark,
                  int64_t max_bytes, bint body_view) except -1
cdef void ctx_free(Ctx* c) noexcept
# Decode the records starting in [start, end) of c.base (they may extend to c.limit)
cdef void walk_region(Ctx* c, int64_t start, int64_t end, int64_t max_records) noexcept nogil
# Decode the records at the given positions, a row each; the first bad one stops the walk
cdef void walk_positions(Ctx* c, const int64_t* positions, int64_t n) noexcept nogil
