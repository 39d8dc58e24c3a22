# cython: language_level=3
"""SlaveAcks: SYNC_MASTER's sends waiting for their slaves, in append order, and what the
master last learnt of its slaves' acknowledgements (HAService keeps it current at every report
and every connection change). A send's wait and a report's release run here, without a Python
frame per send: SYNC_MASTER's extra cost over ASYNC_MASTER is this path, once per send
(bench/README.md, "Session 18")."""

cimport cython
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from cpython.ref cimport Py_DECREF, Py_INCREF, PyObject
from libc.stdint cimport int64_t

import logging

log = logging.getLogger("rocketstore.ha.service")

cdef struct Waiter:
    int64_t offset
    double deadline
    PyObject* callback


@cython.final
cdef class SlaveAcks:
    """The waiters (offset, deadline, ``callback(acknowledged: bool)``), oldest first: offsets
    and deadlines both grow along the queue, so a release and an expiry each pop from the
    front."""

    cdef Waiter* ring
    cdef Py_ssize_t capacity, head, count
    #: the offset below which enough replicas acknowledged (HAService.acknowledged_offset)
    cdef public int64_t acked
    #: the best connected slave's acknowledged offset (-1: none reported)
    cdef public int64_t best
    #: a slave is connected
    cdef public bint connected
    cdef public int64_t fallbehind_max
    #: controller mode: the SyncStateSet decides who acknowledges, not how far behind the
    #: best slave is (HAService.is_slave_ok)
    cdef public bint controller_mode
    #: a wake of the connections is scheduled (by a send or by the dispatch thread's arrival)
    cdef public bint wake_pending
    #: the expiry timer is armed
    cdef public bint timer_armed
    cdef object _time, _call_soon, _wake, _arm

    def __cinit__(self):
        self.ring = NULL
        self.capacity = self.head = self.count = 0

    def __init__(self, int64_t fallbehind_max):
        self.acked = -1
        self.best = -1
        self.fallbehind_max = fallbehind_max

    def __dealloc__(self):
        cdef Py_ssize_t i
        for i in range(self.count):
            Py_DECREF(<object>self.ring[(self.head + i) % self.capacity].callback)
        PyMem_Free(self.ring)

    def bind(self, time, call_soon, wake, arm):
        """The loop's clock and call_soon, what wakes the connections, and what arms the expiry
        timer (``arm(deadline)``, called when a waiter comes and no timer is armed)."""
        self._time = time
        self._call_soon = call_soon
        self._wake = wake
        self._arm = arm

    def __len__(self):
        return self.count

    cpdef bint slave_ok(self, int64_t put_where):
        """RocketMQ's isSlaveOK: a slave is connected and the best one is less than
        haSlaveFallbehindMax behind ``put_where``; in controller mode always (a member that
        stays behind leaves the SyncStateSet instead)."""
        if self.controller_mode:
            return True
        return self.connected and put_where - self.best < self.fallbehind_max

    cpdef wait(self, int64_t offset, double timeout_s, callback):
        """``callback(True)`` now when ``offset`` is acknowledged, else once a report
        acknowledges it (:meth:`update`) or ``callback(acknowledged)`` at its deadline
        (:meth:`expire`); the connections are woken to write the new bytes."""
        if offset <= self.acked:
            callback(True)
            return
        if self._time is None:
            raise RuntimeError("SlaveAcks.wait before bind()")
        cdef double deadline = self._time() + timeout_s
        self._push(offset, deadline, callback)
        if not self.timer_armed:
            self.timer_armed = True
            self._arm(deadline)
        self.request_wake()

    cpdef request_wake(self):
        """The connections write the new bytes in the next loop turn (every send appended in
        this turn rides the same write)."""
        if not self.wake_pending and self.connected and self._call_soon is not None:
            self.wake_pending = True
            self._call_soon(self._wake)

    cpdef int update(self, bint connected, int64_t best, int64_t acked) except -1:
        """What the slaves acknowledged now; answers ``True`` to every waiter at or below
        ``acked``, in order. Returns how many were answered."""
        self.connected = connected
        self.best = best
        self.acked = acked
        cdef int answered = 0
        while self.count and self.ring[self.head].offset <= acked:
            _answer(self._pop(), True)
            answered += 1
        return answered

    cpdef double expire(self, double now) except? -2:
        """Answers the waiters whose deadline passed (acknowledged or not, by :attr:`acked`);
        returns the next waiter's deadline, or -1 with none left."""
        cdef int64_t offset
        while self.count and self.ring[self.head].deadline <= now:
            offset = self.ring[self.head].offset
            _answer(self._pop(), offset <= self.acked)
        return self.ring[self.head].deadline if self.count else -1

    cpdef int fail_all(self) except -1:
        """Every waiter gets its answer now, by :attr:`acked` (at stop). Returns how many."""
        cdef int answered = 0
        cdef int64_t offset
        while self.count:
            offset = self.ring[self.head].offset
            _answer(self._pop(), offset <= self.acked)
            answered += 1
        return answered

    cdef int _push(self, int64_t offset, double deadline, object callback) except -1:
        cdef Py_ssize_t i, capacity
        cdef Waiter* grown
        if self.count == self.capacity:
            capacity = self.capacity * 2 if self.capacity else 64
            grown = <Waiter*>PyMem_Realloc(self.ring, capacity * sizeof(Waiter))
            if grown == NULL:
                raise MemoryError()
            # the wrapped part moves after the old end, so the queue is contiguous from head
            for i in range(self.head):
                grown[self.capacity + i] = grown[i]
            self.ring = grown
            self.capacity = capacity
        cdef Waiter* slot = &self.ring[(self.head + self.count) % self.capacity]
        slot.offset = offset
        slot.deadline = deadline
        Py_INCREF(callback)
        slot.callback = <PyObject*>callback
        self.count += 1
        return 0

    cdef object _pop(self):
        """The oldest waiter's callback (the queue's reference handed over)."""
        cdef PyObject* callback = self.ring[self.head].callback
        self.head = (self.head + 1) % self.capacity
        self.count -= 1
        result = <object>callback
        Py_DECREF(result)
        return result


cdef inline void _answer(callback, bint acknowledged):
    try:
        callback(acknowledged)
    except Exception:   # one waiter's failure never reaches the others
        log.exception("answering a SYNC_MASTER send failed")
