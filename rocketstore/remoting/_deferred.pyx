# cython: language_level=3
"""DeferredReply: a processor's reply that a callback on the loop gives later, with no Future.

A SYNC_FLUSH or SYNC_MASTER send is answered when its flush or its slave's report comes; many
sends wait at once. A Future per send costs a task-like round: ``ensure_future``, a done
callback scheduled with ``call_soon`` and run one loop turn later, after the requests read in
between. A processor that returns a DeferredReply instead is bound by its connection
(:meth:`bind`), and :meth:`resolve` writes the reply into the connection at once, on the
thread and in the turn that learned it. Awaitable too (a Future made on demand), for a caller
that is not a connection. Native: a waiting send's reply costs no Python frame between the
slave's report and the connection.

The sink (a connection's RequestPump) has ``deferred_done(request, outcome)``: the outcome is a
RemotingCommand, a SUCCESS reply encoded as a whole frame (bytes), None (no reply) or the
exception its producer raised.
"""

import asyncio


cdef class DeferredReply:
    """A reply given later on the loop; see the module."""

    @property
    def done(self):
        return self._done

    cpdef bind(self, sink, request):
        """The connection that answers ``request`` with this reply (at once when it is given)."""
        if self._done:
            sink.deferred_done(request, self._outcome)
        else:
            self._sink = sink
            self._request = request

    cpdef resolve(self, outcome):
        """The reply (a RemotingCommand, a SUCCESS reply encoded as a whole frame, None for
        none, or an exception for SYSTEM_ERROR); only the first counts."""
        if self._done:
            return
        self._done = True
        self._outcome = outcome
        sink = self._sink
        if sink is not None:
            self._sink = None
            request, self._request = self._request, None
            sink.deferred_done(request, outcome)
        elif self._future is not None and not self._future.done():
            if isinstance(outcome, BaseException):
                self._future.set_exception(outcome)
            else:
                self._future.set_result(outcome)

    def __await__(self):
        if self._done:
            if isinstance(self._outcome, BaseException):
                raise self._outcome
            return self._outcome
        if self._future is None:
            self._future = asyncio.get_running_loop().create_future()
        return (yield from self._future.__await__())
