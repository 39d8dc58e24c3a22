"""MessageWriter under SYNC_FLUSH: a group commit round's answers reach the event loop together
(one wake-up of the loop for everything the durability thread answered before the loop ran),
each send gets its own status, in order."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace
from typing import Any

import broker_helpers

from rocketstore.broker.message_writer import MessageWriter
from rocketstore.message import PutMessageStatus

arun = broker_helpers.arun


class _Store:
    """What MessageWriter needs of a store: its config and on_durable (callbacks kept, called
    by the test from a thread of its own, as the store's durability thread calls them)."""

    def __init__(self) -> None:
        self.config = SimpleNamespace(delay_levels_ms=[1000], flush_disk_type="SYNC_FLUSH",
                                      broker_role="ASYNC_MASTER", sync_flush_timeout=5000,
                                      slave_timeout=3000)
        self.waiting: list[tuple[int, Any]] = []

    def on_durable(self, next_offset: int, callback: Any) -> None:
        self.waiting.append((next_offset, callback))


class _CountingLoop:
    """The running loop, with its call_soon_threadsafe calls counted."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.wakeups = 0

    def call_soon_threadsafe(self, *args: Any) -> Any:
        self.wakeups += 1
        return self._loop.call_soon_threadsafe(*args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loop, name)


def _answer_from_thread(store: _Store, durable: list[bool]) -> None:
    """Calls every kept callback from another thread while the loop is blocked (the test's
    coroutine joins the thread without awaiting)."""
    waiting, store.waiting = store.waiting, []

    def answer() -> None:
        for (_, callback), ok in zip(waiting, durable, strict=True):
            callback(ok)

    thread = threading.Thread(target=answer)
    thread.start()
    thread.join(10)


def test_a_rounds_answers_wake_the_loop_once_each_with_its_status(arun) -> None:
    async def main() -> None:
        store = _Store()
        loop = _CountingLoop(asyncio.get_running_loop())
        writer = MessageWriter(store, loop)  # type: ignore[arg-type]
        futures = [writer.when_stored(100 * (i + 1), lambda status, i=i: (i, status)) for i in range(6)]
        assert [offset for offset, _ in store.waiting] == [100, 200, 300, 400, 500, 600]
        _answer_from_thread(store, [True, True, False, True, True, True])
        assert loop.wakeups == 1
        assert not any(f.done() for f in futures)         # answered on the loop, not the thread
        ok, timeout = int(PutMessageStatus.PUT_OK), int(PutMessageStatus.FLUSH_DISK_TIMEOUT)
        assert await asyncio.gather(*futures) == [(0, ok), (1, ok), (2, timeout), (3, ok), (4, ok), (5, ok)]

    arun(main(), timeout=30)


def test_answers_after_the_loop_took_the_last_ones_wake_it_again(arun) -> None:
    async def main() -> None:
        store = _Store()
        loop = _CountingLoop(asyncio.get_running_loop())
        writer = MessageWriter(store, loop)  # type: ignore[arg-type]
        first = [writer.when_stored(10 + i, lambda status: status) for i in range(3)]
        _answer_from_thread(store, [True] * 3)
        assert await asyncio.gather(*first) == [int(PutMessageStatus.PUT_OK)] * 3
        second = [writer.when_stored(20 + i, lambda status: status) for i in range(2)]
        _answer_from_thread(store, [True, False])
        assert await asyncio.wait_for(asyncio.gather(*second), 10) == [
            int(PutMessageStatus.PUT_OK), int(PutMessageStatus.FLUSH_DISK_TIMEOUT)]
        assert loop.wakeups == 2

    arun(main(), timeout=30)
