# cython: language_level=3, boundscheck=True, wraparound=False, cdivision=True
"""GroupCommit: the SYNC_FLUSH hand-off between producers and the flush thread, in C.

A flush round takes everything written to the current CommitLog file so far (producers that
arrive while a round runs ride the next one; nobody lingers), writes it to the file (pwrite
from the write-through buffer), makes it durable (fdatasync; msync of the range for a file
written through its mapping), publishes the new durable offset and wakes the producers it
covers. One round runs at a time. While the flush thread waits inside run() on a file, a
producer that finds no round running does the round itself, on its own thread (the leader):
a lone producer pays the disk and nothing else, no hand-off to another thread and back.
Under load the flush thread runs the rounds back to back, and a leader that leaves waiters
behind hands them to it.

Producers wait, with the GIL released, on a futex until the published durable offset reaches
theirs (or their timeout passes). A finished round wakes one of the producers it covers and
each woken producer first wakes the next (wake_chains; 0: all at once): woken all at once,
they would queue for the GIL, each waking (and sleeping) once more on its way.

An event loop must not wait on a futex: it asks with request(offset) instead, which returns
at once, and learns that a round made its request durable from an eventfd (``notify_fd``)
that the round writes; the loop then compares its sends' offsets with ``flushed_where``. Its
requests do not make a round wait for riders: the loop's sends come back through the network,
and the rounds run back to back instead.

The flush thread comes back to Python only when the file is full (the roll to the next one),
when idle, every ``max_busy_s`` under load, or when asked to (shutdown); leaders stop when it
does. Nothing here touches Python objects while the GIL is released.
"""
import os

from libc.errno cimport EIO, ETIMEDOUT
from libc.stdint cimport int64_t, uint64_t
from posix.unistd cimport write as c_write
from posix.time cimport clock_gettime, timespec, CLOCK_MONOTONIC

from rocketstore._native.includes.atomic cimport (
    rs_load_acquire_i64, rs_load_acquire_int, rs_store_release_i64,
)
from rocketstore._native.includes.futex cimport (
    rs_futex_bump_and_wake, rs_futex_bump_and_wake_n, rs_futex_wait, rs_futex_wake,
)
from rocketstore._native.mapped_file cimport MappedFile


# run() results
cdef enum:
    C_RUN_FULL = 1          # the file is flushed to its end: the next round starts on the next file
    C_RUN_IDLE = 2          # no producer waited for idle_s
    C_RUN_BUSY = 3          # max_busy_s passed (Python refreshes its view of the queue)
    C_RUN_INTERRUPTED = 4   # interrupt() or close() was called
    C_RUN_UNAVAILABLE = 5   # the file is closed or not flushable here (transient pool)

RUN_FULL = C_RUN_FULL
RUN_IDLE = C_RUN_IDLE
RUN_BUSY = C_RUN_BUSY
RUN_INTERRUPTED = C_RUN_INTERRUPTED
RUN_UNAVAILABLE = C_RUN_UNAVAILABLE

# The longest a round waits for the producers the round before it woke (_wait_riders).
FILL_MAX_S = 0.002
# ... and the longest it waits while none of them asks.
FILL_GAP_S = 0.0005

# flusher states (whether a producer's request has to signal)
cdef enum:
    FLUSHER_BUSY = 0
    FLUSHER_IDLE = 1        # waiting for any request


cdef inline double _now() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec + ts.tv_nsec * 1e-9


cdef inline void _deadline(timespec* out, double at) noexcept nogil:
    cdef double sec = <double><int64_t>at
    out.tv_sec = <int64_t>at
    out.tv_nsec = <long>((at - sec) * 1e9)
    if out.tv_nsec >= 1000000000:
        out.tv_sec += 1
        out.tv_nsec -= 1000000000


cdef class GroupCommit:
    """Durable-offset board of SYNC_FLUSH: producers wait on it, the flush thread publishes."""

    def __cinit__(self, int64_t flushed_where=0):
        cdef pthread_condattr_t attr
        pthread_mutex_init(&self.mu, NULL)
        pthread_condattr_init(&attr)
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC)
        pthread_cond_init(&self.work_cv, &attr)
        pthread_cond_init(&self.fill_cv, &attr)
        pthread_condattr_destroy(&attr)
        self.ready = True
        self.flushed_where = flushed_where
        self.requested = flushed_where
        self.wake_chains = 1
        self.fill_max_s = FILL_MAX_S
        self.fill_gap_s = FILL_GAP_S
        self.notify_fd = -1

    def __dealloc__(self):
        if self.ready:
            pthread_cond_destroy(&self.work_cv)
            pthread_cond_destroy(&self.fill_cv)
            pthread_mutex_destroy(&self.mu)

    # ---- state -----------------------------------------------------------------------------
    @property
    def flushed_where(self):
        """Durable up to this CommitLog offset (what waiting producers compare against)."""
        return rs_load_acquire_i64(&self.flushed_where)

    @property
    def flushes(self):
        """Flushes that made data durable so far (native rounds and publish(flushes=...))."""
        return rs_load_acquire_i64(&self.flush_count)

    @property
    def write_seconds(self):
        """Time the native rounds spent writing bytes to the file (pwrite) so far."""
        return self.write_total_s

    @property
    def sync_seconds(self):
        """Time the native rounds spent making bytes durable (fdatasync or msync) so far."""
        return self.sync_total_s

    @property
    def fill_waits(self):
        """Rounds that waited for the producers the round before woke."""
        return self.fill_count

    @property
    def fill_seconds(self):
        """Time rounds spent waiting for those producers so far."""
        return self.fill_total_s

    @property
    def pending(self):
        """Producers that asked for a flush since the last one started."""
        return self.pending

    @property
    def store_timestamp(self):
        """Store timestamp of the newest record a native round made durable (0: none yet)."""
        return rs_load_acquire_i64(&self.newest_ts)

    @property
    def closed(self):
        return self.closed

    def reset(self, int64_t flushed_where):
        """Set the durable offset exactly (after recovery truncated the log) and reopen."""
        with nogil:
            pthread_mutex_lock(&self.mu)
            self.flushed_where = flushed_where
            self.requested = flushed_where
            self.async_requested = flushed_where
            self.closed = False
            self.interrupted = False
            pthread_mutex_unlock(&self.mu)

    # ---- producers -------------------------------------------------------------------------
    def wait_flushed(self, int64_t offset, double timeout_s):
        """Wait (GIL released) until everything below offset is durable: True, or False when
        timeout_s passed or close() was called first."""
        cdef bint ok
        with nogil:
            ok = self._wait_flushed(offset, timeout_s)
        return ok

    cdef bint _wait_flushed(self, int64_t offset, double timeout_s) noexcept nogil:
        cdef double until = _now() + (timeout_s if timeout_s > 0 else 0)
        cdef double left
        cdef timespec rel
        cdef int* word
        cdef int seen
        while True:
            if rs_load_acquire_i64(&self.flushed_where) >= offset:
                return True
            pthread_mutex_lock(&self.mu)
            if self.flushed_where >= offset or self.closed:
                pthread_mutex_unlock(&self.mu)
                return rs_load_acquire_i64(&self.flushed_where) >= offset
            if offset > self.requested:
                self.requested = offset
            self.pending += 1
            self.arrivals += 1
            if self.fill_target > 0:
                if self.arrivals >= self.fill_target:
                    pthread_cond_signal(&self.fill_cv)  # the filling round has its riders
                else:
                    self.last_event_t = _now()
            if (self.file_ready and not self.flushing and not self.interrupted
                    and self.round_err == 0
                    and offset <= self.cur_file.file_from_offset + self.cur_file.file_size):
                # no round running: this producer does it (returns with mu held)
                self._round(self.cur_file, True)
                pthread_mutex_unlock(&self.mu)
                continue
            if self.flusher_state == FLUSHER_IDLE and not self.flushing:
                self.flusher_state = FLUSHER_BUSY
                pthread_cond_signal(&self.work_cv)
            word = &self.done_seq[(self.started + 1) & 3]   # the next flush to start
            self.riders[(self.started + 1) & 3] += 1
            seen = rs_load_acquire_int(word)
            pthread_mutex_unlock(&self.mu)
            while rs_load_acquire_int(word) == seen:
                left = until - _now()
                if left <= 0:
                    return rs_load_acquire_i64(&self.flushed_where) >= offset
                rel.tv_sec = <long>left
                rel.tv_nsec = <long>((left - rel.tv_sec) * 1e9)
                rs_futex_wait(word, seen, &rel)
            # that flush is over: done, or (a roll to the next file) ask the next one
            if self.wake_chains > 0:
                rs_futex_wake(word, 1)      # the wake-up chain: the next waiter of that flush

    def request(self, int64_t offset):
        """An asynchronous waiter (an event loop's send): have the next round make everything
        below offset durable, without waiting. True when it already is (nothing to wait
        for); else ``notify_fd`` is written once a round made it durable."""
        cdef bint durable
        # with the GIL held: mu is only ever held briefly, never by a thread waiting for the
        # GIL, and releasing the GIL here would hand it to another thread at every send
        pthread_mutex_lock(&self.mu)
        durable = self.flushed_where >= offset
        if not durable:
            if offset > self.requested:
                self.requested = offset
            if offset > self.async_requested:
                self.async_requested = offset
            self.pending += 1
            if self.fill_async:
                self.async_pending += 1
                self.arrivals += 1
                if self.fill_target > 0:
                    if self.arrivals >= self.fill_target:
                        pthread_cond_signal(&self.fill_cv)
                    else:
                        self.last_event_t = _now()
            if self.flusher_state == FLUSHER_IDLE and not self.flushing:
                self.flusher_state = FLUSHER_BUSY
                pthread_cond_signal(&self.work_cv)
        pthread_mutex_unlock(&self.mu)
        return durable

    @property
    def notify_fd(self):
        """The eventfd a round writes (8 bytes, 1) when it made an asynchronous request
        durable, and close() writes; -1: none."""
        return self.notify_fd

    @notify_fd.setter
    def notify_fd(self, int fd):
        # under mu: once this returns, no round writes the old descriptor (it may be closed)
        with nogil:
            pthread_mutex_lock(&self.mu)
            self.notify_fd = fd if fd >= 0 else -1
            pthread_mutex_unlock(&self.mu)

    cdef void _notify(self, int64_t durable_before) noexcept nogil:
        """Under mu, after flushed_where moved past durable_before: tell the loop when one of
        its requests was waiting beyond durable_before."""
        cdef uint64_t one = 1
        if self.notify_fd >= 0 and self.async_requested > durable_before:
            c_write(self.notify_fd, &one, 8)    # an eventfd: never blocks, never short

    # ---- the flush thread ------------------------------------------------------------------
    def publish(self, int64_t flushed_where, int flushes=0):
        """Durable up to flushed_where now (a flush done in Python): wake who it covers."""
        cdef int i
        cdef int64_t before
        with nogil:
            pthread_mutex_lock(&self.mu)
            self.flush_count += flushes
            if flushed_where > self.flushed_where:
                before = self.flushed_where
                rs_store_release_i64(&self.flushed_where, flushed_where)
                self._notify(before)
            for i in range(4):          # everyone waiting is woken (and asks again if not done)
                self.riders[i] = 0
            self.last_riders = 0
            pthread_mutex_unlock(&self.mu)
            for i in range(4):
                rs_futex_bump_and_wake(&self.done_seq[i])

    def wait_requests(self, double timeout_s):
        """Wait (GIL released) until a producer waits for an offset not durable yet, kick()
        or interrupt() is called, or timeout_s passes; True when there is something to flush
        for a waiting producer or a kick."""
        cdef bint pending
        with nogil:
            pthread_mutex_lock(&self.mu)
            self._wait_work(_now() + timeout_s)
            pending = self.requested > self.flushed_where or self.kicked
            self.kicked = False
            self.interrupted = False
            pthread_mutex_unlock(&self.mu)
        return pending

    cdef void _wait_work(self, double until) noexcept nogil:
        """Under mu: wait for a request (or kick/interrupt/close) until `until`."""
        cdef timespec ts
        _deadline(&ts, until)
        while (((self.requested <= self.flushed_where and not self.kicked) or self.flushing)
               and not self.interrupted and not self.closed):
            self.flusher_state = FLUSHER_IDLE
            if pthread_cond_timedwait(&self.work_cv, &self.mu, &ts) == ETIMEDOUT:
                break
        self.flusher_state = FLUSHER_BUSY

    cdef int _round(self, MappedFile mf, bint leader) noexcept nogil:
        """One flush round on mf. Called with mu held and no round running; releases mu for
        the write and the sync, returns with it held. 0, or the errno of the failed call
        (also kept in round_err, for the flush thread to raise)."""
        cdef int64_t size = mf.file_size
        cdef int64_t target, ts, gen, before, async_riders
        cdef int err = 0
        cdef bint wrote_fail = False
        cdef double t0, t1
        self.flushing = True
        self._wait_riders()
        self.kicked = False
        self.pending = 0
        async_riders = self.async_pending
        self.async_pending = 0
        self.started += 1
        gen = self.started
        pthread_mutex_unlock(&self.mu)
        # the store timestamp first: the round covers at least that record
        ts = rs_load_acquire_i64(&mf.store_ts)
        target = rs_load_acquire_i64(&mf.wrote_pos)
        if target > size:
            target = size
        t0 = _now()
        if mf.buffered:
            err = mf.write_through_to(target)
            wrote_fail = err != 0
        t1 = _now()
        if err == 0 and target > mf.flushed_pos:
            if self.has_sync:
                err = self._call_sync(mf, mf.flushed_pos, target)
            else:
                err = mf.sync_range(mf.flushed_pos, target)
            if err == 0:
                mf.flushed_pos = target
        pthread_mutex_lock(&self.mu)
        self.flushing = False
        # who this round wakes: its waiters, and a leader itself
        self.last_riders = self.riders[gen & 3] + (1 if leader else 0) + async_riders
        self.riders[gen & 3] = 0
        self.arrivals = 0
        self.last_event_t = _now()
        if err != 0:
            self.round_err = err
            self.round_err_write = wrote_fail
        else:
            self.write_total_s += t1 - t0
            self.sync_total_s += _now() - t1
            if mf.file_from_offset + target > self.flushed_where:
                self.flush_count += 1
                if ts > 0:
                    rs_store_release_i64(&self.newest_ts, ts)
                before = self.flushed_where
                rs_store_release_i64(&self.flushed_where, mf.file_from_offset + target)
                self._notify(before)
        # under mu: no lost wake-up. Also after a failure: its waiters ask the next round.
        rs_futex_bump_and_wake_n(&self.done_seq[gen & 3],
                                 self.wake_chains if self.wake_chains > 0 else 0x7fffffff)
        if leader and (self.requested > self.flushed_where or err != 0 or target >= size
                       or not self.file_ready):
            # the flush thread takes over: waiters left behind, an error to raise, the roll
            # to the next file, or run() waiting for this round to end
            pthread_cond_signal(&self.work_cv)
        return err

    cdef void _wait_riders(self) noexcept nogil:
        """Under mu, as a round starts: when the last round woke more than one producer and
        not all of them have asked again, wait for the rest (each producer has one put in
        flight, so they are appending their next message now), so this round carries them
        instead of leaving them to the next. The wait ends when they have all asked, when
        none has asked for fill_gap_s (since the last round ended or the last one asked:
        the others are not coming, e.g. they stopped producing) or after fill_max_s. A
        round after one that woke a single producer (a lone producer) never waits."""
        cdef timespec ts
        cdef double t0, until
        if (self.fill_max_s <= 0 or self.last_riders <= 1 or self.pending == 0
                or self.arrivals >= self.last_riders or self.interrupted or self.closed):
            return
        t0 = _now()
        self.fill_target = self.last_riders
        while (self.arrivals < self.fill_target and not self.interrupted
               and not self.closed):
            until = self.last_event_t + self.fill_gap_s
            if until > t0 + self.fill_max_s:
                until = t0 + self.fill_max_s
            if _now() >= until:
                break
            _deadline(&ts, until)
            pthread_cond_timedwait(&self.fill_cv, &self.mu, &ts)
        self.fill_target = 0
        self.fill_count += 1
        self.fill_total_s += _now() - t0

    cdef int _call_sync(self, MappedFile mf, int64_t start, int64_t end) noexcept nogil:
        with gil:
            return self._call_sync_gil(mf, start, end)

    cdef int _call_sync_gil(self, MappedFile mf, int64_t start, int64_t end) noexcept:
        """sync_fn(mf, start, end): 0, or an errno when it raised (kept for run() to raise;
        the round is then not published, as a failed fdatasync)."""
        try:
            self.sync_fn(mf, start, end)
        except BaseException as e:
            self.sync_exc = e
            return (e.errno if isinstance(e, OSError) and e.errno else EIO)
        return 0

    @property
    def sync(self):
        """None (the default: fdatasync of a write-through file, msync of the range of
        any other), or a function sync(file, start, end) that the rounds call instead to
        make [start, end) of the file durable, with the GIL; the producers a round covers
        are woken only after it returned. What it raises fails the round (run() raises
        it)."""
        return self.sync_fn

    @sync.setter
    def sync(self, fn):
        if fn is not None and not callable(fn):
            raise TypeError(f"sync must be callable or None, not {type(fn).__name__}")
        self.sync_fn = fn
        self.has_sync = fn is not None

    def run(self, MappedFile mf not None, double idle_s, double max_busy_s):
        """Flush rounds on mf, the CommitLog file holding the durable offset, with the GIL
        released: wait for a producer, commit [committed, wrote) of a write-through file
        (pwrite) and make [flushed, wrote) durable (fdatasync, or msync of the range for a
        file written through its mapping), publish, wake who it covers. While it runs,
        producers may run rounds on mf themselves (see the module docstring). Returns
        RUN_FULL when mf is durable to its end, RUN_IDLE after idle_s without a waiting
        producer, RUN_BUSY after max_busy_s, RUN_INTERRUPTED, or RUN_UNAVAILABLE (closed,
        read-only, a transient pool buffer); raises OSError when the write or the sync
        fails."""
        cdef int64_t size = mf.file_size
        cdef int result = 0, err = 0
        cdef bint wrote_fail = False
        cdef double now, busy_until
        if (mf.read_only or (mf.buffered and not mf.write_through) or mf.base == NULL
                or not mf.hold()):
            return C_RUN_UNAVAILABLE
        self.cur_file = mf
        try:
            with nogil:
                busy_until = _now() + max_busy_s
                pthread_mutex_lock(&self.mu)
                self.file_ready = not self.closed
                while result == 0:
                    if self.round_err != 0:             # a leader's round failed
                        err = self.round_err
                        wrote_fail = self.round_err_write
                        self.round_err = 0
                        break
                    if mf.flushed_pos >= size:
                        result = C_RUN_FULL
                        break
                    now = _now()
                    if now >= busy_until:
                        result = C_RUN_BUSY
                        break
                    self._wait_work(busy_until if busy_until < now + idle_s else now + idle_s)
                    if self.interrupted or self.closed:
                        self.interrupted = False
                        result = C_RUN_INTERRUPTED
                        break
                    if self.flushing or self.round_err != 0 or mf.flushed_pos >= size:
                        continue                        # timed out behind a leader, or see above
                    if self.requested <= self.flushed_where and not self.kicked:
                        result = C_RUN_IDLE if _now() < busy_until else C_RUN_BUSY
                        break
                    err = self._round(mf, False)
                    if err != 0:
                        wrote_fail = self.round_err_write
                        self.round_err = 0
                        break
                # no leader may use mf once this returns (and lets go of it)
                self.file_ready = False
                while self.flushing:
                    pthread_cond_wait(&self.work_cv, &self.mu)
                pthread_mutex_unlock(&self.mu)
        finally:
            self.cur_file = None
            mf.release()
        if err != 0:
            exc, self.sync_exc = self.sync_exc, None
            if exc is not None and not wrote_fail:
                raise exc
            call = "pwrite" if wrote_fail else "fdatasync" if mf.write_through else "msync"
            raise OSError(err, f"{call} of {mf.file_name} failed: {os.strerror(err)}")
        return result

    def kick(self):
        """Flush what is written at the next round even if no producer waits (WAIT=false)."""
        with nogil:
            self._kick()

    cdef void _kick(self) noexcept nogil:
        pthread_mutex_lock(&self.mu)
        self.kicked = True
        if self.flusher_state != FLUSHER_BUSY:
            pthread_cond_signal(&self.work_cv)
        pthread_mutex_unlock(&self.mu)

    def interrupt(self):
        """Make run()/wait_requests() return to Python now (shutdown); sticky until then."""
        with nogil:
            pthread_mutex_lock(&self.mu)
            self.interrupted = True
            pthread_cond_signal(&self.work_cv)
            pthread_cond_broadcast(&self.fill_cv)
            pthread_mutex_unlock(&self.mu)

    def close(self):
        """Stop waiting: every producer waiting now, or later, gets its answer at once
        (durable or not), and the flush thread returns to Python."""
        cdef int i
        with nogil:
            pthread_mutex_lock(&self.mu)
            self.closed = True
            pthread_cond_signal(&self.work_cv)
            pthread_cond_broadcast(&self.fill_cv)
            self._notify(-1)    # the loop answers its sends by what is durable
            pthread_mutex_unlock(&self.mu)
            for i in range(4):
                rs_futex_bump_and_wake(&self.done_seq[i])
