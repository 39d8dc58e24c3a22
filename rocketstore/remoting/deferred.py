"""DeferredReply: a processor's reply that a callback on the loop gives later, with no Future.

A SYNC_FLUSH or SYNC_MASTER send is answered when its flush or its slave's report comes; many
sends wait at once. A Future per send costs a task-like round: ``ensure_future``, a done
callback scheduled with ``call_soon`` and run one loop turn later, after the requests read in
between. A processor that returns a DeferredReply instead is bound by its connection
(:meth:`bind`), and :meth:`resolve` writes the reply into the connection at once, on the
thread and in the turn that learned it. Awaitable too (a Future made on demand), for a caller
that is not a connection.
"""
from __future__ import annotations

import asyncio
from collections.abc import Generator
from typing import Any, Protocol


class ReplySink(Protocol):
    def deferred_done(self, request: Any, outcome: Any) -> None:
        """The deferred reply to ``request``: a RemotingCommand, a SUCCESS reply encoded as a
        whole frame (bytes), None (no reply) or the exception its producer raised."""


class DeferredReply:
    """A reply given later on the loop; see the module."""

    __slots__ = ("_done", "_future", "_outcome", "_request", "_sink")

    def __init__(self) -> None:
        self._sink: ReplySink | None = None
        self._request: Any = None
        self._done = False
        self._outcome: Any = None
        self._future: asyncio.Future[Any] | None = None

    @property
    def done(self) -> bool:
        return self._done

    def bind(self, sink: ReplySink, request: Any) -> None:
        """The connection that answers ``request`` with this reply (at once when it is given)."""
        if self._done:
            sink.deferred_done(request, self._outcome)
        else:
            self._sink = sink
            self._request = request

    def resolve(self, outcome: Any) -> None:
        """The reply (a RemotingCommand, a SUCCESS reply encoded as a whole frame, None for
        none, or an exception for SYSTEM_ERROR); only the first counts."""
        if self._done:
            return
        self._done = True
        self._outcome = outcome
        sink = self._sink
        if sink is not None:
            self._sink = None
            sink.deferred_done(self._request, outcome)
        elif self._future is not None and not self._future.done():
            if isinstance(outcome, BaseException):
                self._future.set_exception(outcome)
            else:
                self._future.set_result(outcome)

    def __await__(self) -> Generator[Any, None, Any]:
        if self._done:
            if isinstance(self._outcome, BaseException):
                raise self._outcome
            return self._outcome
        if self._future is None:
            self._future = asyncio.get_running_loop().create_future()
        return (yield from self._future.__await__())
