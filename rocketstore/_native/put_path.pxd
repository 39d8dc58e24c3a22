# The put lock, taken from C by the put path.
cimport cython
from cpython.pythread cimport (
    NOWAIT_LOCK, WAIT_LOCK, PyThread_acquire_lock, PyThread_release_lock, PyThread_type_lock,
)
from libc.stdint cimport int64_t
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec

from rocketstore._native.includes.atomic cimport rs_store_release_i64

from rocketstore._native.group_commit cimport GroupCommit
from rocketstore._native.mapped_file cimport MappedFile
from rocketstore._native.message cimport Message
from rocketstore._native.record_writer cimport RecordWriter


@cython.final
cdef class PutLock:
    cdef PyThread_type_lock lock
    # monotonic ns when the holder took the lock, 0 while it is free: how long the lock has
    # been held is what RocketMQ's isOSPageCacheBusy asks (a broker answers SYSTEM_BUSY)
    cdef int64_t held_since_ns

    cdef inline void take(self) noexcept:
        if not PyThread_acquire_lock(self.lock, NOWAIT_LOCK):
            with nogil:
                PyThread_acquire_lock(self.lock, WAIT_LOCK)
        rs_store_release_i64(&self.held_since_ns, monotonic_ns())

    cdef inline void give(self) noexcept:
        rs_store_release_i64(&self.held_since_ns, 0)
        PyThread_release_lock(self.lock)


cdef inline int64_t monotonic_ns() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <int64_t>ts.tv_sec * 1000000000 + ts.tv_nsec


@cython.final
cdef class PutPath:
    cdef readonly PutLock lock
    cdef readonly RecordWriter writer
    cdef public MappedFile file     # where appends go; None: take the slow path
    cdef public object slow
    cdef public object after
    cdef public bint accepting      # False: every put is SERVICE_NOT_AVAILABLE
    cdef public object refusal      # the reason refused puts carry (None: none given)
    cdef readonly GroupCommit sync_group    # SYNC_FLUSH: puts wait here for their flush
    cdef double sync_timeout_s

    cdef object _put(self, Message message, int queue_id)
    cdef object _await_flush(self, object result, Message message)
