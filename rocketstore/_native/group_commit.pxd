# The SYNC_FLUSH hand-off, shared with the put path (which waits on it without a Python frame).
cimport cython
from libc.stdint cimport int64_t
from posix.time cimport timespec

from rocketstore._native.mapped_file cimport MappedFile


cdef extern from "<pthread.h>" nogil:
    ctypedef struct pthread_mutex_t:
        pass
    ctypedef struct pthread_cond_t:
        pass
    ctypedef struct pthread_condattr_t:
        pass
    int pthread_mutex_init(pthread_mutex_t*, void*)
    int pthread_mutex_destroy(pthread_mutex_t*)
    int pthread_mutex_lock(pthread_mutex_t*)
    int pthread_mutex_unlock(pthread_mutex_t*)
    int pthread_condattr_init(pthread_condattr_t*)
    int pthread_condattr_setclock(pthread_condattr_t*, int)
    int pthread_condattr_destroy(pthread_condattr_t*)
    int pthread_cond_init(pthread_cond_t*, pthread_condattr_t*)
    int pthread_cond_destroy(pthread_cond_t*)
    int pthread_cond_wait(pthread_cond_t*, pthread_mutex_t*)
    int pthread_cond_timedwait(pthread_cond_t*, pthread_mutex_t*, const timespec*)
    int pthread_cond_signal(pthread_cond_t*)
    int pthread_cond_broadcast(pthread_cond_t*)


@cython.final
cdef class GroupCommit:
    cdef pthread_mutex_t mu
    cdef pthread_cond_t work_cv       # the flush thread waits here
    cdef pthread_cond_t fill_cv       # a round about to start waits here for its riders
    cdef int done_seq[4]              # producers wait here: bumped when flush generation
                                      # g (word g & 3) is over, so a producer waiting for
                                      # the next flush is not woken by the current one,
                                      # nor by a chain wake of an earlier one
    cdef bint ready
    cdef int64_t flushed_where        # durable up to here (only grows, except reset())
    cdef int64_t requested            # the highest offset a producer asked for
    cdef int64_t pending              # producers that asked since the last flush started
    cdef int64_t started              # flush generations started (never wraps)
    cdef int flusher_state
    cdef bint interrupted             # run()/wait_requests() return to Python
    cdef bint kicked                  # flush what is written even with nobody waiting
    cdef bint closed                  # waiters stop waiting (shutdown)
    cdef int64_t flush_count          # flushes that made progress
    cdef int64_t newest_ts            # store timestamp covered by the last native flush
    cdef double write_total_s         # time native rounds spent handing bytes to the file
    cdef double sync_total_s          # time native rounds spent making them durable
    cdef public int wake_chains       # a flush wakes this many waiters, each woken one
                                      # the next (0: all at once)
    cdef bint flushing                # a round runs (the flush thread's or a leader's)
    cdef bint file_ready              # run() holds cur_file: producers may lead rounds on it
    cdef MappedFile cur_file
    cdef int round_err                # errno of a failed round not raised yet
    cdef object sync_fn               # sync(file, start, end) instead of fdatasync / msync
    cdef bint has_sync                # sync_fn is set (readable without the GIL)
    cdef object sync_exc              # what sync_fn raised in a failed round, not raised yet
    cdef int64_t riders[4]            # producers waiting for flush generation g (word g & 3)
    cdef int64_t last_riders          # producers the last finished round woke
    cdef int64_t arrivals             # producers that asked since the last round ended
    cdef int64_t fill_target          # arrivals a filling round waits for (0: none waits)
    cdef public double fill_max_s     # the longest a round waits for its riders (0: never)
    cdef public double fill_gap_s     # ... and the longest it waits with none of them asking
    cdef double last_event_t          # when the last round ended or a producer last asked
    cdef double fill_total_s          # time rounds spent waiting for riders
    cdef int64_t fill_count           # rounds that waited for riders
    cdef bint round_err_write         # ... and whether the write (not the sync) failed
    cdef int notify_fd                # an eventfd written when a round made an asynchronous
                                      # request durable (-1: none; see request())
    cdef int64_t async_requested      # the highest offset an asynchronous request asked for
    cdef int64_t async_pending        # asynchronous requests since the last round started
    cdef public bint fill_async       # asynchronous requests count as riders (_wait_riders)

    cdef bint _wait_flushed(self, int64_t offset, double timeout_s) noexcept nogil
    cdef void _kick(self) noexcept nogil
    cdef void _notify(self, int64_t durable_before) noexcept nogil
    cdef void _wait_work(self, double until) noexcept nogil
    cdef void _wait_riders(self) noexcept nogil
    cdef int _round(self, MappedFile mf, bint leader) noexcept nogil
    cdef int _call_sync(self, MappedFile mf, int64_t start, int64_t end) noexcept nogil
    cdef int _call_sync_gil(self, MappedFile mf, int64_t start, int64_t end) noexcept
