"""Running the message listener: concurrently, or in order per queue.

RocketMQ's ConsumeMessageConcurrentlyService and ConsumeMessageOrderlyService. A listener is a
function ``listener(messages) -> ConsumeStatus | None`` (or ``listener(messages, context)``);
plain functions run on the consume thread pool (``consume_thread_max`` threads), ``async def``
ones on the event loop. Returning None or ``ConsumeStatus.SUCCESS`` means consumed;
``ConsumeStatus.RECONSUME_LATER`` or an exception means "again later":

- concurrently (clustering), each failed message is sent back to the broker
  (CONSUMER_SEND_MSG_BACK), which delivers it again through ``%RETRY%<group>`` after a delay
  that grows with its reconsume count, and after ``max_reconsume_times`` (16) puts it in
  ``%DLQ%<group>``. A message the broker could not take back is consumed again here 5 s later.
  Broadcasting consumers drop failed messages (as RocketMQ does) and log them.
- orderly, the queue stops for ``suspend_current_queue_time_millis`` and the same messages are
  consumed again, in order, with a growing reconsume count; past ``max_reconsume_times`` they go
  to the DLQ so the queue can go on.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import enum
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from rocketstore.client.message import MessageConst, MessageExt, MessageQueue
from rocketstore.client.process_queue import ProcessQueue

if TYPE_CHECKING:
    from rocketstore.client.config import PushConsumerConfig
    from rocketstore.client.offset_store import OffsetStore

log = logging.getLogger(__name__)

#: A message the broker would not take back is consumed again here after this long.
_LOCAL_RETRY_DELAY = 5.0


class ListenerConsumer(Protocol):
    """What a consume service needs of the push consumer it runs the listener for."""

    config: PushConsumerConfig
    offset_store: OffsetStore | None

    @property
    def running(self) -> bool: ...

    @property
    def clustering(self) -> bool: ...

    def reset_retry_topic(self, messages: Iterable[MessageExt]) -> None: ...

    async def send_message_back(self, msg: MessageExt, delay_level: int) -> bool: ...

    async def lock(self, mq: MessageQueue) -> bool: ...


class ConsumeStatus(enum.Enum):
    """What a listener says about the messages it was given."""

    SUCCESS = "SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"
    # RocketMQ's names for the same answers
    CONSUME_SUCCESS = "SUCCESS"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "RECONSUME_LATER"


@dataclass
class ConsumeContext:
    """Passed to listeners that take a second argument (ConsumeConcurrentlyContext /
    ConsumeOrderlyContext)."""

    message_queue: MessageQueue
    #: Concurrently: the delay level of the retry (0: the broker's choice, 3 + reconsume count;
    #: -1: straight to the DLQ).
    delay_level_when_next_consume: int = 0
    #: Concurrently: messages up to this index are consumed even when the answer is
    #: RECONSUME_LATER (-1: none unless SUCCESS).
    ack_index: int = -1
    #: Orderly: how long the queue waits before the messages are consumed again (ms; -1: the
    #: consumer's suspend_current_queue_time_millis).
    suspend_current_queue_time_millis: int = -1


Listener = Callable[..., Any]


def _takes_context(listener: Listener) -> bool:
    try:
        parameters = [p for p in inspect.signature(listener).parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)]
    except (TypeError, ValueError):
        return False
    return len(parameters) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in parameters)


class _ListenerRunner:
    def __init__(self, listener: Listener, executor: concurrent.futures.Executor) -> None:
        self.listener = listener
        self.is_async = inspect.iscoroutinefunction(listener) or inspect.iscoroutinefunction(
            type(listener).__call__)
        self.with_context = _takes_context(listener)
        self.executor = executor

    async def run(self, messages: list[MessageExt], context: ConsumeContext) -> bool:
        """True when consumed, False for "again later" (an exception is logged)."""
        args: tuple[Any, ...] = (messages, context) if self.with_context else (messages,)
        try:
            if self.is_async:
                status = await self.listener(*args)
            else:
                status = await asyncio.get_running_loop().run_in_executor(self.executor, self.listener, *args)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("the message listener raised on %d message(s) of %s; they will be consumed again",
                          len(messages), context.message_queue)
            return False
        if status is None or status is ConsumeStatus.SUCCESS:
            return True
        if status is ConsumeStatus.RECONSUME_LATER:
            return False
        log.warning("the message listener returned %r, not a ConsumeStatus: consuming again later", status)
        return False


def _stamp(messages: list[MessageExt]) -> None:
    now = str(int(time.time() * 1000))
    for msg in messages:
        msg.properties[MessageConst.CONSUME_START_TIMESTAMP] = now


class ConsumeConcurrentlyService:
    def __init__(self, consumer: ListenerConsumer, listener: Listener,
                 executor: concurrent.futures.Executor) -> None:
        self.consumer = consumer
        self.runner = _ListenerRunner(listener, executor)
        self._tasks: set[asyncio.Task[None]] = set()

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def submit(self, messages: list[MessageExt], pq: ProcessQueue, mq: MessageQueue, dispatch: bool) -> None:
        size = self.consumer.config.consume_message_batch_max_size
        for start in range(0, len(messages), size):
            self._spawn(self._consume(messages[start:start + size], pq, mq))

    async def _consume(self, batch: list[MessageExt], pq: ProcessQueue, mq: MessageQueue) -> None:
        if pq.dropped:
            return
        consumer = self.consumer
        consumer.reset_retry_topic(batch)
        _stamp(batch)
        context = ConsumeContext(mq)
        ok = await self.runner.run(batch, context)
        pq.last_consume_timestamp = time.monotonic()
        if pq.dropped:
            return
        ack_index = len(batch) - 1 if ok else min(context.ack_index, len(batch) - 1)
        failed = batch[ack_index + 1:]
        not_taken: list[MessageExt] = []
        if failed:
            if consumer.clustering:
                results = await asyncio.gather(*(consumer.send_message_back(msg, context.delay_level_when_next_consume)
                                                  for msg in failed))
                for msg, taken in zip(failed, results, strict=True):
                    if not taken:
                        msg.reconsume_times += 1
                        not_taken.append(msg)
            else:
                for msg in failed:
                    log.warning("broadcasting consumption of %s failed; the message is dropped", msg.msg_id)
        done = [msg for msg in batch if msg not in not_taken] if not_taken else batch
        offset = pq.remove_messages(done)
        if offset >= 0 and not pq.dropped and consumer.offset_store is not None:
            consumer.offset_store.update_offset(mq, offset, True)
        if not_taken:
            loop = asyncio.get_running_loop()
            loop.call_later(_LOCAL_RETRY_DELAY, lambda: self._spawn(self._consume(not_taken, pq, mq)))

    async def shutdown(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


class ConsumeOrderlyService:
    def __init__(self, consumer: ListenerConsumer, listener: Listener,
                 executor: concurrent.futures.Executor) -> None:
        self.consumer = consumer
        self.runner = _ListenerRunner(listener, executor)
        self._tasks: dict[MessageQueue, asyncio.Task[None]] = {}

    def submit(self, messages: list[MessageExt], pq: ProcessQueue, mq: MessageQueue, dispatch: bool) -> None:
        if dispatch:
            task = self._tasks.get(mq)
            if task is None or task.done():
                self._tasks[mq] = asyncio.ensure_future(self._consume_queue(pq, mq))

    async def wait_idle(self, mq: MessageQueue, timeout: float) -> None:
        """Let the queue's batch in progress finish (before its lock is released)."""
        task = self._tasks.get(mq)
        if task is not None and not task.done():
            try:
                await asyncio.wait_for(asyncio.shield(task), timeout)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                pass
            except Exception:  # noqa: BLE001 - logged by the task itself
                pass

    async def _consume_queue(self, pq: ProcessQueue, mq: MessageQueue) -> None:
        consumer = self.consumer
        config = consumer.config
        batch_size = config.consume_message_batch_max_size
        max_times = config.effective_max_reconsume_times(orderly=True)
        try:
            while not pq.dropped and consumer.running:
                if consumer.clustering and (not pq.locked or pq.is_lock_expired()):
                    if not await consumer.lock(mq):
                        await asyncio.sleep(0.1 if pq.locked else 1.0)
                        continue
                    pq.locked = True
                messages = pq.take_messages(batch_size)
                if not messages:
                    return
                consumer.reset_retry_topic(messages)
                _stamp(messages)
                context = ConsumeContext(mq)
                ok = await self.runner.run(messages, context)
                pq.last_consume_timestamp = time.monotonic()
                if pq.dropped:
                    return
                if not ok and await self._again(messages, max_times):
                    pq.make_messages_to_consume_again(messages)
                    delay = context.suspend_current_queue_time_millis
                    if delay < 0:
                        delay = config.suspend_current_queue_time_millis
                    await asyncio.sleep(max(10, delay) / 1000)
                    continue
                offset = pq.commit()
                if offset >= 0 and consumer.offset_store is not None:
                    consumer.offset_store.update_offset(mq, offset, False)
        finally:
            pq.consuming = False
            if not pq.dropped and not pq.is_empty and consumer.running:
                # messages arrived while we were leaving: go on
                pq.consuming = True
                self._tasks[mq] = asyncio.ensure_future(self._consume_queue(pq, mq))

    async def _again(self, messages: list[MessageExt], max_times: int) -> bool:
        """checkReconsumeTimes: True when the batch must be consumed again; messages past
        ``max_times`` go to the DLQ instead (if the broker takes them)."""
        again = False
        for msg in messages:
            if msg.reconsume_times >= max_times:
                msg.properties[MessageConst.RECONSUME_TIME] = str(msg.reconsume_times)
                if not await self.consumer.send_message_back(msg, -1):
                    again = True
                    msg.reconsume_times += 1
            else:
                again = True
                msg.reconsume_times += 1
        return again

    async def shutdown(self) -> None:
        for task in list(self._tasks.values()):
            task.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)
        self._tasks.clear()
