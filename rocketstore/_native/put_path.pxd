# The put lock, taken from C by the put path.
cimport cython
from cpython.pythread cimport (
    NOWAIT_LOCK, WAIT_LOCK, PyThread_acquire_lock, PyThread_release_lock, PyThread_type_lock,
)

from rocketstore._native.group_commit cimport GroupCommit
from rocketstore._native.mapped_file cimport MappedFile
from rocketstore._native.record_writer cimport RecordWriter


@cython.final
cdef class PutLock:
    cdef PyThread_type_lock lock

    cdef inline void take(self) noexcept:
        if not PyThread_acquire_lock(self.lock, NOWAIT_LOCK):
            with nogil:
                PyThread_acquire_lock(self.lock, WAIT_LOCK)

    cdef inline void give(self) noexcept:
        PyThread_release_lock(self.lock)


@cython.final
cdef class PutPath:
    cdef readonly PutLock lock
    cdef readonly RecordWriter writer
    cdef public MappedFile file     # where appends go; None: take the slow path
    cdef public object slow
    cdef public object after
    cdef public bint accepting      # False: every put is SERVICE_NOT_AVAILABLE
    cdef readonly GroupCommit sync_group    # SYNC_FLUSH: puts wait here for their flush
    cdef double sync_timeout_s

    cdef object _await_flush(self, object result, object message)
