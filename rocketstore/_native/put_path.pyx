# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The CommitLog's put lock, and its put path: the lock, the append and the result in one
call with no Python frame."""
from cpython.pythread cimport PyThread_allocate_lock, PyThread_free_lock
from libc.stdint cimport int64_t

from rocketstore._native.includes.atomic cimport rs_load_acquire_i64

from rocketstore._native.message cimport Message
from rocketstore._native.record_writer cimport (
    S_SERVICE_NOT_AVAILABLE,
    PutMessageResult,
    RecordWriter,
    status_result,
)


cdef class PutLock:
    """The CommitLog's put lock (RocketMQ's putMessageLock), usable from C and as a Python
    context manager. Blocking waits release the GIL: the holder may be copying a batch
    without it and needs it back to finish."""

    def __cinit__(self):
        self.lock = PyThread_allocate_lock()
        if self.lock == NULL:
            raise MemoryError()

    def __dealloc__(self):
        if self.lock != NULL:
            PyThread_free_lock(self.lock)

    def acquire(self):
        self.take()
        return True

    def release(self):
        self.give()

    @property
    def held_ns(self):
        """Nanoseconds the current holder has held the lock (0 while it is free)."""
        cdef int64_t since = rs_load_acquire_i64(&self.held_since_ns)
        if since == 0:
            return 0
        cdef int64_t held = monotonic_ns() - since
        return held if held > 0 else 0

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
    and an optional after(result, message) hook run after the lock (SYNC_FLUSH waits there).
    It refuses every put (SERVICE_NOT_AVAILABLE, with refusal as the result's reason) until
    its owner sets accepting."""
    def __init__(self, RecordWriter writer not None, slow):
        self.lock = PutLock()
        self.writer = writer
        self.file = None
        self.slow = slow
        self.after = None
        self.refusal = None

    def __call__(self, Message message not None, int queue_id=0):
        cdef object result = self._put(message, queue_id)
        if self.after is None:
            return result
        return self.after(result, message)

    def append(self, Message message not None, int queue_id=0):
        """The put without the after hook: appended, not waited for (a broker waits for a
        SYNC_FLUSH put's durability off its event loop; see MessageStore.on_durable)."""
        return self._put(message, queue_id)

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
            self.lock.give()
        return result
