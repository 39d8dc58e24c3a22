# cython: language_level=3, wraparound=False, cdivision=True
"""ConsumeQueue extension reads for a pull (rocketstore.store.consume_queue_ext): a chunk of
units' tags codes resolved through their ext units, and each unit's bloom filter verdict for
one consumer group, in one pass over the mapped files. Every read is checked against the
file's readable end and the unit's own size, so a torn or foreign ext file gives MISSING,
never a read out of bounds."""
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t

from rocketstore._native.includes.byteorder cimport rs_get_i16, rs_get_i64
from rocketstore._native.mapped_file cimport MappedFile

cdef enum:
    MIN_UNIT = 20       # size int16, tagsCode int64, msgStoreTime int64, bitMapSize int16

# what resolve() says of a unit
PLAIN = 0       # its tagsCode is a tags code (no ext unit)
SKIP = 1        # the bloom filter says the group's expression cannot match it
MAYBE = 2       # the bloom filter says it may match
NO_BLOOM = 3    # ext unit read (tags code resolved) but no verdict: no bitmap, another
                # length, a record older than the group's filter, or no group asked
MISSING = 4     # an ext address whose unit cannot be read: tags code unknown

cdef int64_t MAX_ADDR = -2147483649LL       # Integer.MIN_VALUE - 1
cdef int64_t LONG_MIN = -9223372036854775807LL - 1


def resolve(const int64_t[::1] phys not None, const int64_t[::1] tags not None,
            list files not None, int64_t file_size, const int32_t[::1] bit_pos,
            int32_t bit_num, int64_t born_phy, int64_t[::1] out_tags not None,
            uint8_t[::1] out_state not None):
    """For units (phys[i], tags[i]): out_tags[i] the real tags code, out_state[i] PLAIN, SKIP,
    MAYBE, NO_BLOOM or MISSING. files: the extension's mapped files in order (segments of
    file_size bytes). bit_pos / bit_num: the group's BloomFilterData (bit_pos None: no
    verdicts); units whose record starts below born_phy get no verdict (their bitmap was
    computed before the group's filter was known). Returns the number of SKIP units."""
    cdef Py_ssize_t n = phys.shape[0], i, j, k = 0, nfiles = len(files), idx
    cdef Py_ssize_t skipped = 0
    cdef int64_t t, real, first_from, pos, limit
    cdef int16_t size, bitmap_size
    cdef const char* p
    cdef MappedFile mf
    cdef bint hit
    cdef int32_t b
    if tags.shape[0] != n or out_tags.shape[0] < n or out_state.shape[0] < n:
        raise ValueError("phys, tags, out_tags and out_state must have the same length")
    if file_size <= 0:
        raise ValueError(f"file_size must be positive, got {file_size}")
    if bit_pos is not None:
        k = bit_pos.shape[0]
        for j in range(k):
            if bit_pos[j] < 0 or bit_pos[j] >= bit_num:
                raise ValueError(f"bit position {bit_pos[j]} outside [0, {bit_num})")
    held = []
    try:
        for f in files:
            if (<MappedFile?>f).hold():
                held.append(f)
            else:
                held.append(None)       # being deleted: its units read as MISSING
        first_from = (<MappedFile>files[0]).file_from_offset if nfiles else 0
        for i in range(n):
            t = tags[i]
            if t > MAX_ADDR:
                out_tags[i] = t
                out_state[i] = PLAIN
                continue
            out_tags[i] = 0
            out_state[i] = MISSING
            real = t - LONG_MIN
            if nfiles == 0 or real < first_from:
                continue
            idx = <Py_ssize_t>((real - first_from) // file_size)
            if idx >= nfiles or held[idx] is None:
                continue
            mf = <MappedFile>held[idx]
            pos = real - mf.file_from_offset
            if pos < 0 or pos >= mf.file_size:
                continue
            limit = mf.read_limit()
            if pos + MIN_UNIT > limit:
                continue
            p = mf.base + pos
            size = rs_get_i16(p)
            if size < MIN_UNIT or pos + size > limit:
                continue
            bitmap_size = rs_get_i16(p + 18)
            if bitmap_size > size - MIN_UNIT:
                continue
            out_tags[i] = rs_get_i64(p + 2)
            if k == 0 or bitmap_size <= 0 or <int32_t>bitmap_size * 8 != bit_num \
                    or phys[i] < born_phy:
                out_state[i] = NO_BLOOM
                continue
            hit = True
            for j in range(k):
                b = bit_pos[j]
                if not (<uint8_t>p[MIN_UNIT + (b >> 3)] & (1 << (b & 7))):
                    hit = False
                    break
            if hit:
                out_state[i] = MAYBE
            else:
                out_state[i] = SKIP
                skipped += 1
    finally:
        for f in held:
            if f is not None:
                (<MappedFile>f).release()
    return skipped
