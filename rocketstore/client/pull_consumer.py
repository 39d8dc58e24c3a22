"""Pull consumers: :class:`AsyncPullConsumer` (asyncio) and :class:`PullConsumer` (blocking).

RocketMQ's DefaultLitePullConsumer: the application asks for messages with ``poll()``.
Either ``subscribe()`` to topics (the group shares their queues, rebalanced as for push
consumers) or ``assign()`` queues yourself (no group coordination). Behind ``poll()``, each
queue is pulled ahead into a cache (at most ``pull_threshold_for_all`` messages overall,
``pull_threshold_for_queue`` per queue); ``seek()`` moves a queue and drops what was cached
from it. Offsets of what ``poll()`` returned are committed with ``commit()``, or every
``auto_commit_interval_millis`` while ``auto_commit`` is on (the default).

``pull(queue, offset)`` reads a queue directly, without the cache or the group's offsets.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from rocketstore.client.allocate import AllocateMessageQueueStrategy
from rocketstore.client.config import PullConsumerConfig
from rocketstore.client.consumer_base import BaseConsumer
from rocketstore.client.errors import MQClientError
from rocketstore.client.loop_thread import BlockingClient
from rocketstore.client.message import (
    MessageExt,
    MessageQueue,
    PullResult,
    PullStatus,
    validate_topic,
)
from rocketstore.client.offset_store import ReadOffsetType
from rocketstore.client.process_queue import ProcessQueue
from rocketstore.client.route import subscribe_info_from_route
from rocketstore.client.subscription import Selector, SubscriptionData
from rocketstore.common.consume import ConsumeType

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from rocketstore.client.options import PullConsumerOptions

log = logging.getLogger(__name__)

_FLOW_CONTROL_DELAY = 0.05


def _make_config(config: PullConsumerConfig | None, group: str | None, options: Mapping[str, Any]) -> PullConsumerConfig:
    base = config.replace(**options) if config is not None and options else (config or PullConsumerConfig(**options))
    return base.replace(consumer_group=group) if group is not None else base


class AsyncPullConsumer(BaseConsumer):
    """A pull consumer on the running asyncio loop::

        consumer = AsyncPullConsumer("orders-reader", namesrv_addr="127.0.0.1:9876",
                                     consume_from_where="CONSUME_FROM_FIRST_OFFSET")
        consumer.subscribe("orders")
        await consumer.start()
        while running:
            for msg in await consumer.poll(timeout=1.0):
                ...
        await consumer.shutdown()            # commits what poll() returned
    """

    consume_type = ConsumeType.CONSUME_ACTIVELY

    def __init__(self, consumer_group: str | None = None, *, config: PullConsumerConfig | None = None,
                 allocate_strategy: AllocateMessageQueueStrategy | None = None, **options: Unpack[PullConsumerOptions]) -> None:
        super().__init__(_make_config(config, consumer_group, options), allocate_strategy)
        self.config: PullConsumerConfig
        self._assigned: set[MessageQueue] | None = None
        self._pull_tasks: dict[MessageQueue, asyncio.Task[None]] = {}
        self._ready: asyncio.Queue[tuple[MessageQueue, ProcessQueue, int, list[MessageExt]]] | None = None
        self._consumed: dict[MessageQueue, int] = {}
        self._paused: set[MessageQueue] = set()
        self._cached_total = 0

    # ---- set-up ----

    def subscribe(self, topic: str, expression: Selector = "*") -> None:
        if self._assigned is not None:
            raise MQClientError("the consumer was assigned queues: subscribe() and assign() do not mix")
        self._subscribe(topic, expression)

    def unsubscribe(self, topic: str) -> None:
        self._unsubscribe(topic)

    async def assign(self, queues: Iterable[MessageQueue]) -> None:
        """Read exactly these queues (no rebalancing); replaces an earlier assignment. Before
        start() it only records them."""
        self.set_assignment(queues)
        if self._running:
            await self._apply_assignment()

    def set_assignment(self, queues: Iterable[MessageQueue]) -> None:
        """The assignment recorded, to be applied at start() (or by assign())."""
        if self.subscriptions:
            raise MQClientError("the consumer subscribed to topics: subscribe() and assign() do not mix")
        wanted = set(queues)
        for mq in wanted:
            if not isinstance(mq, MessageQueue):
                raise TypeError(f"assign() takes MessageQueues, got {type(mq).__name__}")
        self._assigned = wanted

    def assignment(self) -> set[MessageQueue]:
        return set(self.process_queues)

    def pause(self, queues: Iterable[MessageQueue]) -> None:
        self._paused |= set(queues)

    def resume(self, queues: Iterable[MessageQueue]) -> None:
        self._paused -= set(queues)

    # ---- life ----

    async def start(self) -> None:
        if self._running:
            return
        self._ready = asyncio.Queue()
        await self._start_core()
        if self._assigned is not None:
            await self._apply_assignment()
        if self.config.auto_commit:
            self._tasks.append(asyncio.ensure_future(self._auto_commit_loop()))

    async def shutdown(self) -> None:
        if not self._running:
            return
        if self.config.auto_commit:
            self._commit_consumed()
        await self._shutdown_core()

    async def __aenter__(self) -> AsyncPullConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    async def _persist_loop(self) -> None:
        """Only commit() and auto-commit move a pull consumer's offsets."""
        return None

    async def do_rebalance(self) -> None:
        if self._assigned is None:
            await super().do_rebalance()

    async def _apply_assignment(self) -> None:
        assert self._assigned is not None and self.offset_store is not None
        for mq, pq in list(self.process_queues.items()):
            if mq not in self._assigned:
                pq.dropped = True
                await self._release_queue(mq, pq)
                self.process_queues.pop(mq, None)
        for mq in sorted(self._assigned - set(self.process_queues)):
            offset = await self.compute_pull_from_where(mq)
            if offset < 0:
                raise MQClientError(f"no start offset for {mq}: its broker did not answer")
            pq = ProcessQueue()
            self.process_queues[mq] = pq
            self._start_queue(mq, pq, offset)

    # ---- queues ----

    def _start_queue(self, mq: MessageQueue, pq: ProcessQueue, offset: int) -> None:
        self._consumed[mq] = offset
        self._pull_tasks[mq] = asyncio.ensure_future(self._pull_loop(mq, pq, offset))

    async def _stop_queue(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        task = self._pull_tasks.pop(mq, None)
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        self._cached_total -= pq.msg_count
        if self.offset_store is not None and mq in self._consumed and self.config.auto_commit:
            self.offset_store.update_offset(mq, self._consumed[mq], False)
        self._consumed.pop(mq, None)

    def _subscription_of(self, mq: MessageQueue) -> SubscriptionData:
        return self.subscriptions.get(mq.topic) or SubscriptionData.build(mq.topic, "*")

    async def _pull_loop(self, mq: MessageQueue, pq: ProcessQueue, offset: int) -> None:
        config = self.config
        size_limit = config.pull_threshold_size_for_queue * 1024 * 1024
        error_delay = config.pull_time_delay_mills_when_pull_exception / 1000
        next_offset = offset
        generation = pq.generation
        while self._running and not pq.dropped:
            if (mq in self._paused or self._cached_total > config.pull_threshold_for_all
                    or pq.msg_count > config.pull_threshold_for_queue or pq.msg_size > size_limit
                    or pq.max_span > config.consume_max_span):
                await asyncio.sleep(_FLOW_CONTROL_DELAY)
                continue
            try:
                result = await self.pull_queue(mq, self._subscription_of(mq), next_offset, config.pull_batch_size,
                                               suspend=True)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - pull again later
                if self._running and not pq.dropped:
                    log.warning("pull of %s at %d failed: %s", mq, next_offset, exc)
                    await asyncio.sleep(error_delay)
                continue
            if pq.dropped or pq.generation != generation:
                return
            pq.last_pull_timestamp = time.monotonic()
            if result.pull_status is PullStatus.OFFSET_ILLEGAL:
                log.warning("%s: offset %d of %s is illegal; moving to %d", self.group, next_offset, mq,
                            result.next_begin_offset)
                if pq.is_empty:
                    self._consumed[mq] = result.next_begin_offset
            elif result.messages:
                pq.put_messages(result.messages)
                self._cached_total += len(result.messages)
                assert self._ready is not None
                self._ready.put_nowait((mq, pq, generation, result.messages))
            elif pq.is_empty:
                # nothing matched up to there: what poll() returned is complete up to there too
                self._consumed[mq] = max(self._consumed.get(mq, 0), result.next_begin_offset)
            next_offset = result.next_begin_offset

    # ---- reading ----

    async def poll(self, timeout: float | None = None) -> list[MessageExt]:
        """The next messages pulled (up to ``pull_batch_size``, from one queue), or [] after
        ``timeout`` seconds (default ``poll_timeout_millis``)."""
        self._check_running()
        assert self._ready is not None
        loop = asyncio.get_running_loop()
        wait = self.config.poll_timeout_millis / 1000 if timeout is None else timeout
        deadline = loop.time() + wait
        while True:
            remaining = deadline - loop.time()
            try:
                if remaining <= 0:
                    mq, pq, generation, messages = self._ready.get_nowait()
                else:
                    mq, pq, generation, messages = await asyncio.wait_for(self._ready.get(), remaining)
            except (asyncio.TimeoutError, asyncio.QueueEmpty):
                return []
            if pq.dropped or pq.generation != generation:
                continue
            self._cached_total -= len(messages)
            offset = pq.remove_messages(messages)
            if offset >= 0:
                self._consumed[mq] = offset
            return messages

    def __aiter__(self) -> AsyncIterator[MessageExt]:
        """``async for msg in consumer``: every message, as poll() returns them, until the
        consumer is shut down (see :meth:`messages` for an end after a quiet spell)."""
        return self.messages()

    async def messages(self, idle_timeout: float | None = None) -> AsyncIterator[MessageExt]:
        """The messages one by one, as poll() returns them; ends when the consumer is shut
        down, or after ``idle_timeout`` seconds without a message (kafka-python's
        ``consumer_timeout_ms``). Offsets advance as with poll() (auto_commit commits them)."""
        loop = asyncio.get_running_loop()
        quiet_since = loop.time()
        while self._running:
            wait = None
            if idle_timeout is not None:
                wait = quiet_since + idle_timeout - loop.time()
                if wait <= 0:
                    return
                wait = min(wait, self.config.poll_timeout_millis / 1000)
            try:
                batch = await self.poll(wait)
            except MQClientError:
                if not self._running:        # shut down while waiting
                    return
                raise
            if batch:
                quiet_since = loop.time()
            for msg in batch:
                yield msg

    async def seek(self, mq: MessageQueue, offset: int) -> None:
        """Read ``mq`` from ``offset`` on (between its min and max offset)."""
        instance = self._check_running()
        pq = self.process_queues.get(mq)
        if pq is None:
            raise MQClientError(f"{mq} is not assigned to this consumer")
        address = await self._address(mq)
        low = await instance.api.get_min_offset(address, mq, instance.timeout)
        high = await instance.api.get_max_offset(address, mq, instance.timeout)
        if not low <= offset <= high:
            raise ValueError(f"offset {offset} of {mq} is outside [{low}, {high}]")
        await self._restart_queue(mq, pq, offset)

    async def _restart_queue(self, mq: MessageQueue, pq: ProcessQueue, offset: int) -> None:
        task = self._pull_tasks.pop(mq, None)
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        self._cached_total -= pq.msg_count
        pq.clear()
        self._consumed[mq] = offset
        self._pull_tasks[mq] = asyncio.ensure_future(self._pull_loop(mq, pq, offset))

    async def seek_to_begin(self, mq: MessageQueue) -> None:
        instance = self._check_running()
        await self.seek(mq, await instance.api.get_min_offset(await self._address(mq), mq, instance.timeout))

    async def seek_to_end(self, mq: MessageQueue) -> None:
        instance = self._check_running()
        await self.seek(mq, await instance.api.get_max_offset(await self._address(mq), mq, instance.timeout))

    # ---- offsets ----

    def _commit_consumed(self, offsets: dict[MessageQueue, int] | None = None) -> list[MessageQueue]:
        assert self.offset_store is not None
        table = self._consumed if offsets is None else offsets
        for mq, offset in table.items():
            if offset >= 0:
                self.offset_store.update_offset(mq, offset, False)
        return list(table)

    async def commit(self, offsets: dict[MessageQueue, int] | None = None) -> None:
        """Commit what poll() returned (or these offsets) to the brokers (commitSync)."""
        self._check_running()
        assert self.offset_store is not None
        queues = self._commit_consumed(offsets)
        for mq in queues:
            await self.offset_store.persist(mq)

    async def committed(self, mq: MessageQueue) -> int:
        """The group's committed offset of ``mq`` on its broker (-1: none)."""
        self._check_running()
        assert self.offset_store is not None
        return await self.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_STORE)

    async def _auto_commit_loop(self) -> None:
        while self._running:
            await asyncio.sleep(self.config.auto_commit_interval_millis / 1000)
            try:
                self._commit_consumed()
                assert self.offset_store is not None
                await self.offset_store.persist_all(list(self.process_queues))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001
                log.warning("auto-commit of %s failed: %s", self.group, exc)

    # ---- metadata and direct reads ----

    async def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        """The readable queues of ``topic``."""
        instance = self._check_running()
        validate_topic(topic)
        if not await instance.update_route(topic):
            raise MQClientError(f"topic {topic} has no route")
        return sorted(subscribe_info_from_route(topic, instance.topic_routes[topic]))

    async def offset_for_timestamp(self, mq: MessageQueue, timestamp_ms: int) -> int:
        instance = self._check_running()
        return await instance.api.search_offset(await self._address(mq), mq, timestamp_ms, instance.timeout)

    async def min_offset(self, mq: MessageQueue) -> int:
        instance = self._check_running()
        return await instance.api.get_min_offset(await self._address(mq), mq, instance.timeout)

    async def max_offset(self, mq: MessageQueue) -> int:
        instance = self._check_running()
        return await instance.api.get_max_offset(await self._address(mq), mq, instance.timeout)

    async def pull(self, mq: MessageQueue, offset: int, max_nums: int = 32, expression: Selector = "*",
                   *, block: bool = False) -> PullResult:
        """Read ``mq`` from ``offset`` now (``block``: wait up to
        ``broker_suspend_max_time_millis`` for a message), bypassing the cache and offsets."""
        self._check_running()
        if not 1 <= max_nums <= 1024:
            raise ValueError(f"max_nums must be in [1, 1024], got {max_nums}")
        if offset < 0:
            raise ValueError(f"offset must not be negative, got {offset}")
        return await self.pull_queue(mq, SubscriptionData.build(mq.topic, expression), offset, max_nums,
                                     suspend=block)


class PullConsumer(BlockingClient[AsyncPullConsumer]):
    """A blocking pull consumer: :class:`AsyncPullConsumer` on an event loop thread::

        with PullConsumer("orders-reader", namesrv_addr="127.0.0.1:9876") as consumer:
            consumer.subscribe("orders")        # before or after start()
            for msg in consumer.poll(timeout=1.0):
                ...
            consumer.commit()
    """

    not_running_text = "the consumer is not running: call start() first"
    shutdown_timeout = 60.0

    def __init__(self, consumer_group: str | None = None, *, config: PullConsumerConfig | None = None,
                 allocate_strategy: AllocateMessageQueueStrategy | None = None, **options: Unpack[PullConsumerOptions]) -> None:
        core = AsyncPullConsumer(consumer_group, config=config, allocate_strategy=allocate_strategy,
                                 **options)
        super().__init__(core, f"rocketstore-pull-consumer-{core.config.consumer_group}")
        self.config = core.config

    @property
    def client_id(self) -> str | None:
        return self._core.client_id

    def subscribe(self, topic: str, expression: Selector = "*") -> None:
        self._on_loop(self._core.subscribe, topic, expression)

    def unsubscribe(self, topic: str) -> None:
        self._on_loop(self._core.unsubscribe, topic)

    def assign(self, queues: Iterable[MessageQueue]) -> None:
        if self._loop is None:
            self._core.set_assignment(queues)
        else:
            self._run(self._core.assign(list(queues)))

    def assignment(self) -> set[MessageQueue]:
        return set(self._on_loop(self._core.assignment))

    def pause(self, queues: Iterable[MessageQueue]) -> None:
        self._on_loop(self._core.pause, list(queues))

    def resume(self, queues: Iterable[MessageQueue]) -> None:
        self._on_loop(self._core.resume, list(queues))

    def poll(self, timeout: float | None = None) -> list[MessageExt]:
        return list(self._run(self._core.poll(timeout)))

    def __iter__(self) -> Iterator[MessageExt]:
        """``for msg in consumer``: every message until the consumer is shut down (from
        another thread) or the loop is left; see :meth:`messages` for an end after a quiet spell."""
        return self.messages()

    def messages(self, idle_timeout: float | None = None) -> Iterator[MessageExt]:
        """The messages one by one, as poll() returns them; ends when the consumer is shut
        down, or after ``idle_timeout`` seconds without a message."""
        quiet_since = time.monotonic()
        while self._loop is not None:
            wait = self.config.poll_timeout_millis / 1000
            if idle_timeout is not None:
                wait = min(wait, quiet_since + idle_timeout - time.monotonic())
                if wait <= 0:
                    return
            try:
                # bounded: a poll still waiting when shutdown() stops the loop never completes
                batch = list(self._run(self._core.poll(wait), timeout=wait + 5.0))
            except (MQClientError, RuntimeError, TimeoutError, concurrent.futures.CancelledError):
                if self._loop is None:       # shut down while waiting
                    return
                raise
            if batch:
                quiet_since = time.monotonic()
            yield from batch

    def seek(self, mq: MessageQueue, offset: int) -> None:
        self._run(self._core.seek(mq, offset))

    def seek_to_begin(self, mq: MessageQueue) -> None:
        self._run(self._core.seek_to_begin(mq))

    def seek_to_end(self, mq: MessageQueue) -> None:
        self._run(self._core.seek_to_end(mq))

    def commit(self, offsets: dict[MessageQueue, int] | None = None) -> None:
        self._run(self._core.commit(offsets))

    def committed(self, mq: MessageQueue) -> int:
        return int(self._run(self._core.committed(mq)))

    def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        return list(self._run(self._core.fetch_message_queues(topic)))

    def offset_for_timestamp(self, mq: MessageQueue, timestamp_ms: int) -> int:
        return int(self._run(self._core.offset_for_timestamp(mq, timestamp_ms)))

    def min_offset(self, mq: MessageQueue) -> int:
        return int(self._run(self._core.min_offset(mq)))

    def max_offset(self, mq: MessageQueue) -> int:
        return int(self._run(self._core.max_offset(mq)))

    def pull(self, mq: MessageQueue, offset: int, max_nums: int = 32, expression: Selector = "*",
             *, block: bool = False) -> PullResult:
        result: PullResult = self._run(self._core.pull(mq, offset, max_nums, expression, block=block))
        return result
