# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Faulting a mapped file's pages in ahead of its writer (MappedFile.prefault,
prefault_follow, warm), and the soft failures of the page-cache hints (madvise, mlock).

Pages are faulted in for writing with MADV_POPULATE_WRITE (Linux 5.14+), or where the kernel
lacks it by touching each page with an atomic no-op write: either way the bytes stay as they
are, so this may run while another thread appends into the same pages.
"""
import os
import warnings

from libc.stdint cimport int64_t
from libc.errno cimport EINVAL, errno
from posix.mman cimport MS_SYNC, madvise, msync

from rocketstore._native.includes.atomic cimport rs_touch_for_write

cdef enum:
    OS_PAGE_SIZE = 4096
    MADV_POPULATE_WRITE = 23    # Linux 5.14+; older kernels answer EINVAL

# Soft failures of the OS hints (warm/madvise/mlock): counted, warned once per kind, never fatal.
failure_counts = {"madvise": 0, "mlock": 0, "munlock": 0}
_warned = set()


cdef void soft_fail(str kind, str path, int err):
    failure_counts[kind] += 1
    if kind not in _warned:
        _warned.add(kind)
        warnings.warn(f"{kind} failed on {path}: {os.strerror(err)} (continuing without it)",
                      RuntimeWarning, stacklevel=3)


cdef bint _populate_write_works = True


cdef void note_no_populate_write():
    """The kernel lacks MADV_POPULATE_WRITE: populate touches pages one by one from now on."""
    global _populate_write_works
    _populate_write_works = False


cdef int populate(char* base, int64_t first, int64_t end, const bint* available) noexcept nogil:
    """Fault [first, end) of the mapping at base in for writing (first page-aligned); the
    caller holds the file. 0: done. 1: the kernel lacks MADV_POPULATE_WRITE (EINVAL), so the
    pages were touched one by one (while *available; the caller then calls
    note_no_populate_write). -1: the kernel could not fault them in (the file was detached
    under the caller, or no block can back a page); nothing is touched then, as a touch
    would take the signal the kernel spared us."""
    cdef int64_t i
    if _populate_write_works:
        if madvise(base + first, <size_t>(end - first), MADV_POPULATE_WRITE) == 0:
            return 0
        if errno != EINVAL:
            return -1
    i = first
    while i < end and available[0]:
        rs_touch_for_write(base + i)
        i += OS_PAGE_SIZE
    return 1


cdef void touch_pages(char* base, int64_t size, bint sync, int64_t every) noexcept nogil:
    """Write a zero into every page of [0, size) (RocketMQ's warmMappedFile); with sync,
    msync the touched pages every `every` bytes and all of them at the end."""
    cdef int64_t i = 0, last_flush = 0
    while i < size:
        base[i] = 0
        if sync and every > 0 and i - last_flush >= every:
            msync(base + last_flush, <size_t>(i - last_flush), MS_SYNC)
            last_flush = i
        i += OS_PAGE_SIZE
    if sync:
        msync(base, <size_t>size, MS_SYNC)
