# The put lock, taken from C by the put path.
cimport cython
from libc.errno cimport EINTR, errno
from libc.stdint cimport int64_t
from posix.time cimport clock_gettime, timespec

from rocketstore._native.includes.atomic cimport rs_store_release_i64

from rocketstore._native.group_commit cimport GroupCommit
from rocketstore._native.mapped_file cimport MappedFile
from rocketstore._native.message cimport Message
from rocketstore._native.record_writer cimport RecordWriter


cdef extern from "<semaphore.h>" nogil:
    ctypedef struct sem_t:
        pass
    int sem_init(sem_t* sem, int pshared, unsigned int value)
    int sem_destroy(sem_t* sem)
    int sem_wait(sem_t* sem)
    int sem_trywait(sem_t* sem)
    int sem_post(sem_t* sem)

cdef extern from "<time.h>" nogil:
    enum: CLOCK_MONOTONIC_COARSE


@cython.final
cdef class PutLock:
    # A binary semaphore rather than a PyThread lock: CPython 3.11's lock reads the clock on
    # every acquire (for a deadline, even a non-blocking one), ~30 ns of a ~400 ns put on a
    # VM. Any thread may release it, as a PyThread lock.
    cdef sem_t sem
    cdef bint ready
    # lock_clock_ns() when the holder took the lock, 0 while it is free: how long the lock has
    # been held is what RocketMQ's isOSPageCacheBusy asks (a broker answers SYSTEM_BUSY)
    cdef int64_t held_since_ns
    # puts by how long they held the lock (whole ms of the coarse clock): RocketMQ's 13
    # putMessageDistributeTime ranges and its 76 percentile buckets (HOLD_BUCKET_CEILINGS)
    cdef int64_t[13] hold_ranges
    cdef int64_t[76] hold_buckets
    cdef int64_t hold_max_ms

    cdef void _note_long_hold(self, int64_t ms) noexcept

    cdef inline void note_hold(self) noexcept:
        """Count the current holder's hold as one put's time (call it just before give)."""
        cdef int64_t ms = (lock_clock_ns() - self.held_since_ns) // 1000000
        if ms <= 0:
            self.hold_ranges[0] += 1
            self.hold_buckets[0] += 1
        else:
            self._note_long_hold(ms)

    cdef inline void take(self) noexcept:
        if sem_trywait(&self.sem) != 0:
            with nogil:
                while sem_wait(&self.sem) != 0 and errno == EINTR:
                    pass
        rs_store_release_i64(&self.held_since_ns, lock_clock_ns())

    cdef inline void give(self) noexcept:
        rs_store_release_i64(&self.held_since_ns, 0)
        sem_post(&self.sem)


cdef inline int64_t lock_clock_ns() noexcept nogil:
    """The clock of the put lock's hold time: CLOCK_MONOTONIC_COARSE (a few ms resolution,
    against the 1,000 ms of os_page_cache_busy_timeout_mills), read without the TSC: a put
    reads it once, and the precise clock costs ~30 ns a read on a VM."""
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts)
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

    cdef object _call(self, Message message, int queue_id)
    cdef object _append_hooked(self, Message message, int queue_id)
    cdef object _put(self, Message message, int queue_id)
    cdef object _await_flush(self, object result, Message message)
