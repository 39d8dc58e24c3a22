# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Write-through of a mapped file (MappedFile.enable_write_through).

Appends go to an anonymous buffer of the file's size, and a commit hands [committed, end) to
the file with pwrite; a flush then fdatasyncs. Buffer pages behind the committed position
are given back to the OS as it moves, in steps of RELEASE_CHUNK.
"""
from libc.stdint cimport int64_t
from libc.errno cimport EINTR, errno
from posix.mman cimport (
    MADV_DONTNEED, MAP_ANONYMOUS, MAP_FAILED, MAP_NORESERVE, MAP_PRIVATE, PROT_READ,
    PROT_WRITE, madvise, mmap, munmap,
)
from posix.unistd cimport pwrite

from rocketstore._native.includes.atomic cimport rs_store_release_i64

cdef enum:
    OS_PAGE_SIZE = 4096
    # buffer pages below the committed position go back to the OS this many bytes at a time
    # (one madvise, one TLB flush per 4 MiB, a few MiB resident at most)
    RELEASE_CHUNK = 4 << 20


cdef void init_write_through(WriteThrough* wt) noexcept nogil:
    wt.buf = NULL
    wt.released_pos = 0
    pthread_mutex_init(&wt.mu, NULL)


cdef void destroy_write_through(WriteThrough* wt, int64_t size) noexcept nogil:
    close_buffer(wt, size)
    pthread_mutex_destroy(&wt.mu)


cdef int open_buffer(WriteThrough* wt, int64_t size, int64_t wrote_pos) noexcept nogil:
    """Map the anonymous buffer of size bytes for appends from wrote_pos on; 0 or errno."""
    cdef void* addr = mmap(NULL, <size_t>size, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
    if addr == MAP_FAILED:
        return errno
    wt.buf = <char*>addr
    wt.released_pos = wrote_pos - wrote_pos % OS_PAGE_SIZE
    return 0


cdef int commit_through(WriteThrough* wt, int fd, int64_t* committed_pos, int64_t end,
                        int64_t file_size) noexcept nogil:
    """pwrite [*committed_pos, end) from the buffer into the file, publishing the new
    committed position as it goes, and give buffer pages behind it back. The caller holds
    wt.mu and drops the buffer once the file is committed to its end; the writer only writes
    at and past end. 0 or errno."""
    cdef int64_t pos = committed_pos[0], cut, data_end
    cdef ssize_t n
    cdef int err = 0
    if end > file_size:
        end = file_size
    data_end = end
    if end == file_size:
        # the file ends with an END_FILE blank: readers skip what follows its header, so
        # the zeros after it are not written (nor given blocks past the allocated end)
        while data_end > pos and wt.buf[data_end - 1] == 0:
            data_end -= 1
    while pos < data_end:
        n = pwrite(fd, wt.buf + pos, <size_t>(data_end - pos), pos)
        if n < 0:
            if errno == EINTR:
                continue
            err = errno
            break
        pos += n
        rs_store_release_i64(committed_pos, pos)
    if err == 0 and pos < end:
        pos = end
        rs_store_release_i64(committed_pos, pos)
    if err == 0:
        cut = pos - pos % OS_PAGE_SIZE
        if cut < wt.released_pos:       # positions moved back (a truncation)
            wt.released_pos = cut
        if cut - wt.released_pos >= RELEASE_CHUNK:
            madvise(wt.buf + wt.released_pos, <size_t>(cut - wt.released_pos), MADV_DONTNEED)
            wt.released_pos = cut
    return err


cdef void close_buffer(WriteThrough* wt, int64_t size) noexcept nogil:
    """Give the buffer back (the file is committed to its end, or closing)."""
    cdef char* buf = wt.buf
    if buf == NULL:
        return
    wt.buf = NULL
    munmap(buf, <size_t>size)
