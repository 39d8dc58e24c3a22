# StoredWait and StoredWaits (see _stored_wait.pyx): the send path cimports them.

from rocketstore.remoting._deferred cimport DeferredReply


cdef class StoredWait(DeferredReply):
    cdef object on_done
    cdef public int pending     # the parts waited for, and when_stored until it set them up
    cdef public int flush
    cdef public int slave

    cdef void _start(self, on_done)
    cpdef part_done(self)


cdef class StoredWaits:
    cdef public bint sync_master
    cdef public double slave_timeout_s
    cdef public object acks
    cdef object watch_flush

    cpdef StoredWait when_stored(self, long long next_offset, on_done)
