# cython: language_level=3, boundscheck=False, wraparound=False
"""The per-request loop of a remoting connection: decoded commands to their processors, and
replies straight into the connection's frame writer.

This is the one place a request is dispatched (a processor looked up by code, called, its reply
encoded). What is not a plain request with a plain reply (responses to our own requests,
malformed frames, codes nobody serves, processors that fail or answer later) goes to the
connection that owns the pump, through the small interface :class:`RequestPump` names.
"""

from rocketstore.remoting._command cimport RemotingCommand
from rocketstore.remoting._deferred cimport DeferredReply
from rocketstore.remoting._frames cimport FrameWriter

import logging

log = logging.getLogger("rocketstore.remoting.connection")

cdef enum:
    _FLAG_RESPONSE = 1
    _FLAG_ONEWAY = 2
    _SYSTEM_ERROR = 1
    _SUCCESS = 0
    #: request codes below this are counted in C arrays (RocketMQ's reach 200,000: POP's)
    _COUNTED_CODES = 4096

#: RESULT_ONEWAY: the result of a oneway request (no reply is sent)
RESULT_ONEWAY = -1

# The requests this process served, by request code and result (a reply's response code), for
# the metrics endpoint. The hot paths (a native handler's SUCCESS reply, a oneway request) add
# one to a C array; replies made as RemotingCommands, rarer and costlier, go to the dict.
cdef unsigned long long _direct_success[_COUNTED_CODES]
cdef unsigned long long _oneway[_COUNTED_CODES]
_answers: dict = {}


cpdef count_answer(int request_code, int response_code):
    """Count one request answered ``response_code`` (RESULT_ONEWAY: not answered, oneway)."""
    key = (request_code, response_code)
    _answers[key] = _answers.get(key, 0) + 1


cdef inline void _count_fast(int request_code, unsigned long long* table, int result):
    if 0 <= request_code < _COUNTED_CODES:
        table[request_code] += 1
    else:
        count_answer(request_code, result)


def request_counts():
    """``{(request code, result): requests}`` served by this process since it started; the
    result is the reply's response code, or RESULT_ONEWAY."""
    counts = dict(_answers)
    cdef int code
    for code in range(_COUNTED_CODES):
        if _direct_success[code]:
            counts[(code, _SUCCESS)] = counts.get((code, _SUCCESS), 0) + _direct_success[code]
        if _oneway[code]:
            counts[(code, RESULT_ONEWAY)] = counts.get((code, RESULT_ONEWAY), 0) + _oneway[code]
    return counts


cdef class DirectHandler:
    """A request handler (called as ``handler(connection, request)`` like any other) that the
    pump may instead ask to write its reply itself: ``call_into(connection, request, writer)``
    returns what the call would, or the handler itself once it has written one whole reply
    frame into ``writer`` (None when no reply may be sent: a oneway request, a closed
    connection). Native subclasses override ``call_into`` to answer their common case from a
    template, without a RemotingCommand for the reply."""

    cdef object call_into(self, object connection, RemotingCommand request, FrameWriter writer):
        return self(connection, request)


cdef class ReplyFlusher:
    """The connections (their pumps) of one loop with replies queued outside a read (a
    deferred reply, a held pull answered), written together in the next loop turn: one
    callback for all of them, not one each (a slave's report answers a round of SYNC_MASTER
    sends on many connections at once)."""

    cdef object _call_soon
    cdef list _pending

    def __init__(self, loop):
        self._call_soon = loop.call_soon
        self._pending = []

    cpdef add(self, RequestPump pump):
        if not self._pending:
            self._call_soon(self.run)
        self._pending.append(pump)

    def run(self):
        cdef RequestPump pump
        pending, self._pending = self._pending, []
        for pump in pending:
            if pump.flush_scheduled:    # not written since (a read's end writes too)
                try:
                    pump._connection.flush()
                except Exception:   # one connection's failure stays its own
                    log.exception("writing to %s failed",
                                  getattr(pump._connection, "remote_address", "?"))


cdef class RequestPump:
    """Dispatches a connection's decoded commands, and writes the replies given later
    (DeferredReply: the pump is the sink it is bound to).

    ``connection`` provides the slow paths, all public: ``on_response(cmd)`` (the reply to one
    of its own requests), ``on_unhandled_request(request)`` (no processor for its code),
    ``on_async_result(request, result)`` (an awaitable), ``deferred_outcome(request,
    outcome)`` (a deferred reply that is not a frame), ``on_handler_error(request, exc)``,
    ``on_malformed(error)`` (a HeaderError), ``send_error(request, code, remark)``,
    ``pause_for_inflight()`` / ``resume_after_inflight()`` and ``flush()``. It keeps
    ``paused`` and ``closed`` up to date: dispatch stops as soon as either is set. The pump
    keeps the count of requests in flight (``inflight``), whether a read is being dispatched
    (``receiving``: its end writes the replies) and whether a flush is scheduled.
    """

    cdef object _connection
    cdef dict _handlers
    cdef object _processors
    cdef FrameWriter _writer
    cdef Py_ssize_t _flush_bytes
    cdef Py_ssize_t _max_inflight
    cdef ReplyFlusher _flusher
    cdef public bint paused
    cdef public bint closed
    #: the peer's requests being processed (answered later)
    cdef public Py_ssize_t inflight
    #: reading is paused because max_inflight requests are in flight
    cdef public bint inflight_paused
    #: a read is being dispatched: its replies go out when it ends
    cdef public bint receiving
    #: the flusher writes this connection's replies in the next loop turn
    cdef public bint flush_scheduled

    def __init__(self, connection, processors, FrameWriter writer not None,
                 Py_ssize_t flush_bytes, Py_ssize_t max_inflight, ReplyFlusher flusher not None):
        self._connection = connection
        self._processors = processors
        self._handlers = processors.handlers
        self._writer = writer
        self._flush_bytes = flush_bytes
        self._max_inflight = max_inflight
        self._flusher = flusher
        self.paused = False
        self.closed = False
        self.inflight = 0
        self.inflight_paused = False
        self.receiving = False
        self.flush_scheduled = False

    cpdef add_frame(self, RemotingCommand request, bytes frame):
        """Answer ``request`` with a SUCCESS reply already encoded as a whole frame: with the
        read's replies when one is dispatched, else in the flusher's next turn (or now, past
        the flush size). Nothing for a oneway request or on a closed connection."""
        if request.flag & _FLAG_ONEWAY or self.closed:
            return
        if self._writer.add_frame(frame) >= self._flush_bytes:
            self._connection.flush()
        elif not self.receiving and not self.flush_scheduled:
            self.schedule_flush()
        _count_fast(request.code, _direct_success, _SUCCESS)

    cpdef schedule_flush(self):
        """The flusher writes what is queued in the next loop turn."""
        self.flush_scheduled = True
        self._flusher.add(self)

    cpdef request_started(self):
        """One more request in flight (its reply comes later); reading pauses at the limit."""
        self.inflight += 1
        if self.inflight >= self._max_inflight and not self.inflight_paused:
            self._connection.pause_for_inflight()

    cpdef request_done(self):
        """A request in flight was answered; reading resumes at half the limit."""
        self.inflight -= 1
        if self.inflight_paused and self.inflight <= self._max_inflight // 2:
            self._connection.resume_after_inflight()

    cpdef deferred_done(self, RemotingCommand request, outcome):
        """A DeferredReply's outcome (see remoting/_deferred.pyx): a frame is written as
        :meth:`add_frame` writes it; another outcome goes to the connection."""
        self.request_done()
        if outcome is None:
            return
        if type(outcome) is bytes:
            self.add_frame(request, <bytes>outcome)
        else:
            self._connection.deferred_outcome(request, outcome)

    def dispatch(self, list items not None):
        """Dispatch ``items`` in order; returns how many were taken (all of them unless a
        pause or the connection's close stopped it)."""
        cdef Py_ssize_t index, count = len(items)
        cdef RemotingCommand request, response
        connection = self._connection
        for index in range(count):
            if self.paused or self.closed:
                return index
            item = items[index]
            if type(item) is not RemotingCommand:
                connection.on_malformed(item)
                continue
            request = <RemotingCommand>item
            if request.flag & _FLAG_RESPONSE:
                connection.on_response(request)
                continue
            handler = self._handlers.get(request.code)
            if handler is None:
                handler = self._processors.default
                if handler is None:
                    connection.on_unhandled_request(request)
                    continue
            try:
                if isinstance(handler, DirectHandler):
                    result = (<DirectHandler>handler).call_into(
                        connection, request,
                        None if request.flag & _FLAG_ONEWAY or self.closed else self._writer)
                    if result is handler:       # its reply (SUCCESS) is in the writer
                        _count_fast(request.code, _direct_success, _SUCCESS)
                        if self._writer.nbytes >= self._flush_bytes:
                            connection.flush()
                        continue
                else:
                    result = handler(connection, request)
            except Exception as exc:
                connection.on_handler_error(request, exc)
                continue
            if request.flag & _FLAG_ONEWAY:
                _count_fast(request.code, _oneway, RESULT_ONEWAY)
            if result is None:
                continue
            if type(result) is not RemotingCommand:
                if isinstance(result, DeferredReply):   # counted when it answers
                    self.request_started()
                    (<DeferredReply>result).bind(self, request)
                else:
                    connection.on_async_result(request, result)
                continue
            if request.flag & _FLAG_ONEWAY or self.closed:
                continue
            response = <RemotingCommand>result
            response.opaque = request.opaque
            response.flag |= _FLAG_RESPONSE
            response.serialize_type = request.serialize_type
            try:
                queued = self._writer.add(response)
            except Exception as exc:  # ValueError, TypeError, orjson.JSONEncodeError
                connection.send_error(request, _SYSTEM_ERROR, f"response not encodable: {exc}")
                continue
            count_answer(request.code, response.code)
            if queued >= self._flush_bytes:
                connection.flush()  # now: the transport then tells whether to pause
        return count
