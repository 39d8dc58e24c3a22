# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The CommitLog's put lock, and its put path: the lock, the append and the result in one
call with no Python frame."""
from libc.errno cimport errno
from libc.stdint cimport int64_t

from rocketstore._native.group_commit cimport GroupCommit
from rocketstore._native.includes.atomic cimport rs_load_acquire_i64
from rocketstore._native.message cimport Message
from rocketstore._native.record_writer cimport (
    S_PUT_OK,
    S_SERVICE_NOT_AVAILABLE,
    PutMessageResult,
    RecordWriter,
    status_result,
)

from rocketstore.common.properties import MessageProperty as _MessageProperty

cdef enum:
    S_FLUSH_DISK_TIMEOUT = 1

cdef str _WAIT = _MessageProperty.WAIT


#: RocketMQ's StoreStatsService ranges of putMessageDistributeTime: a put of ms falls in the
#: first range whose bound it is under (the first: ms <= 0)
HOLD_RANGE_BOUNDS = (0, 10, 50, 100, 200, 500, 1000, 2000, 3000, 4000, 5000, 10000)
#: its percentile buckets' upper bounds (ms): a put of ms counts in the first bucket whose
#: bound is >= ms; the last bucket takes the rest (None)
HOLD_BUCKET_CEILINGS = (tuple(range(1, 21)) + tuple(range(22, 51, 2)) + tuple(range(55, 101, 5))
                        + tuple(range(110, 201, 10)) + tuple(range(250, 501, 50))
                        + tuple(range(600, 1001, 100)) + tuple(range(2000, 10001, 1000)) + (None,))
cdef int64_t[75] _CEILINGS
for _i, _bound in enumerate(HOLD_BUCKET_CEILINGS[:-1]):
    _CEILINGS[_i] = _bound
cdef int64_t[12] _RANGE_BOUNDS
for _i, _bound in enumerate(HOLD_RANGE_BOUNDS):
    _RANGE_BOUNDS[_i] = _bound


cdef class PutLock:
    """The CommitLog's put lock (RocketMQ's putMessageLock), usable from C and as a Python
    context manager. Blocking waits release the GIL: the holder may be copying a batch
    without it and needs it back to finish.

    It also counts the puts by how long they held it (``note_hold``, RocketMQ's
    putMessageEntireTime, here the time under the lock to the coarse clock's few ms):
    :meth:`hold_times` reads the counts."""

    def __cinit__(self):
        if sem_init(&self.sem, 0, 1) != 0:
            raise OSError(errno, "sem_init failed for the put lock")
        self.ready = True

    def __dealloc__(self):
        if self.ready:
            sem_destroy(&self.sem)

    def acquire(self):
        self.take()
        return True

    def release(self):
        self.give()

    @property
    def held_ns(self):
        """Nanoseconds the current holder has held the lock (0 while it is free), to the
        coarse clock's resolution (a few ms)."""
        cdef int64_t since = rs_load_acquire_i64(&self.held_since_ns)
        if since == 0:
            return 0
        cdef int64_t held = lock_clock_ns() - since
        return held if held > 0 else 0

    cdef void _note_long_hold(self, int64_t ms) noexcept:
        cdef int i = 0
        while i < 12 and ms >= _RANGE_BOUNDS[i]:
            i += 1
        self.hold_ranges[i] += 1
        i = 0
        while i < 75 and ms > _CEILINGS[i]:
            i += 1
        self.hold_buckets[i] += 1
        if ms > self.hold_max_ms:
            self.hold_max_ms = ms

    def note_put(self):
        """Count the current hold as one put's time (a Python put path's note_hold)."""
        self.note_hold()

    def hold_times(self):
        """(puts per putMessageDistributeTime range, puts per percentile bucket, the longest
        hold in ms): running counts since the store opened."""
        return ([self.hold_ranges[i] for i in range(13)],
                [self.hold_buckets[i] for i in range(76)], self.hold_max_ms)

    def __enter__(self):
        self.take()
        return self

    def __exit__(self, *exc):
        self.give()
        return False


cdef class PutPath:
    """CommitLog.put_message's fast path: one call takes the put lock, appends to the cached
    last file and builds the result, with no Python frame. The CommitLog supplies the slow
    path (roll to a new file, closed log), called under the lock as slow(message, queue_id),
    and an optional after(result, message) hook run after the lock. With SYNC_FLUSH
    (wait_for_flush) a put waits, after the lock and without the GIL, until the group commit
    made its bytes durable. It refuses every put (SERVICE_NOT_AVAILABLE, with refusal as the
    result's reason) until its owner sets accepting."""
    def __init__(self, RecordWriter writer not None, slow):
        self.lock = PutLock()
        self.writer = writer
        self.file = None
        self.slow = slow
        self.after = None
        self.refusal = None
        self.sync_group = None

    def wait_for_flush(self, GroupCommit group, double timeout_s):
        """SYNC_FLUSH: a stored put (unless its WAIT property is "false") returns once group
        published its bytes durable, or FLUSH_DISK_TIMEOUT after timeout_s; a put that does
        not wait kicks the flusher. None: puts do not wait."""
        self.sync_group = group
        self.sync_timeout_s = timeout_s

    def __call__(self, Message message not None, int queue_id=0):
        return self._call(message, queue_id)

    def put(self, Message message not None, int queue_id=0):
        """The same as calling the put path. A bound method is called the vectorcall way (no
        argument tuple per call, unlike an object's __call__): MessageStore.put_message is
        this method."""
        return self._call(message, queue_id)

    cdef object _call(self, Message message, int queue_id):
        cdef object result = self._put(message, queue_id)
        if self.sync_group is not None:
            return self._await_flush(result, message)
        if self.after is None:
            return result
        return self.after(result, message)

    def append(self, Message message not None, int queue_id=0):
        """The put without the after hook or SYNC_FLUSH's wait: appended, not waited for (a
        broker waits for a SYNC_FLUSH put's durability off its event loop; see
        MessageStore.on_durable)."""
        return self._put(message, queue_id)

    def append_hooked(self, Message message not None, int queue_id=0):
        """append, then the after hook (SYNC_FLUSH's wait is not waited for):
        CommitLog.append_message and MessageStore.append_message, with no Python frame."""
        return self._append_hooked(message, queue_id)

    cdef object _append_hooked(self, Message message, int queue_id):
        cdef object result = self._put(message, queue_id)
        if self.after is None:
            return result
        return self.after(result, message)

    cdef object _put(self, Message message, int queue_id):
        cdef object result = None
        cdef PutMessageResult refused
        if not self.accepting:
            refused = status_result(S_SERVICE_NOT_AVAILABLE)
            refused.reason = self.refusal
            return refused
        self.lock.take()
        try:
            if self.file is not None:
                result = self.writer._append(self.file, message, queue_id)
            if result is None:          # the file filled up (END_FILE written) or none yet
                result = self.slow(message, queue_id)
        finally:
            self.lock.note_hold()
            self.lock.give()
        return result

    cdef object _await_flush(self, object result, Message message):
        cdef PutMessageResult r = <PutMessageResult?>result
        cdef dict props = message._props
        cdef int64_t end
        cdef bint ok
        if r.status_code == S_PUT_OK and (props is None or props.get(_WAIT) != "false"):
            end = r.commitlog_offset + r.wrote_bytes
            with nogil:
                ok = self.sync_group._wait_flushed(end, self.sync_timeout_s)
            if not ok:
                r.status_code = S_FLUSH_DISK_TIMEOUT
        else:
            with nogil:
                self.sync_group._kick()
        return r
