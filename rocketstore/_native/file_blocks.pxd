# Blocks on disk of a mapped file: allocation ahead of the writes that need them. Shared with
# MappedFile (mapped_file.pyx), which keeps the allocated position these functions move.
from libc.stdint cimport int64_t
from posix.types cimport off_t

cdef enum:
    ALLOCATION_CHUNK = 1 << 20     # a file's default allocation step (MappedFile)


cdef int allocate_blocks(int fd, off_t start, off_t length) noexcept nogil
cdef int reserve_blocks(int fd, int64_t* alloc_pos, int* alloc_errno, int64_t chunk,
                        int64_t file_size, int64_t end) noexcept nogil
cdef int punch_hole(int fd, int64_t start, int64_t end) noexcept nogil
cdef int park_fd(int fd) noexcept nogil
cdef int create_file(str path, int64_t size, int64_t first_blocks) except -1
cdef int size_new_file(int fd, int64_t size, int64_t first_blocks, str path) except -1
cdef int64_t data_end(int fd, int64_t file_size)
cdef bint reads_allocate(int fd)
