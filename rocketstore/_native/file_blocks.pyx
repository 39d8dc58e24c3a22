# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Blocks on disk of a mapped file.

A new file has its full size but is sparse; its blocks are allocated (posix_fallocate) from
the start in steps of an allocation chunk as writes need them, and the file's allocated
position says how far they go. Nothing ever writes past it: a store of three messages stays
small, and a full disk makes an allocation fail with ENOSPC (a status for the caller) instead
of a write into a page without blocks, which the kernel answers with SIGBUS.
"""
import os

from libc.stdint cimport int64_t
from libc.errno cimport EBADF, EINTR
from posix.fcntl cimport O_CLOEXEC, O_RDONLY, open as c_open, posix_fallocate
from posix.unistd cimport close as c_close
from posix.types cimport off_t

from rocketstore._native.includes.atomic cimport rs_load_i64, rs_store_max_i64

cdef extern from "<sys/vfs.h>" nogil:
    ctypedef struct statfs_t "struct statfs":
        long f_type
    int fstatfs(int fd, statfs_t* buf)

cdef enum:
    TMPFS_MAGIC = 0x01021994

cdef extern from "<fcntl.h>" nogil:
    int fallocate(int fd, int mode, off_t offset, off_t length)

cdef extern from "<unistd.h>" nogil:
    int dup3(int oldfd, int newfd, int flags)
    enum:
        FALLOC_FL_KEEP_SIZE
        FALLOC_FL_PUNCH_HOLE

cdef enum:
    OS_PAGE_SIZE = 4096

#: Default allocation step of a file (MappedFile.allocation_chunk).
DEFAULT_ALLOCATION_CHUNK = ALLOCATION_CHUNK


cdef int create_file(str path, int64_t size, int64_t first_blocks) except -1:
    """Create a sparse file of its full size with blocks for its first first_blocks bytes,
    under a hidden name, then rename it into place, so a reader listing the directory (a
    read-only open beside the writer) never sees it short. Returns its descriptor. Raises
    OSError (ENOSPC ...) and leaves nothing behind when the blocks cannot be had."""
    head, name = os.path.split(path)
    tmp = os.path.join(head, f".{name}.creating")
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        size_new_file(fd, size, first_blocks, path)
        os.rename(tmp, path)
    except BaseException:
        os.close(fd)
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return fd


cdef int size_new_file(int fd, int64_t size, int64_t first_blocks, str path) except -1:
    """Give a new (empty) file its size, sparse, and blocks for [0, first_blocks)."""
    cdef int rc
    cdef off_t length = <off_t>min(first_blocks, size)
    os.ftruncate(fd, size)
    if length > 0:
        with nogil:
            rc = allocate_blocks(fd, 0, length)
        if rc != 0:
            raise OSError(rc, f"allocating {length:,} bytes for {path} failed: "
                              f"{os.strerror(rc)}", path)
    return 0


cdef int64_t data_end(int fd, int64_t file_size):
    """Offset of the file's first hole (lseek SEEK_HOLE): the bytes before it have blocks.
    The file size where the file system cannot tell, 0 when the call fails."""
    try:
        return min(os.lseek(fd, 0, os.SEEK_HOLE), file_size)
    except (OSError, AttributeError):
        return 0


cdef bint reads_allocate(int fd):
    """True on tmpfs, where reading a hole through a shared mapping allocates a page (and so
    can fault with SIGBUS on a full file system), unlike disk file systems, which map
    the zero page."""
    cdef statfs_t st
    if fstatfs(fd, &st) != 0:
        return False
    return st.f_type == TMPFS_MAGIC


cdef int allocate_blocks(int fd, off_t start, off_t length) noexcept nogil:
    """posix_fallocate, retried when a signal interrupts it; 0 or an errno value."""
    cdef int rc = EINTR
    while rc == EINTR:
        rc = posix_fallocate(fd, start, length)
    return rc


cdef int reserve_blocks(int fd, int64_t* alloc_pos, int* alloc_errno, int64_t chunk,
                        int64_t file_size, int64_t end) noexcept nogil:
    """Make sure [0, end) of a file has blocks: allocate from *alloc_pos (the allocated end)
    to at least end, a whole chunk when there is room, else exactly what end needs. fd: the
    file, -1 when it is not writable. Returns 0, or the errno of the failure (ENOSPC ...),
    noted in *alloc_errno, with nothing changed."""
    cdef int64_t have = rs_load_i64(alloc_pos)
    cdef int64_t start, exact, target
    cdef int rc
    if end > file_size:
        end = file_size
    if end <= have:
        return 0
    if fd < 0:
        return EBADF
    start = have - have % OS_PAGE_SIZE
    exact = end + (OS_PAGE_SIZE - end % OS_PAGE_SIZE) % OS_PAGE_SIZE
    if exact > file_size:
        exact = file_size
    target = start + chunk
    target += (OS_PAGE_SIZE - target % OS_PAGE_SIZE) % OS_PAGE_SIZE
    if target < exact:
        target = exact
    if target > file_size:
        target = file_size
    rc = allocate_blocks(fd, <off_t>start, <off_t>(target - start))
    if rc != 0 and target > exact:     # no room for a whole chunk: what end needs may fit
        target = exact
        rc = allocate_blocks(fd, <off_t>start, <off_t>(target - start))
    if rc != 0:
        alloc_errno[0] = rc
        return rc
    rs_store_max_i64(alloc_pos, target)
    return 0


cdef int punch_hole(int fd, int64_t start, int64_t end) noexcept nogil:
    """Give the blocks of [start, end) back (the file keeps its size; the range reads as
    zeros). 0, or -1 (errno set) when the file system cannot."""
    return fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                     <off_t>start, <off_t>(end - start))


cdef int park_fd(int fd) noexcept nogil:
    """Point fd at /dev/null, read-only: the file's descriptor is let go at once, yet the
    number stays taken until it is closed, so a thread still using it gets an error from
    fallocate, pwrite or fdatasync instead of reaching a file opened since under the same
    number. 0, or -1 (fd left as it was) when /dev/null cannot be opened."""
    cdef int null = c_open(b"/dev/null", O_RDONLY | O_CLOEXEC)
    cdef int rc
    if null < 0:
        return -1
    rc = dup3(null, fd, O_CLOEXEC)
    c_close(null)
    return 0 if rc >= 0 else -1
