# The columnar decode's output buffers (columnar_buffers.pyx), shared by the decode pass
# (columnar_decode.pyx) and the Arrow assembly (columnar.pyx).
from libc.stdint cimport int64_t

cdef enum:
    SLACK = 32                  # spare bytes after each buffer for the block copies
    ARENA_ALIGN = 64
    ARENA_MMAP_MIN = 64 << 10   # smaller buffers come from malloc and are not cached
    ARENA_GRAIN = 64 << 10      # mappings are multiples of this
    ARENA_HUGE = 4 << 20        # mappings this large are multiples of 2 MiB, on huge pages
    HUGE_GRAIN = 2 << 20
    ARENA_SLOTS = 256

# The buffers of a batch: one growable allocation each.
cdef enum:
    B_QUEUE_ID, B_QUEUE_OFFSET, B_COMMITLOG_OFFSET, B_STORE_SIZE, B_SYS_FLAG, B_FLAG,
    B_BORN_TS, B_STORE_TS, B_RECONSUME,
    B_TOPIC_OFF, B_TOPIC, B_BORN_OFF, B_BORN, B_STORE_OFF, B_STORE, B_MSG_ID_OFF, B_MSG_ID,
    B_TAGS_VALID, B_TAGS_OFF, B_TAGS, B_KEYS_LIST_OFF, B_KEYS_OFF, B_KEYS,
    B_PROPS_OFF, B_NAMES_OFF, B_NAMES, B_VALUES_OFF, B_VALUES, B_BODY_OFF, B_BODY,
    B_COUNT


cdef struct Buf:
    char* ptr
    size_t cap                  # allocated bytes
    int mapped                  # 1: an anonymous mapping (grown with mremap, recycled)
    int col                     # which buffer of a batch it is (B_...): its cache key


# bytes per row of the row-indexed buffers (offsets hold one more entry); 0: not row-indexed


cdef inline int row_width(int col) noexcept nogil:
    """Bytes per row of a row-indexed buffer (offsets hold one more entry); 0: not
    row-indexed (data and item buffers, which grow by their content)."""
    if (col == B_QUEUE_ID or col == B_STORE_SIZE or col == B_SYS_FLAG or col == B_FLAG
            or col == B_RECONSUME or col == B_TOPIC_OFF or col == B_BORN_OFF
            or col == B_STORE_OFF or col == B_MSG_ID_OFF or col == B_TAGS_OFF
            or col == B_KEYS_LIST_OFF or col == B_PROPS_OFF or col == B_BODY_OFF):
        return 4
    if (col == B_QUEUE_OFFSET or col == B_COMMITLOG_OFFSET or col == B_BORN_TS
            or col == B_STORE_TS):
        return 8
    if col == B_TAGS_VALID:
        return 1        # a byte per row: more than the bits need
    return 0


# Make b hold at least need bytes, keeping its content (at least doubling); -1 when out of
# memory (b unchanged)
cdef int grow(Buf* b, size_t need) noexcept nogil
# Buffer col of a batch, of about want bytes (it grows on demand); MemoryError when none
cdef int acquire(Buf* b, size_t want, int col) except -1
# Give b's memory back (to the cache when it is a mapping and there is room). GIL held.
cdef void release(Buf* b) noexcept
# The first size bytes of b as a pyarrow Buffer that owns b (b is emptied)
cdef object arrow_buffer(Buf* b, int64_t size)


cdef inline int room(Buf* b, int64_t used) noexcept nogil:
    """b holds used bytes and SLACK more (for the block copies of columnar_decode's _copy);
    -1: out of memory."""
    if <size_t>used + SLACK > b.cap:
        return grow(b, <size_t>used + SLACK)
    return 0
