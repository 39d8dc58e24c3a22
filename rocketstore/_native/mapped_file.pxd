# One memory-mapped segment file (RocketMQ's MappedFile). Shared with the record writer, decoders
# and indexes, which write straight into `wbase` and read from `base`.
from libc.stdint cimport int64_t

from rocketstore._native.write_through cimport WriteThrough


cdef class MappedFile:
    cdef readonly str file_name
    cdef readonly int64_t file_from_offset
    cdef readonly int64_t file_size
    cdef readonly bint read_only
    cdef char* base            # the mapped file
    cdef char* wbase           # where appends land: base, a transient-pool buffer, or the
                               # write-through buffer
    cdef object write_buffer   # keeps that pool buffer alive while it is lent to us
    cdef WriteThrough through  # write-through: its buffer (owned here) and committer lock
    cdef bint buffered         # appends land outside the mapping: readers stop at committed
    cdef readonly bint write_through  # committed by pwrite, made durable by fdatasync
    cdef int fd
    cdef int parked_fd         # fd's number after a forced detach, on /dev/null until the
                               # last holder lets go (a holder may still be using it)
    cdef int64_t wrote_pos     # bytes appended (published after the copy)
    cdef int64_t committed_pos # bytes in the mapped file (== wrote_pos without a pool)
    cdef int64_t flushed_pos   # bytes made durable by msync
    cdef int64_t store_ts      # store timestamp of the newest record written here
    cdef int64_t alloc_pos     # [0, alloc_pos) has blocks on disk: no write goes past it
    cdef int64_t alloc_chunk   # reserve() allocates at least this much beyond alloc_pos
    cdef int alloc_errno       # errno of the last failed allocation (0: none yet)
    cdef long ref_count
    cdef bint available
    cdef bint cleanup_over
    cdef bint locked
    cdef double first_shutdown_ms

    cdef inline int64_t read_limit(self) noexcept nogil:
        return self.committed_pos if self.buffered else self.wrote_pos
    cpdef bint hold(self)
    cpdef void release(self)
    cdef void _cleanup(self)
    cdef void _close_fds(self) noexcept
    cdef _check_pos(self, str field, int64_t pos)
    cdef int _check_open(self) except -1
    cdef int _check_writable(self) except -1
    cdef int reserve(self, int64_t end) noexcept nogil
    cdef int reserve_range(self, int64_t start, int64_t end) noexcept nogil
    cdef int _reserve_or_raise(self, int64_t end) except -1
    cdef int write_through_to(self, int64_t end) noexcept nogil
    cdef int sync_range(self, int64_t start, int64_t end) noexcept nogil
    cdef void _drop_through_buffer(self) noexcept nogil
