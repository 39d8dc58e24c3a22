# IndexFile: shared declarations (the batch build in index_build.pyx and the dispatch pass in
# dispatch.pyx put keys natively; the file's bytes are index_layout.pxd's).
from libc.stdint cimport int32_t, int64_t

from rocketstore._native.mapped_file cimport MappedFile


cdef class IndexFile:
    cdef readonly MappedFile mapped_file
    cdef readonly int32_t hash_slot_num
    cdef readonly int32_t index_num
    cdef readonly bint writable
    cdef int64_t items_at
    # Blocks on disk: the file is sparse. Hash slots are written anywhere, so each page of
    # them gets its blocks when a put first touches it (a bit per page here); items are
    # written in order and have blocks up to items_alloc.
    cdef unsigned char* slot_pages
    cdef int64_t items_alloc
    cdef int64_t room_page          # a slot page whose allocation failed (-1: none)
    # The header, as RocketMQ's IndexHeader keeps it in memory (and writes it through).
    cdef int64_t _begin_ts
    cdef int64_t _end_ts
    cdef int64_t _begin_phy
    cdef int64_t _end_phy
    cdef int32_t _slot_count
    cdef int32_t _index_count

    cdef void _init(self, MappedFile mf, int32_t hash_slot_num, int32_t index_num,
                    bint writable)
    cdef void _write_header(self, char* b) noexcept nogil
    cdef int _hold_base(self, char** base) except -1
    cdef int _check_writable(self) except -1
    cdef int _page_room(self, int64_t page) noexcept nogil
    cdef bint _put(self, char* base, int32_t key_hash, int64_t phy, int64_t ts) noexcept nogil
    cdef Py_ssize_t _walk(self, const char* base, int32_t key_hash, int32_t start,
                          int64_t* out, Py_ssize_t max_out, int64_t begin, int64_t end,
                          int32_t* next_out) noexcept nogil
    cdef int _select_into(self, list out, int32_t key_hash, int32_t start, Py_ssize_t max_out,
                          int64_t begin, int64_t end, int32_t* next_out) except -1
