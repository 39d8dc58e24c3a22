# Faulting a mapped file's pages in and the page-cache hints: shared with MappedFile.
from libc.stdint cimport int64_t


cdef int populate(char* base, int64_t first, int64_t end, const bint* available) noexcept nogil
cdef void note_no_populate_write()
cdef void touch_pages(char* base, int64_t size, bint sync, int64_t every) noexcept nogil
cdef void soft_fail(str kind, str path, int err)
