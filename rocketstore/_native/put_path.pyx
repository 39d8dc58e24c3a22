# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The CommitLog's put lock, and its put path: the lock, the append and the result in one
call with no Python frame."""
from cpython.pythread cimport PyThread_allocate_lock, PyThread_free_lock

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
        if self.after is None:
            return result
        return self.after(result, message)
