"""MessageWriter under SYNC_FLUSH: sends wait on the loop for the group commit's rounds (the
store's DurableWatch: GroupCommit.request and an eventfd, no thread in between); a round's
sends are answered together, each with its own status, in order; FLUSH_DISK_TIMEOUT after
sync_flush_timeout; close() answers what is still waiting."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace

import broker_helpers

from rocketstore._native.group_commit import GroupCommit
from rocketstore.broker.message_writer import MessageWriter
from rocketstore.message import PutMessageStatus
from rocketstore.store.services.durability import DurableWatch

arun = broker_helpers.arun
OK, TIMEOUT = int(PutMessageStatus.PUT_OK), int(PutMessageStatus.FLUSH_DISK_TIMEOUT)


class _Store:
    """What MessageWriter needs of a SYNC_FLUSH store: its config and durable_watch() over a
    real GroupCommit, whose rounds the test publishes from a thread of its own (as the flush
    thread publishes them)."""

    def __init__(self, timeout_s: float = 5.0) -> None:
        self.config = SimpleNamespace(delay_levels_ms=[1000], flush_disk_type="SYNC_FLUSH",
                                      broker_role="ASYNC_MASTER", sync_flush_timeout=5000,
                                      slave_timeout=3000)
        self.group = GroupCommit(0)
        self.watch = DurableWatch(self.group, lambda: self.group.flushed_where, timeout_s)
        self.commit_log = SimpleNamespace(queue=self.group)

    def durable_watch(self) -> DurableWatch:
        return self.watch

    def publish_from_thread(self, offset: int) -> None:
        thread = threading.Thread(target=self.group.publish, args=(offset, 1))
        thread.start()
        thread.join(10)


def test_a_round_answers_its_sends_in_order_on_the_loop(arun) -> None:
    async def main() -> None:
        store = _Store()
        writer = MessageWriter(store, asyncio.get_running_loop())  # type: ignore[arg-type]
        futures = [writer.when_stored(100 * (i + 1), lambda status, i=i: (i, status)) for i in range(6)]
        assert store.watch.pending == 6
        assert store.group.pending == 6            # each asked the group commit for a flush
        store.publish_from_thread(400)             # a round made the first four durable
        assert await asyncio.wait_for(futures[0], 10) == (0, OK)
        assert [f.done for f in futures] == [True] * 4 + [False] * 2    # the round's, together
        assert [await f for f in futures[:4]] == [(i, OK) for i in range(4)]
        store.publish_from_thread(600)
        assert await asyncio.wait_for(asyncio.gather(*futures[4:]), 10) == [(4, OK), (5, OK)]
        assert store.watch.pending == 0
        writer.close()

    arun(main(), timeout=30)


def test_a_send_already_durable_is_answered_at_once(arun) -> None:
    async def main() -> None:
        store = _Store()
        store.group.publish(1000)
        writer = MessageWriter(store, asyncio.get_running_loop())  # type: ignore[arg-type]
        future = writer.when_stored(500, lambda status: status)
        assert future.done and await future == OK
        assert store.watch.pending == 0
        writer.close()

    arun(main(), timeout=30)


def test_a_flush_that_does_not_come_in_time_is_flush_disk_timeout(arun) -> None:
    async def main() -> None:
        store = _Store(timeout_s=0.2)
        writer = MessageWriter(store, asyncio.get_running_loop())  # type: ignore[arg-type]
        first = writer.when_stored(100, lambda status: status)
        second = writer.when_stored(200, lambda status: status)
        store.publish_from_thread(100)
        assert await asyncio.wait_for(first, 10) == OK
        assert await asyncio.wait_for(second, 10) == TIMEOUT     # by the loop's deadline check
        writer.close()

    arun(main(), timeout=30)


def test_close_answers_what_is_still_waiting_by_what_is_durable(arun) -> None:
    async def main() -> None:
        store = _Store()
        writer = MessageWriter(store, asyncio.get_running_loop())  # type: ignore[arg-type]
        futures = [writer.when_stored(offset, lambda status: status) for offset in (100, 200, 300)]
        store.group.publish(200)        # no loop turn between: close() must answer them
        writer.close()
        assert all(f.done for f in futures)
        assert [await f for f in futures] == [OK, OK, TIMEOUT]
        assert store.group.notify_fd == -1
        late = writer.when_stored(150, lambda status: status)     # after close: by what is durable
        assert await asyncio.wait_for(late, 10) == OK

    arun(main(), timeout=30)
