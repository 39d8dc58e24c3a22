# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""ConsumeQueue unit writes: 20-byte units (commitLogOffset int64, size int32, tagsCode int64)."""
from libc.stdint cimport int32_t, int64_t, uint32_t

from rocketstore._native.codec cimport (
    PyEval_RestoreThread,
    PyEval_SaveThread,
    PyThreadState,
    rs_put_u32,
    rs_put_u64,
)
from rocketstore._native.mapped_file cimport MappedFile

DEF UNIT = 20
# A unit that fills a gap (a queue whose first file starts mid-stream): RocketMQ's pre-blank.
DEF BLANK_SIZE = 0x7FFFFFFF


cdef inline void _put_unit(char* p, int64_t phy, int32_t size, int64_t tags) noexcept nogil:
    rs_put_u64(p, <unsigned long long>phy)
    rs_put_u32(p + 8, <uint32_t>size)
    rs_put_u64(p + 12, <unsigned long long>tags)


def write_units(MappedFile mf not None, const int64_t[::1] phys, const int32_t[::1] sizes,
                const int64_t[::1] tags, const int64_t[::1] queue_offsets, Py_ssize_t start,
                int64_t max_physic_offset):
    """Write units start.. into mf at their logical positions, as ConsumeQueue.
    putMessagePositionInfo: a record already covered (offset + size <= max_physic_offset, or
    its unit already written) is skipped, so re-dispatch is idempotent; a gap before a unit is
    filled with blank units so position = queue offset * 20 always holds.

    Returns (next_index, max_physic_offset, skipped, blank_units). next_index < len(phys) means
    the next unit belongs to a later file."""
    cdef Py_ssize_t i, n = phys.shape[0]
    cdef int64_t expect, cur
    cdef Py_ssize_t skipped = 0, blanks = 0
    cdef PyThreadState* _save = NULL
    if sizes.shape[0] != n or tags.shape[0] != n or queue_offsets.shape[0] != n:
        raise ValueError("phys, sizes, tags and queue_offsets must have the same length")
    if mf.read_only:
        raise PermissionError(f"{mf.file_name} is read-only")
    if not mf.hold():
        raise ValueError(f"mapped file {mf.file_name} is being destroyed")
    try:
        _save = PyEval_SaveThread() if n - start >= 4096 else NULL   # small: keep the GIL
        try:
            i = start
            while i < n:
                if phys[i] + sizes[i] <= max_physic_offset:
                    skipped += 1
                    i += 1
                    continue
                expect = queue_offsets[i] * UNIT - mf.file_from_offset
                if expect < 0 or queue_offsets[i] < 0:
                    skipped += 1
                    i += 1
                    continue
                if expect + UNIT > mf.file_size:
                    break
                cur = mf.wrote_pos
                if expect < cur:
                    skipped += 1
                    i += 1
                    continue
                while cur < expect:
                    _put_unit(mf.wbase + cur, 0, BLANK_SIZE, 0)
                    cur += UNIT
                    blanks += 1
                _put_unit(mf.wbase + expect, phys[i], sizes[i], tags[i])
                mf.wrote_pos = expect + UNIT
                max_physic_offset = phys[i] + sizes[i]
                i += 1
        finally:
            if _save != NULL:
                PyEval_RestoreThread(_save)
    finally:
        mf.release()
    return i, max_physic_offset, skipped, blanks
