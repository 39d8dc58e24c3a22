# DeferredReply: a processor's reply given later by a callback on the loop (see _deferred.pyx);
# the broker's StoredWait is one.

cdef class DeferredReply:
    cdef object _sink           # the connection that answers the request (bind), or None
    cdef object _request
    cdef object _outcome
    cdef object _future         # made only when awaited before the reply is given
    cdef bint _done

    cpdef bind(self, sink, request)
    cpdef resolve(self, outcome)
