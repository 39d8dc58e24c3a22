# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""MappedFile: one fixed-size file mapped into memory, as RocketMQ's MappedFile.

Holders (views, readers) pin the mapping with hold()/release(); a file is only unmapped when
the last holder lets go. ``destroy(interval)`` waits for holders; after ``interval`` ms it
detaches the file instead: the region is replaced with anonymous zero pages, so a view still
alive reads zeros but never faults, and the file itself is closed and deleted.

The blocks a file has on disk are file_blocks.pyx's (allocated as writes need them, never
written past), faulting pages in ahead of the writer prefault.pyx's, and appends committed
by pwrite write_through.pyx's; this module keeps the state they work on.
"""
import os
import time

from cpython.buffer cimport PyBUF_WRITABLE, PyObject_GetBuffer, PyBuffer_Release
from libc.stdint cimport int64_t
from libc.errno cimport EBADF, errno
from libc.string cimport memcpy, memset
from posix.mman cimport (
    MADV_DONTNEED, MADV_WILLNEED, MAP_ANONYMOUS, MAP_FAILED, MAP_FIXED, MAP_PRIVATE,
    MAP_SHARED, MS_SYNC, PROT_READ, PROT_WRITE, madvise, mlock, mmap, msync, munlock, munmap,
)
from posix.time cimport nanosleep, timespec
from posix.types cimport off_t
from posix.unistd cimport close as c_close, fdatasync

from rocketstore._native.file_blocks cimport (
    ALLOCATION_CHUNK, allocate_blocks, create_file, data_end, park_fd, punch_hole,
    reads_allocate, reserve_blocks, size_new_file,
)
from rocketstore._native.includes.atomic cimport rs_load_i64, rs_load_int, rs_store_release_i64
from rocketstore._native.prefault cimport note_no_populate_write, populate, soft_fail, touch_pages
from rocketstore._native.stop_flag cimport StopFlag
from rocketstore._native.write_through cimport (
    close_buffer, commit_through, destroy_write_through, init_write_through, open_buffer,
    pthread_mutex_lock, pthread_mutex_unlock,
)

from rocketstore.common.text import is_ascii_int as _is_ascii_int

cdef enum:
    OS_PAGE_SIZE = 4096


cdef inline double _now_ms():
    return time.monotonic() * 1000.0


cdef class _Pin:
    """A read-only buffer over part of a MappedFile that holds the file while it lives."""
    cdef MappedFile mf
    cdef char* ptr
    cdef Py_ssize_t size
    cdef Py_ssize_t shape[1]

    def __getbuffer__(self, Py_buffer* buf, int flags):
        if flags & PyBUF_WRITABLE:
            raise BufferError("mapped file views are read-only")
        self.shape[0] = self.size
        buf.buf = self.ptr
        buf.len = self.size
        buf.obj = self
        buf.readonly = 1
        buf.itemsize = 1
        buf.format = "B"
        buf.ndim = 1
        buf.shape = self.shape
        buf.strides = NULL
        buf.suboffsets = NULL
        buf.internal = NULL

    def __releasebuffer__(self, Py_buffer* buf):
        pass

    def __dealloc__(self):
        if self.mf is not None:
            self.mf.release()


cdef class MappedFile:
    def __cinit__(self, path, int64_t file_size, *, bint create=True, bint read_only=False,
                  file_from_offset=None, bint preallocate=False,
                  int64_t allocation_chunk=ALLOCATION_CHUNK):
        self.fd = -1
        self.parked_fd = -1
        self.base = NULL
        self.available = False
        init_write_through(&self.through)

    def __init__(self, path, int64_t file_size, *, bint create=True, bint read_only=False,
                 file_from_offset=None, bint preallocate=False,
                 int64_t allocation_chunk=ALLOCATION_CHUNK):
        """Map path (file_size bytes), creating it when create. A new file is sparse;
        preallocate gives it blocks for its first allocation_chunk bytes at once (or raises
        OSError, leaving no file, when the disk has no room); later blocks are allocated in
        allocation_chunk steps as writes need them (see allocate_to)."""
        cdef int prot
        cdef void* addr
        cdef int err = 0
        if file_size <= 0:
            raise ValueError(f"file_size must be positive, got {file_size}")
        if allocation_chunk <= 0:
            raise ValueError(f"allocation_chunk must be positive, got {allocation_chunk}")
        path = os.fspath(path)
        name = os.path.basename(path)
        if file_from_offset is None:
            file_from_offset = int(name) if _is_ascii_int(name) else 0
        self.file_name = path
        self.file_from_offset = file_from_offset
        self.file_size = file_size
        self.read_only = read_only
        exists = os.path.exists(path)
        if not exists and (read_only or not create):
            raise FileNotFoundError(f"mapped file {path} does not exist")
        first_blocks = allocation_chunk if preallocate else 0
        self.alloc_chunk = allocation_chunk
        self.alloc_pos = 0
        if exists:
            fd = os.open(path, os.O_RDONLY if read_only else os.O_RDWR)
            # what an existing file holds before its first hole has blocks (written data, or
            # allocated ahead); the first write past it allocates
            self.alloc_pos = data_end(fd, file_size)
        else:
            fd = create_file(path, file_size, first_blocks)
            self.alloc_pos = min(first_blocks, file_size)
        try:
            actual = os.fstat(fd).st_size
            if actual != file_size:
                if actual == 0 and not read_only:
                    size_new_file(fd, file_size, first_blocks, path)
                    self.alloc_pos = min(first_blocks, file_size)
                else:
                    raise ValueError(
                        f"mapped file {path} is {actual} bytes, expected {file_size}")
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd
        cdef int cfd = fd
        prot = PROT_READ if read_only else (PROT_READ | PROT_WRITE)
        with nogil:
            addr = mmap(NULL, <size_t>file_size, prot, MAP_SHARED, cfd, 0)
            err = errno
        if addr == MAP_FAILED:
            os.close(fd)
            self.fd = -1
            raise OSError(err, f"mmap of {path} ({file_size} bytes) failed: {os.strerror(err)}")
        self.base = <char*>addr
        self.wbase = self.base
        self.ref_count = 1
        self.available = True
        self.cleanup_over = False
        self.first_shutdown_ms = 0

    def __dealloc__(self):
        self._drop_through_buffer()
        destroy_write_through(&self.through, self.file_size)
        if self.base != NULL:
            munmap(self.base, <size_t>self.file_size)
            self.base = NULL
        self._close_fds()

    def __repr__(self):
        return (f"MappedFile({self.file_name!r}, size={self.file_size}, "
                f"wrote={self.wrote_pos}, flushed={self.flushed_pos})")

    # ---- positions -------------------------------------------------------------------------
    @property
    def wrote_position(self):
        return self.wrote_pos

    @wrote_position.setter
    def wrote_position(self, int64_t pos):
        self._check_pos("wrote_position", pos)
        self.wrote_pos = pos

    @property
    def committed_position(self):
        return self.committed_pos if self.buffered else self.wrote_pos

    @committed_position.setter
    def committed_position(self, int64_t pos):
        self._check_pos("committed_position", pos)
        self.committed_pos = pos

    @property
    def flushed_position(self):
        return self.flushed_pos

    @flushed_position.setter
    def flushed_position(self, int64_t pos):
        self._check_pos("flushed_position", pos)
        self.flushed_pos = pos

    @property
    def read_position(self):
        """Bytes a reader may see: committed ones when appends go to a buffer (transient
        pool or write-through)."""
        return self.read_limit()

    @property
    def store_timestamp(self):
        return self.store_ts

    @store_timestamp.setter
    def store_timestamp(self, int64_t ts):
        self.store_ts = ts

    @property
    def is_full(self):
        return self.wrote_pos >= self.file_size

    @property
    def is_available(self):
        return self.available

    @property
    def ref_count(self):
        return self.ref_count

    @property
    def is_cleanup_over(self):
        return self.cleanup_over

    @property
    def allocated_position(self):
        """[0, allocated_position) has blocks on disk; writes never go past it."""
        return rs_load_i64(&self.alloc_pos)

    @property
    def allocation_chunk(self):
        return self.alloc_chunk

    @allocation_chunk.setter
    def allocation_chunk(self, int64_t chunk):
        if chunk <= 0:
            raise ValueError(f"allocation_chunk must be positive, got {chunk}")
        self.alloc_chunk = chunk

    @property
    def reads_allocate(self):
        """True when reading a hole of this file takes space (tmpfs): readers must not read
        past what has blocks."""
        return self.fd >= 0 and reads_allocate(self.fd)

    @property
    def allocation_error(self):
        """errno of the last allocation that failed (0: none has)."""
        return self.alloc_errno

    cdef _check_pos(self, str field, int64_t pos):
        if pos < 0 or pos > self.file_size:
            raise ValueError(f"{field} {pos} outside [0, {self.file_size}] of {self.file_name}")

    cdef int _check_open(self) except -1:
        if self.base == NULL or self.cleanup_over:
            raise ValueError(f"mapped file {self.file_name} is closed")
        return 0

    cdef int _check_writable(self) except -1:
        self._check_open()
        if self.read_only:
            raise PermissionError(f"mapped file {self.file_name} is read-only")
        if not self.available:      # shut down (maybe detached onto zero pages): no writes
            raise ValueError(f"mapped file {self.file_name} is shut down")
        return 0

    # ---- blocks on disk ----------------------------------------------------------------------
    cdef int reserve(self, int64_t end) noexcept nogil:
        """Make sure [0, end) has blocks: allocate from the allocated end to at least end,
        a whole allocation_chunk when there is room, else exactly what end needs. Returns 0,
        or the errno of the failure (ENOSPC ...), with nothing changed."""
        return reserve_blocks(-1 if self.read_only else self.fd, &self.alloc_pos,
                              &self.alloc_errno, self.alloc_chunk, self.file_size, end)

    cdef int reserve_range(self, int64_t start, int64_t end) noexcept nogil:
        """Give [start, end) blocks on disk, whatever the allocated position (a file written
        out of order, as an IndexFile's hash slots are, keeps its own record of what has
        blocks). Returns 0 or the errno of the failure."""
        cdef int rc
        if self.fd < 0 or self.read_only:
            return EBADF
        if end > self.file_size:
            end = self.file_size
        if start < 0 or end <= start:
            return 0
        rc = allocate_blocks(self.fd, <off_t>start, <off_t>(end - start))
        if rc != 0:
            self.alloc_errno = rc
        return rc

    cdef int _reserve_or_raise(self, int64_t end) except -1:
        cdef int rc
        if end <= rs_load_i64(&self.alloc_pos):
            return 0
        with nogil:
            rc = self.reserve(end)
        if rc != 0:
            raise OSError(rc, f"allocating blocks up to byte {end:,} of {self.file_name} "
                              f"failed: {os.strerror(rc)}", self.file_name)
        return 0

    def allocate_to(self, int64_t end):
        """Give [0, end) blocks on disk (allocation_chunk at a time, see reserve); returns
        the allocated position. Raises OSError (ENOSPC ...) when the disk has no room, with
        nothing changed."""
        self._check_writable()
        if end < 0 or end > self.file_size:
            raise ValueError(f"end {end} outside [0, {self.file_size}] of {self.file_name}")
        if not self.hold():
            raise ValueError(f"mapped file {self.file_name} is being destroyed")
        try:
            self._reserve_or_raise(end)
        finally:
            self.release()
        return rs_load_i64(&self.alloc_pos)

    # ---- writes ----------------------------------------------------------------------------
    def append(self, data):
        """Copy data at the write position; False (nothing written) when it does not fit."""
        cdef Py_buffer view
        self._check_writable()
        PyObject_GetBuffer(data, &view, 0)
        try:
            if self.wrote_pos + view.len > self.file_size:
                return False
            self._reserve_or_raise(self.wrote_pos + view.len)
            with nogil:
                memcpy(self.wbase + self.wrote_pos, view.buf, view.len)
            self.wrote_pos += view.len
            return True
        finally:
            PyBuffer_Release(&view)

    def write_at(self, int64_t pos, data):
        """Copy data at pos (no position change); bounds-checked against the file size.
        Raises OSError when the blocks it needs cannot be allocated (nothing written)."""
        cdef Py_buffer view
        self._check_writable()
        PyObject_GetBuffer(data, &view, 0)
        try:
            if pos < 0 or pos + view.len > self.file_size:
                raise ValueError(f"write of {view.len} bytes at {pos} outside {self.file_name}"
                                 f" ({self.file_size} bytes)")
            self._reserve_or_raise(pos + view.len)
            with nogil:
                memcpy(self.wbase + pos, view.buf, view.len)
        finally:
            PyBuffer_Release(&view)

    def zero_range(self, int64_t pos, int64_t size):
        """Zero [pos, pos+size) in the mapped file (truncating a dirty tail). A range that
        runs to the end of the file gives its whole pages' blocks back (a hole reads as
        zeros), so a store truncated after a crash does not keep blocks it no longer uses;
        other bytes are zeroed in place. Raises OSError when a partial page has no blocks and
        none can be had (nothing changed)."""
        cdef int64_t end = pos + size, first_whole, cut
        cdef int rc = -1
        self._check_writable()
        if pos < 0 or size < 0 or pos + size > self.file_size:
            raise ValueError(f"zero of {size} bytes at {pos} outside {self.file_name}")
        if size == 0:
            return
        cut = end
        if end == self.file_size and self.fd >= 0:
            first_whole = pos + (OS_PAGE_SIZE - pos % OS_PAGE_SIZE) % OS_PAGE_SIZE
            if first_whole < end:
                with nogil:
                    rc = punch_hole(self.fd, first_whole, end)
                if rc == 0:
                    cut = first_whole
                    if rs_load_i64(&self.alloc_pos) > first_whole:
                        rs_store_release_i64(&self.alloc_pos, first_whole)
        if cut > pos:
            self._reserve_or_raise(cut)
            with nogil:
                memset(self.base + pos, 0, cut - pos)
        # a pool buffer is copied into the file whole; the write-through buffer only
        # from the committed position on, which a truncation moves here: its bytes are
        # written again before they are committed
        if self.wbase != self.base and not self.write_through:
            with nogil:
                memset(self.wbase + pos, 0, size)

    # ---- reads -----------------------------------------------------------------------------
    def view(self, int64_t pos, int64_t size):
        """Zero-copy read-only memoryview of [pos, pos+size) that pins the file."""
        cdef _Pin pin
        self._check_open()
        if pos < 0 or size < 0 or pos + size > self.file_size:
            raise ValueError(f"view of {size} bytes at {pos} outside {self.file_name}"
                             f" ({self.file_size} bytes)")
        if not self.hold():
            raise ValueError(f"mapped file {self.file_name} is being destroyed")
        pin = _Pin.__new__(_Pin)
        pin.mf = self
        pin.ptr = self.base + pos
        pin.size = size
        return memoryview(pin)

    def read(self, int64_t pos, int64_t size):
        """A bytes copy of [pos, pos+size)."""
        self._check_open()
        if pos < 0 or size < 0 or pos + size > self.file_size:
            raise ValueError(f"read of {size} bytes at {pos} outside {self.file_name}")
        return (self.base + pos)[:size]

    # ---- reference counting (RocketMQ's ReferenceResource) ----------------------------------
    cpdef bint hold(self):
        if self.available:
            self.ref_count += 1
            return True
        return False

    cpdef void release(self):
        self.ref_count -= 1
        if self.ref_count <= 0 and not self.available and not self.cleanup_over:
            self._cleanup()

    cdef void _cleanup(self):
        cdef char* base = self.base
        cdef size_t size = <size_t>self.file_size
        self._drop_through_buffer()
        self.base = NULL
        self.wbase = NULL
        self.write_buffer = None
        self.buffered = False
        if base != NULL:
            with nogil:         # unmapping a large file takes a while: producers go on
                munmap(base, size)
        self._close_fds()
        self.cleanup_over = True

    cdef void _close_fds(self) noexcept:
        """Close the descriptor (and a parked one) once. Each is taken out of the object
        before it is closed, the GIL held in between: a close that releases the GIL (as
        os.close does) would let a second thread (a holder's last release, a forced
        detach) close the same number again, by then maybe another file's."""
        cdef int fd = self.fd
        cdef int parked = self.parked_fd
        self.fd = -1
        self.parked_fd = -1
        with nogil:
            if fd >= 0:
                c_close(fd)
            if parked >= 0:
                c_close(parked)

    def shutdown(self, double interval_forcibly_ms=0, double now_ms=-1):
        """Refuse new holders; after the interval, stop waiting for old ones (detach).
        now_ms: the caller's clock in ms (a monotonic one; default time.monotonic)."""
        cdef void* addr
        cdef int fd
        if now_ms < 0:
            now_ms = _now_ms()
        if self.available:
            self.available = False
            self.first_shutdown_ms = now_ms
            self.release()
        elif self.ref_count > 0 and now_ms - self.first_shutdown_ms >= interval_forcibly_ms:
            if self.base != NULL and self.fd >= 0:
                # Live views keep the address range; back it with zeros instead of the file.
                # Writable, so that a loop still faulting pages in under it (prefault on a
                # kernel without MADV_POPULATE_WRITE) touches memory, not a signal.
                addr = mmap(self.base, <size_t>self.file_size, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0)
                # The file is let go, but not its descriptor's number: a holder may be
                # using it without the GIL (prefault_follow's allocation, a commit's
                # pwrite), so it is parked on /dev/null and closed by the last release.
                # Where /dev/null cannot be had, the file stays open until then.
                fd = self.fd
                if addr != MAP_FAILED and park_fd(fd) == 0:
                    self.parked_fd = fd
                    self.fd = -1

    def destroy(self, double interval_forcibly_ms=0, double now_ms=-1):
        """Shut down, and delete the file once no holder is left (or it was detached after
        interval_forcibly_ms). now_ms: as for shutdown.

        Returns True when the file is gone; call again later otherwise."""
        self.shutdown(interval_forcibly_ms, now_ms)
        if self.cleanup_over or self.fd < 0:
            if os.path.exists(self.file_name):
                os.remove(self.file_name)
            return True
        return False

    def close(self):
        """Flush and unmap now that the store is done with the file (views keep it mapped)."""
        if self.base != NULL and not self.read_only and self.available:
            self.flush(0)
        if self.available:
            self.available = False
            self.release()

    # ---- flush and commit ------------------------------------------------------------------
    def dirty_range(self, int least_pages=0):
        """(start, end): the bytes flush(least_pages) would make durable now, [flushed,
        committed); empty (end == start) when there are none or fewer than least_pages
        pages (unless the file is full), as RocketMQ's isAbleToFlush."""
        cdef int64_t target = self.committed_position
        if self.read_only or self.base == NULL or target <= self.flushed_pos:
            return self.flushed_pos, self.flushed_pos
        if least_pages > 0 and target < self.file_size and (
                target // OS_PAGE_SIZE - self.flushed_pos // OS_PAGE_SIZE) < least_pages:
            return self.flushed_pos, self.flushed_pos
        return self.flushed_pos, target

    def flush(self, int least_pages=0):
        """Make the dirty bytes [flushed, committed) durable; returns the flushed position.
        A write-through file commits what was written first (pwrite), then fdatasyncs; any
        other file msyncs the range.

        With least_pages > 0, only when at least that many pages are dirty (or the file is
        full), as RocketMQ's isAbleToFlush."""
        if self.write_through and self.buffered:
            self.commit(0)
        start, end = self.dirty_range(least_pages)
        if end > start:
            self.sync(start, end)
            if end > self.flushed_pos:      # a flush round may have gone further meanwhile
                self.flushed_pos = end
        return self.flushed_pos

    def sync(self, int64_t start, int64_t end):
        """Make [start, end) durable now without moving a position: fdatasync for a
        write-through file (only its written blocks are dirty), else msync of the pages
        holding the range. GIL released; OSError on failure."""
        cdef int err = 0
        if start < 0 or end < start or end > self.file_size:
            raise ValueError(f"sync of [{start}, {end}) outside {self.file_name}"
                             f" ({self.file_size} bytes)")
        if self.read_only or end == start:
            return
        if not self.hold():
            raise ValueError(f"mapped file {self.file_name} is shut down")
        try:
            with nogil:
                err = self.sync_range(start, end)
        finally:
            self.release()
        if err != 0:
            raise OSError(err, f"{'fdatasync' if self.write_through else 'msync'} of "
                               f"{self.file_name} failed: {os.strerror(err)}")

    cdef int sync_range(self, int64_t start, int64_t end) noexcept nogil:
        """Caller holds the file. 0, or the errno of the failed fdatasync / msync."""
        cdef int64_t first, whole
        if self.write_through:
            if fdatasync(self.fd) != 0:
                return errno
            return 0
        first = start - start % OS_PAGE_SIZE
        whole = end - end % OS_PAGE_SIZE
        if whole > first:
            # Unmap the writer's pages that are written to their end before writing them
            # back: writeback then finds none mapped writable, where it would write-protect
            # each page and flush its TLB entry on every CPU (an IPI per page). The bytes
            # stay in the page cache, dirty; a reader faults them back in (fault-around).
            madvise(self.base + first, <size_t>(whole - first), MADV_DONTNEED)
        if msync(self.base + first, <size_t>(end - first), MS_SYNC) != 0:
            return errno
        return 0

    def enable_write_through(self):
        """From now on appends go to an anonymous buffer, and commit() hands them to the
        file with pwrite (flush() then fdatasyncs). The page cache then holds only bytes
        written through the file descriptor, dirty block by block: msync of a mapping
        dirties and writes back whole folios (16-64 KiB on current kernels, for a 1 KiB
        record), and write-protects pages the writer is still filling. Readers see
        committed bytes only (read_position). Buffer pages behind the committed position
        are given back to the OS as it moves, so a few MiB stay resident."""
        cdef int err = 0
        self._check_writable()
        if self.buffered:
            raise ValueError(f"{self.file_name} already writes to a buffer")
        with nogil:
            err = open_buffer(&self.through, self.file_size, self.wrote_pos)
        if err != 0:
            raise OSError(err, f"write buffer of {self.file_size} bytes for {self.file_name}:"
                               f" {os.strerror(err)}")
        self.committed_pos = self.wrote_pos
        self.write_through = True
        self.wbase = self.through.buf
        self.buffered = True

    cdef int write_through_to(self, int64_t end) noexcept nogil:
        """pwrite [committed, end) from the write-through buffer into the file, publish the
        new committed position, give buffer pages behind it back, and drop the buffer once
        the file is committed to its end. One committer at a time (through.mu); the writer
        only writes at and past wrote_pos >= end. 0 or errno."""
        cdef int err
        pthread_mutex_lock(&self.through.mu)
        if self.through.buf == NULL:
            pthread_mutex_unlock(&self.through.mu)
            return 0
        err = commit_through(&self.through, self.fd, &self.committed_pos, end, self.file_size)
        if err == 0 and self.committed_pos >= self.file_size:
            self._drop_through_buffer()
        pthread_mutex_unlock(&self.through.mu)
        return err

    cdef void _drop_through_buffer(self) noexcept nogil:
        """The file is committed to its end (or closing): appends are over, give the
        buffer back. Readers never read it."""
        if self.through.buf == NULL:
            return
        self.wbase = self.base
        self.buffered = False
        close_buffer(&self.through, self.file_size)

    def set_write_buffer(self, buffer):
        """Lend a writable buffer of file_size bytes (TransientStorePool); appends go there."""
        cdef Py_buffer view
        if self.buffered:
            raise ValueError(f"{self.file_name} already writes to a buffer")
        PyObject_GetBuffer(buffer, &view, PyBUF_WRITABLE)
        try:
            if view.len < self.file_size:
                raise ValueError(f"write buffer of {view.len} bytes is smaller than the file")
            self.wbase = <char*>view.buf
        finally:
            PyBuffer_Release(&view)
        self.write_buffer = buffer
        self.committed_pos = self.wrote_pos
        self.buffered = True

    def commit(self, int least_pages=0):
        """Hand [committed, wrote) from the write buffer to the file; returns (committed,
        the pool buffer given back once the file is full, else None). A write-through file
        writes with pwrite and gives nothing back (its buffer is its own); a pool buffer is
        copied into the mapping."""
        cdef int64_t start, end
        cdef int err = 0
        if not self.buffered:
            return self.wrote_pos, None
        end = self.wrote_pos
        start = self.committed_pos
        if least_pages > 0 and end < self.file_size and (
                end // OS_PAGE_SIZE - start // OS_PAGE_SIZE) < least_pages:
            return self.committed_pos, None
        if self.write_through:
            if not self.hold():
                return self.committed_pos, None
            try:
                with nogil:
                    err = self.write_through_to(end)
            finally:
                self.release()
            if err != 0:
                raise OSError(err, f"pwrite to {self.file_name} failed: {os.strerror(err)}")
            return self.committed_pos, None
        if end > start:
            with nogil:
                memcpy(self.base + start, self.wbase + start, end - start)
            self.committed_pos = end
        if self.committed_pos >= self.file_size:
            buf = self.write_buffer
            self.write_buffer = None
            self.wbase = self.base
            self.buffered = False
            return self.committed_pos, buf
        return self.committed_pos, None

    # ---- page cache hints ------------------------------------------------------------------
    def prefault(self, int64_t start, int64_t length):
        """Fault [start, start+length) in for writing, ahead of the writer (page-aligned, held
        against unmapping, GIL released); the bytes are unchanged, so it may run while
        another thread appends into the same pages. Pages get their blocks first (see
        allocate_to); where the disk has no room it stops at the allocated position. Returns
        the end position it reached (start when the file is closing or appends go to a
        transient-pool buffer)."""
        cdef int64_t first, end
        cdef int rc = -1
        self._check_writable()
        if start < 0 or length < 0:
            raise ValueError(f"start ({start}) and length ({length}) must be >= 0")
        end = min(start + length, self.file_size)
        if end <= start or self.buffered or not self.hold():
            return start
        try:
            with nogil:
                self.reserve(end)
            end = min(end, rs_load_i64(&self.alloc_pos))
            if end <= start:
                return start
            first = start - start % OS_PAGE_SIZE
            with nogil:
                rc = populate(self.base, first, end, &self.available)
            if rc > 0:
                note_no_populate_write()
            return end if rc >= 0 else start
        finally:
            self.release()

    def prefault_follow(self, int64_t ahead, int64_t start, double interval_s,
                        StopFlag stop not None, int64_t chunk=1 << 20):
        """Follow the writer without the GIL: keep [wrote, wrote+ahead) allocated (see
        allocate_to) and faulted in for writing (prefault's way: bytes unchanged), checking
        every interval_s, until the file is full, it is shut down, stop is set, or an
        allocation fails (allocation_error says why; the caller backs off). start: how far
        an earlier call got. Returns how far this one got."""
        cdef int64_t done = start, wrote, target, end, allocated
        cdef timespec pause
        cdef bint fallback = False
        cdef int rc = 0
        self._check_writable()
        if ahead <= 0 or chunk <= 0 or interval_s <= 0:
            raise ValueError("ahead, chunk and interval_s must be positive")
        if self.buffered or not self.hold():
            return start
        pause.tv_sec = <long>interval_s
        pause.tv_nsec = <long>((interval_s - pause.tv_sec) * 1e9)
        try:
            with nogil:
                while rs_load_int(&stop.flag) == 0 and self.available:
                    wrote = rs_load_i64(&self.wrote_pos)
                    if wrote >= self.file_size:
                        break
                    target = min(wrote + ahead, self.file_size)
                    allocated = rs_load_i64(&self.alloc_pos)
                    if target > allocated:
                        if self.reserve(target) != 0:
                            break
                    if done < wrote:
                        done = wrote - wrote % OS_PAGE_SIZE
                    while done < target and rs_load_int(&stop.flag) == 0 and self.available:
                        end = min(done + chunk, target)
                        rc = populate(self.base, done - done % OS_PAGE_SIZE, end,
                                      &self.available)
                        if rc < 0:
                            break
                        if rc > 0:
                            fallback = True
                        done = end
                    if rc < 0:
                        break
                    nanosleep(&pause, NULL)
        finally:
            self.release()
        if fallback:
            note_no_populate_write()
        return done

    def warm(self, str flush_disk_type="ASYNC_FLUSH", int pages=4096):
        """Touch every page (RocketMQ's warmMappedFile), then madvise(WILLNEED) and mlock.
        The whole file gets its blocks first (OSError when the disk has no room).

        With SYNC_FLUSH the touched pages are msync'ed every `pages` pages, as RocketMQ does."""
        cdef bint sync = flush_disk_type == "SYNC_FLUSH"
        cdef int64_t every = <int64_t>pages * OS_PAGE_SIZE
        self._check_writable()
        if self.wrote_pos > 0:
            raise ValueError(f"warm writes a zero into every page: {self.file_name} already "
                             f"holds {self.wrote_pos} bytes (warm new files only)")
        self._reserve_or_raise(self.file_size)
        with nogil:
            touch_pages(self.base, self.file_size, sync, every)
        self.madvise_willneed()
        self.mlock()

    def madvise_willneed(self):
        cdef int rc, err = 0
        self._check_open()
        with nogil:
            rc = madvise(self.base, <size_t>self.file_size, MADV_WILLNEED)
            err = errno
        if rc != 0:
            soft_fail("madvise", self.file_name, err)
            return False
        return True

    def mlock(self):
        cdef int rc, err = 0
        self._check_open()
        with nogil:
            rc = mlock(self.base, <size_t>self.file_size)
            err = errno
        if rc != 0:
            soft_fail("mlock", self.file_name, err)
            return False
        self.locked = True
        return True

    def munlock(self):
        cdef int rc, err = 0
        if self.base == NULL or not self.locked:
            return False
        with nogil:
            rc = munlock(self.base, <size_t>self.file_size)
            err = errno
        if rc != 0:
            soft_fail("munlock", self.file_name, err)
            return False
        self.locked = False
        return True
