# cython: language_level=3
"""StoredWait: one send waiting for its flush (SYNC_FLUSH) and its slave (SYNC_MASTER), and
the reply it gives then; StoredWaits: what MessageWriter.when_stored sets up for one. A
StoredWait is the DeferredReply its connection binds, so from the send's put to its reply
(a slave's report, a finished flush) no Python frame runs between them."""

cimport cython

from rocketstore.remoting._deferred cimport DeferredReply

from rocketstore.message import PutMessageStatus

cdef int _OK = PutMessageStatus.PUT_OK
cdef int _FLUSH_SLAVE_TIMEOUT = PutMessageStatus.FLUSH_SLAVE_TIMEOUT
cdef int _FLUSH_DISK_TIMEOUT = PutMessageStatus.FLUSH_DISK_TIMEOUT
cdef int _SLAVE_NOT_AVAILABLE = PutMessageStatus.SLAVE_NOT_AVAILABLE


@cython.final
cdef class StoredWait(DeferredReply):
    """The parts still waited for and the status of each (the slave's failure wins, as
    RocketMQ's thenCombine); once none is left, the reply is ``on_done(status)`` (what it
    raises answers SYSTEM_ERROR)."""

    def __init__(self, on_done):
        self._start(on_done)

    cdef void _start(self, on_done):
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


@cython.final
cdef class StoredWaits:
    """What a waiting send waits for: SYNC_MASTER's slaves (``acks``, the HAService's
    SlaveAcks, set when it listens; None: no slave can connect, SLAVE_NOT_AVAILABLE) and
    SYNC_FLUSH's flush (``watch_flush(next_offset, callback)``; None: not SYNC_FLUSH)."""

    def __init__(self, bint sync_master, double slave_timeout_s, watch_flush):
        self.sync_master = sync_master
        self.slave_timeout_s = slave_timeout_s
        self.acks = None
        self.watch_flush = watch_flush

    cpdef StoredWait when_stored(self, long long next_offset, on_done):
        """See MessageWriter.when_stored."""
        cdef StoredWait wait = StoredWait.__new__(StoredWait)
        wait._start(on_done)
        if self.sync_master:
            acks = self.acks
            if acks is None or not acks.slave_ok(next_offset):
                wait.slave = _SLAVE_NOT_AVAILABLE
            else:
                wait.pending += 1
                acks.wait(next_offset, self.slave_timeout_s, wait.slave_done)
        if self.watch_flush is not None:
            wait.pending += 1
            self.watch_flush(next_offset, wait.flush_done)
        wait.part_done()
        return wait
