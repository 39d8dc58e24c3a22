# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The columnar decode's output buffers: one growable allocation per Arrow buffer of a batch
(malloc when small, else an anonymous mapping grown with mremap), handed to Arrow without a
copy and recycled when the batch dies."""
cimport cython
from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy
from posix.mman cimport (
    MAP_ANONYMOUS, MAP_FAILED, MAP_PRIVATE, PROT_READ, PROT_WRITE, madvise, mmap, munmap,
)

import pyarrow as pa


cdef extern from "<sys/mman.h>" nogil:
    enum: MADV_HUGEPAGE
    enum: MREMAP_MAYMOVE
    enum: MREMAP_FIXED
    enum: MAP_NORESERVE
    enum: PROT_NONE
    void* mremap(void* old_address, size_t old_size, size_t new_size, int flags, ...)


cdef void* _remap_huge(char* old, size_t old_cap, size_t cap) noexcept nogil:
    """mremap old to cap bytes at a 2 MiB boundary (so that huge pages can back it; a plain
    mremap may move it anywhere): a reservation of cap + 2 MiB, the mapping moved onto its
    aligned part, the rest of the reservation unmapped. MAP_FAILED on failure (old intact)."""
    cdef char* r = <char*>mmap(NULL, cap + HUGE_GRAIN, PROT_NONE,
                               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
    cdef char* a
    cdef void* p
    if <void*>r == MAP_FAILED:
        return MAP_FAILED
    a = <char*>((<size_t>r + HUGE_GRAIN - 1) & ~(<size_t>HUGE_GRAIN - 1))
    p = mremap(old, old_cap, cap, MREMAP_MAYMOVE | MREMAP_FIXED, a)
    if p == MAP_FAILED:
        munmap(r, cap + HUGE_GRAIN)
        return MAP_FAILED
    if a > r:
        munmap(r, a - r)
    if r + cap + HUGE_GRAIN > a + cap:
        munmap(a + cap, (r + cap + HUGE_GRAIN) - (a + cap))
    return p


cdef int grow(Buf* b, size_t need) noexcept nogil:
    """Make b hold at least need bytes, keeping its content (at least doubling). Mappings
    grow with mremap (no copy, the pages already touched stay); a malloc block that passes
    ARENA_MMAP_MIN moves to a mapping. -1 when out of memory (b unchanged)."""
    cdef size_t cap = b.cap * 2
    cdef void* p
    if cap < need:
        cap = need
    if cap >= ARENA_HUGE:
        cap = (cap + HUGE_GRAIN - 1) // HUGE_GRAIN * HUGE_GRAIN
    elif b.mapped or cap >= ARENA_MMAP_MIN:
        cap = (cap + ARENA_GRAIN - 1) // ARENA_GRAIN * ARENA_GRAIN
    else:
        cap = (cap + ARENA_ALIGN - 1) // ARENA_ALIGN * ARENA_ALIGN
    if b.mapped:
        if cap >= ARENA_HUGE:
            p = _remap_huge(b.ptr, b.cap, cap)
        else:
            p = mremap(b.ptr, b.cap, cap, MREMAP_MAYMOVE)
        if p == MAP_FAILED:
            return -1
    elif cap >= ARENA_MMAP_MIN:
        p = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        if p == MAP_FAILED:
            return -1
        if b.ptr != NULL:
            memcpy(p, b.ptr, b.cap)
            free(b.ptr)
        b.mapped = 1
    else:
        p = realloc(b.ptr, cap)
        if p == NULL:
            return -1
    if cap >= ARENA_HUGE:
        madvise(p, cap, MADV_HUGEPAGE)
    b.ptr = <char*>p
    b.cap = cap
    return 0


# Freed mappings kept for reuse (GIL-protected): re-using the pages of earlier batches saves
# the kernel zeroing fresh ones (that was half the decode time with fresh memory per batch).
cdef char* _free_ptr[ARENA_SLOTS]
cdef size_t _free_cap[ARENA_SLOTS]
cdef int _free_col[ARENA_SLOTS]
cdef int _nfree = 0
cdef size_t _free_bytes = 0
cdef size_t _cache_limit = 512 << 20


def set_buffer_cache(size_t max_bytes):
    """How many bytes of freed batch memory to keep for reuse (default 512 MiB; 0 disables).
    Returns the previous limit."""
    global _cache_limit
    cdef size_t old = _cache_limit
    _cache_limit = max_bytes
    while _nfree and _free_bytes > _cache_limit:
        _drop_free(0)
    return old


cdef void _drop_free(int i) noexcept:
    global _nfree, _free_bytes
    munmap(_free_ptr[i], _free_cap[i])
    _free_bytes -= _free_cap[i]
    _nfree -= 1
    _free_ptr[i] = _free_ptr[_nfree]
    _free_cap[i] = _free_cap[_nfree]
    _free_col[i] = _free_col[_nfree]


cdef void release(Buf* b) noexcept:
    """Give b's memory back: to the cache when it is a mapping and there is room. GIL held."""
    global _nfree, _free_bytes
    if b.ptr == NULL:
        return
    if not b.mapped:
        free(b.ptr)
    elif _nfree < ARENA_SLOTS and _free_bytes + b.cap <= _cache_limit:
        _free_ptr[_nfree] = b.ptr
        _free_cap[_nfree] = b.cap
        _free_col[_nfree] = b.col
        _nfree += 1
        _free_bytes += b.cap
    else:
        munmap(b.ptr, b.cap)
    b.ptr = NULL
    b.cap = 0
    b.mapped = 0


cdef int acquire(Buf* b, size_t want, int col) except -1:
    """Buffer col of a batch, of about want bytes (it grows on demand): from malloc when
    small, else a cached mapping: the smallest that served the same buffer before and fits,
    or the largest of those (grown; its pages are the ones that buffer touched before, so
    they need no faulting in again), or the smallest other one that fits; else a new
    mapping."""
    global _nfree, _free_bytes
    cdef int i, best = -1, same = -1, other = -1
    b.ptr = NULL
    b.cap = 0
    b.mapped = 0
    b.col = col
    if want < ARENA_MMAP_MIN:
        b.ptr = <char*>malloc(want)
        if b.ptr == NULL:
            raise MemoryError()
        b.cap = want
        return 0
    for i in range(_nfree):
        if _free_col[i] == col:
            if _free_cap[i] >= want:
                if best < 0 or _free_cap[i] < _free_cap[best]:
                    best = i
            elif same < 0 or _free_cap[i] > _free_cap[same]:
                same = i
        elif _free_cap[i] >= want and (other < 0 or _free_cap[i] < _free_cap[other]):
            other = i
    if best < 0:
        best = same if same >= 0 else other
    if best >= 0:
        b.ptr = _free_ptr[best]
        b.cap = _free_cap[best]
        b.mapped = 1
        _free_bytes -= b.cap
        _nfree -= 1
        _free_ptr[best] = _free_ptr[_nfree]
        _free_cap[best] = _free_cap[_nfree]
        _free_col[best] = _free_col[_nfree]
    if b.cap < want and grow(b, want) < 0:
        release(b)
        raise MemoryError(f"cannot allocate {want} bytes for a batch")
    return 0


@cython.final
cdef class _Arena:
    """One filled buffer of a batch; the Arrow buffer over it keeps it alive. When that dies,
    the memory goes back to the cache."""
    cdef Buf b

    def __dealloc__(self):
        release(&self.b)


cdef object arrow_buffer(Buf* b, int64_t size):
    """The first size bytes of b as a pyarrow Buffer that owns b (b is emptied)."""
    cdef _Arena a = _Arena.__new__(_Arena)
    a.b = b[0]
    b.ptr = NULL
    b.cap = 0
    b.mapped = 0
    return pa.foreign_buffer(<size_t>a.b.ptr, size, base=a)


def buffer_cache_info():
    """(arenas, bytes) of freed batch memory kept for reuse."""
    return _nfree, _free_bytes
