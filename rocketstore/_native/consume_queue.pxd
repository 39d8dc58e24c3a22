# ConsumeQueue unit placement: shared with the dispatch pass (dispatch.pyx).
from libc.stdint cimport int32_t, int64_t, uint32_t

from rocketstore._native.includes.byteorder cimport rs_put_u32, rs_put_u64
from rocketstore._native.includes.atomic cimport rs_load_i64, rs_store_release_i64
from rocketstore._native.mapped_file cimport MappedFile

cdef enum:
    UNIT = 20
    # A unit that fills a gap (a queue whose first file starts mid-stream): RocketMQ's pre-blank.
    BLANK_SIZE = 0x7FFFFFFF
    # what _place_unit did with a unit
    PLACED = 0
    SKIPPED = 1
    NEXT_FILE = 2


cdef inline void _put_unit(char* p, int64_t phy, int32_t size, int64_t tags) noexcept nogil:
    rs_put_u64(p, <unsigned long long>phy)
    rs_put_u32(p + 8, <uint32_t>size)
    rs_put_u64(p + 12, <unsigned long long>tags)


cdef struct Target:
    char* base              # the queue's last file (wbase), NULL: no file, all slow
    int64_t* wrote          # its wrote_pos, published after each unit
    int64_t from_offset
    int64_t file_size
    const int64_t* alloc    # its allocated position: units past it go to the slow path
    int64_t max_phy         # the queue's max_physic_offset
    bint blocked            # a record went to the slow path: the rest of the queue follows
    bint allow_gap          # a unit past the queue's end may be placed (blank units before
                            # it): only once Python has judged the gap (ConsumeQueue.put_units)


cdef inline int _place_unit(Target* t, int64_t phy, int32_t size, int64_t tags,
                            int64_t qoff, Py_ssize_t* blanks) noexcept nogil:
    """ConsumeQueue.putMessagePositionInfo for one unit of t's file: a record already covered
    (offset + size <= max_phy) is skipped, so re-dispatch is idempotent; a gap before the
    unit is filled with blank units so that position = queue offset * 20 always holds; a unit
    past the file, or past the blocks the file has on disk (the slow path allocates them), or
    one the queue already has for a record past max_phy (a damaged QUEUEOFFSET), is
    NEXT_FILE: Python decides."""
    cdef int64_t expect, cur
    if phy + size <= t.max_phy:
        return SKIPPED
    if qoff < 0:
        return SKIPPED
    if qoff > 230584300921369395LL:     # 2^63 / 40: a unit position past any int64 file
        return NEXT_FILE        # no file holds it: Python judges the record
    expect = qoff * UNIT - t.from_offset
    if expect < 0:
        return NEXT_FILE        # a unit of an earlier file, for a record past the newest
    if expect + UNIT > t.file_size or expect + UNIT > rs_load_i64(t.alloc):
        return NEXT_FILE
    cur = t.wrote[0]
    if expect < cur:
        # a record past the queue's newest one claims a queue offset the queue has: its
        # QUEUEOFFSET is damage (Python marks it: ConsumeQueue.put_units)
        return NEXT_FILE
    if expect > cur and not t.allow_gap:
        # a queue offset past the queue's next one (units missing before it): Python decides
        # whether damage explains the gap (ConsumeQueue.put_units)
        return NEXT_FILE
    while cur < expect:
        _put_unit(t.base + cur, 0, BLANK_SIZE, 0)
        cur += UNIT
        blanks[0] += 1
    _put_unit(t.base + expect, phy, size, tags)
    # readers on other threads see the unit once they see the position (the dispatch pass
    # runs without the GIL, whose hand-over was the barrier before)
    rs_store_release_i64(t.wrote, expect + UNIT)
    t.max_phy = phy + size
    return PLACED


cdef int _target_of(Target* t, MappedFile mf, int64_t max_phy) except -1
