"""Our requests on one connection that wait for their responses, by opaque, with deadlines.

One timer per connection rather than one per request (a loop timer costs microseconds to make
and cancel, more than the rest of a request): requests are grouped by their timeout, so within
a group insertion order is deadline order, and the timer is armed at the earliest deadline of
any group's oldest request. A request that completes leaves its group at once; the timer then
fires at most once for a deadline that no longer exists and re-arms at the next one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from rocketstore.remoting.command import RemotingCommand
from rocketstore.remoting.errors import RemotingTimeoutError

_Future = asyncio.Future[RemotingCommand]


class ResponseTable:
    __slots__ = ("_loop", "_entries", "_groups", "_timer", "_timer_at", "_peer")

    def __init__(self, loop: asyncio.AbstractEventLoop, peer: Callable[[], str]) -> None:
        self._loop = loop
        #: opaque -> (future, its timeout group)
        self._entries: dict[int, tuple[_Future, dict[int, float]]] = {}
        #: timeout -> {opaque: deadline}, in deadline order
        self._groups: dict[float, dict[int, float]] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self._peer = peer

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, opaque: int) -> bool:
        return opaque in self._entries

    def add(self, opaque: int, future: _Future, timeout: float) -> None:
        deadline = self._loop.time() + timeout
        group = self._groups.get(timeout)
        if group is None:
            group = self._groups[timeout] = {}
        group[opaque] = deadline
        self._entries[opaque] = (future, group)
        if self._timer is None or deadline < self._timer_at:
            self._arm(deadline)

    def pop(self, opaque: int) -> _Future | None:
        """The future waiting for ``opaque`` (None when there is none), no longer tracked."""
        entry = self._entries.pop(opaque, None)
        if entry is None:
            return None
        del entry[1][opaque]
        return entry[0]

    def fail_all(self, error: Callable[[], BaseException]) -> None:
        """Fail every waiting request (the connection closed) and stop the timer."""
        entries, self._entries = self._entries, {}
        self._groups = {}
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for future, _ in entries.values():
            if not future.done():
                future.set_exception(error())

    def _arm(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._loop.call_at(when, self._expire_due)
        self._timer_at = when

    def _expire_due(self) -> None:
        self._timer = None
        now = self._loop.time()
        earliest = None
        for timeout, group in list(self._groups.items()):
            while group:
                opaque, deadline = next(iter(group.items()))
                if deadline > now:
                    if earliest is None or deadline < earliest:
                        earliest = deadline
                    break
                del group[opaque]
                future = self._entries.pop(opaque)[0]
                if not future.done():
                    future.set_exception(RemotingTimeoutError(
                        f"no response from {self._peer()} to opaque {opaque} in {timeout:g} s"))
            if not group:
                del self._groups[timeout]
        if earliest is not None:
            self._arm(earliest)
