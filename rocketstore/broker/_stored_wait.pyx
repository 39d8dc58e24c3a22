# cython: language_level=3
"""StoredWait: one send waiting for its flush (SYNC_FLUSH) and its slave (SYNC_MASTER), and
the reply it gives then (MessageWriter.when_stored). It is the DeferredReply its connection
binds, so a slave's report or a finished flush reaches the connection without a Python frame
between them."""

cimport cython

from rocketstore.remoting._deferred cimport DeferredReply

from rocketstore.message import PutMessageStatus

cdef int _OK = PutMessageStatus.PUT_OK
cdef int _FLUSH_SLAVE_TIMEOUT = PutMessageStatus.FLUSH_SLAVE_TIMEOUT
cdef int _FLUSH_DISK_TIMEOUT = PutMessageStatus.FLUSH_DISK_TIMEOUT


@cython.final
cdef class StoredWait(DeferredReply):
    """The parts still waited for and the status of each (the slave's failure wins, as
    RocketMQ's thenCombine); once none is left, the reply is ``on_done(status)`` (what it
    raises answers SYSTEM_ERROR)."""

    cdef object on_done
    cdef public int pending     # the parts waited for, and when_stored until it set them up
    cdef public int flush
    cdef public int slave

    def __init__(self, on_done):
        self.on_done = on_done
        self.pending = 1
        self.flush = _OK
        self.slave = _OK

    def flush_done(self, bint durable):
        self.flush = _OK if durable else _FLUSH_DISK_TIMEOUT
        self.part_done()

    def slave_done(self, bint acknowledged):
        self.slave = _OK if acknowledged else _FLUSH_SLAVE_TIMEOUT
        self.part_done()

    cpdef part_done(self):
        """One part finished (when_stored calls it once it set every part up)."""
        self.pending -= 1
        if self.pending:
            return
        try:
            outcome = self.on_done(self.slave if self.slave != _OK else self.flush)
        except Exception as exc:  # the request gets SYSTEM_ERROR
            outcome = exc
        self.resolve(outcome)
