"""PullRequestHoldService: long polling. A pull with the suspend bit that finds nothing is
parked here instead of being answered PULL_NOT_FOUND (the C++ client would pull again at once,
hundreds of times a second per queue); it is answered when a message reaches its queue or when
its suspend time is over, whichever comes first.

Arrivals come from the store's reput thread (``MessageStore.add_arrival_listener``):
:meth:`arrival` only looks whether someone waits on that queue and, if so, hands the news to
the event loop with ``call_soon_threadsafe``. On the loop each parked pull of that queue whose
offset is below the new end is processed again (without suspending); if that finds messages
(or anything but "nothing yet") it is answered, otherwise (say, new messages whose tags do not
match) it stays parked until its deadline.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from rocketstore.remoting import RemotingCommand, RemotingConnection, ResponseCode, create_response

log = logging.getLogger(__name__)

QueueKey = tuple[str, int]
#: process(ctx, request) -> the reply of a pull processed without suspending.
Reprocess = Callable[[RemotingConnection, RemotingCommand], RemotingCommand]

#: replies that mean "still nothing for this pull": it stays parked until its deadline
_KEEP_HOLDING = frozenset({ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY})


@dataclass(eq=False)
class HeldPull:
    connection: RemotingConnection
    request: RemotingCommand
    key: QueueKey
    offset: int
    deadline: float
    timer: asyncio.TimerHandle | None = field(default=None, repr=False)


class PullRequestHoldService:
    def __init__(self, loop: asyncio.AbstractEventLoop, reprocess: Reprocess) -> None:
        self.loop = loop
        self.reprocess = reprocess
        self._held: dict[QueueKey, list[HeldPull]] = {}
        self._stopped = False

    @property
    def held_count(self) -> int:
        return sum(len(pulls) for pulls in self._held.values())

    def hold(self, connection: RemotingConnection, request: RemotingCommand, topic: str,
             queue_id: int, offset: int, timeout_s: float) -> None:
        """Park a pull until a message past ``offset`` reaches (topic, queue_id) or
        ``timeout_s`` passes."""
        key = (topic, queue_id)
        held = HeldPull(connection, request, key, offset, self.loop.time() + timeout_s)
        held.timer = self.loop.call_at(held.deadline, self._expire, held)
        self._held.setdefault(key, []).append(held)

    # ---- wake-ups ----

    def arrival(self, topic: str, queue_id: int, next_offset: int) -> None:
        """From the store's dispatch thread: messages up to next_offset are readable."""
        if (topic, queue_id) in self._held and not self._stopped:
            try:
                self.loop.call_soon_threadsafe(self.notify_arrival, topic, queue_id, next_offset)
            except RuntimeError:    # the loop is closed
                pass

    def notify_arrival(self, topic: str, queue_id: int, next_offset: int) -> None:
        key = (topic, queue_id)
        pulls = self._held.get(key)
        if not pulls:
            return
        kept = []
        for held in pulls:
            if held.offset >= next_offset or held.connection.is_closed:
                if not held.connection.is_closed:
                    kept.append(held)
                elif held.timer is not None:
                    held.timer.cancel()
                continue
            response = self._process(held)
            if response is not None and response.code in _KEEP_HOLDING:
                kept.append(held)
                continue
            if held.timer is not None:
                held.timer.cancel()
            if response is not None:
                held.connection.send_response(held.request, response)
        self._set(key, kept)

    def _expire(self, held: HeldPull) -> None:
        pulls = self._held.get(held.key)
        if pulls is None or held not in pulls:
            return
        pulls.remove(held)
        self._set(held.key, pulls)
        if held.connection.is_closed:
            return
        response = self._process(held)
        if response is not None:
            held.connection.send_response(held.request, response)

    def _process(self, held: HeldPull) -> RemotingCommand | None:
        try:
            return self.reprocess(held.connection, held.request)
        except Exception as exc:  # noqa: BLE001 - answer it, keep the others going
            log.exception("processing a held pull failed")
            return create_response(held.request, ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")

    def _set(self, key: QueueKey, pulls: list[HeldPull]) -> None:
        if pulls:
            self._held[key] = pulls
        else:
            self._held.pop(key, None)

    def wake_all(self) -> None:
        """Answer every parked pull now (the broker is stopping)."""
        self._stopped = True
        held, self._held = self._held, {}
        for pulls in held.values():
            for pull in pulls:
                if pull.timer is not None:
                    pull.timer.cancel()
                if not pull.connection.is_closed:
                    response = self._process(pull)
                    if response is not None:
                        pull.connection.send_response(pull.request, response)
