"""Push consumers: :class:`AsyncPushConsumer` (asyncio) and :class:`PushConsumer` (blocking).

RocketMQ's DefaultMQPushConsumer: subscribe to topics (with tag expressions), register a
listener, start; messages arrive at the listener. Under the hood each queue the consumer owns
(see :mod:`rocketstore.client.consumer_base` for how queues are shared) has a pull loop that
long-polls its broker (PULL_MESSAGE with the suspend flag: the broker answers when messages
arrive or after ``broker_suspend_max_time_millis``) and caches what it gets in the queue's
:class:`~rocketstore.client.process_queue.ProcessQueue`. Pulling pauses while a queue caches
more than ``pull_threshold_for_queue`` messages or ``pull_threshold_size_for_queue`` MiB, or
(concurrently) spans more than ``consume_concurrently_max_span`` offsets: flow control.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rocketstore.client.allocate import AllocateMessageQueueStrategy
from rocketstore.client.config import (
    CLIENT_INNER_PRODUCER_GROUP,
    ProducerConfig,
    PushConsumerConfig,
)
from rocketstore.client.consume_service import (
    ConsumeConcurrentlyService,
    ConsumeOrderlyService,
    Listener,
)
from rocketstore.client.consumer_base import BaseConsumer
from rocketstore.client.errors import MQClientError
from rocketstore.client.loop_thread import BlockingClient
from rocketstore.client.message import (
    Message,
    MessageConst,
    MessageExt,
    MessageQueue,
    PullStatus,
    retry_topic,
)
from rocketstore.client.offset_store import ReadOffsetType
from rocketstore.client.process_queue import ProcessQueue
from rocketstore.client.subscription import Selector

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from rocketstore.client.options import PushConsumerOptions

log = logging.getLogger(__name__)

#: Pause of a queue under flow control (PULL_TIME_DELAY_MILLS_WHEN_FLOW_CONTROL).
_FLOW_CONTROL_DELAY = 0.05
_FLOW_CONTROL_LOG_EVERY = 1000


def _make_config(config: PushConsumerConfig | None, group: str | None, options: Mapping[str, Any]) -> PushConsumerConfig:
    base = config.replace(**options) if config is not None and options else (config or PushConsumerConfig(**options))
    return base.replace(consumer_group=group) if group is not None else base


class AsyncPushConsumer(BaseConsumer):
    """A push consumer on the running asyncio loop::

        consumer = AsyncPushConsumer("orders-consumer", namesrv_addr="127.0.0.1:9876")
        consumer.subscribe("orders", "paid || shipped")
        consumer.register_message_listener(handle)   # handle(messages) -> ConsumeStatus | None
        await consumer.start()
        ...
        await consumer.shutdown()

    Options are :class:`PushConsumerConfig`'s fields (``message_model``,
    ``consume_from_where``, ``consume_thread_max``, ...).
    """

    def __init__(self, consumer_group: str | None = None, *, config: PushConsumerConfig | None = None,
                 allocate_strategy: AllocateMessageQueueStrategy | None = None, **options: Unpack[PushConsumerOptions]) -> None:
        super().__init__(_make_config(config, consumer_group, options), allocate_strategy)
        self.config: PushConsumerConfig
        self._listener: Listener | None = None
        self._service: ConsumeConcurrentlyService | ConsumeOrderlyService | None = None
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._pull_tasks: dict[MessageQueue, asyncio.Task[None]] = {}
        self._inner_producer: Any = None
        self._paused = False
        self.flow_control_times = 0

    # ---- set-up ----

    def subscribe(self, topic: str, expression: Selector = "*") -> None:
        """Consume ``topic``'s messages whose tag matches ``expression`` (``*``: all;
        ``"a || b"``: tag a or b), or those an ``SQL92(...)`` selector selects by their
        properties. Subscribing again replaces the expression."""
        self._subscribe(topic, expression)

    def unsubscribe(self, topic: str) -> None:
        self._unsubscribe(topic)

    def register_message_listener(self, listener: Listener, *, orderly: bool = False) -> Listener:
        """Set the listener (usable as a decorator). ``orderly``: each queue's messages are
        consumed one batch at a time in offset order, under a broker lock (clustering)."""
        if self._running:
            raise MQClientError("register the listener before start()")
        if not callable(listener):
            raise TypeError("listener must be callable")
        self._listener = listener
        self.orderly = orderly
        return listener

    def suspend(self) -> None:
        """Stop pulling (what is cached is still consumed)."""
        self._paused = True

    def resume(self) -> None:
        self._paused = False

    # ---- life ----

    async def start(self) -> None:
        if self._running:
            return
        if self._listener is None:
            raise MQClientError("register a message listener before start()")
        if not self.subscriptions:
            raise MQClientError("subscribe to a topic before start()")
        self._subscribe_retry_topic()
        self._executor = concurrent.futures.ThreadPoolExecutor(
            self.config.consume_thread_max, thread_name_prefix=f"rocketstore-consume-{self.group}")
        if self.orderly:
            self._service = ConsumeOrderlyService(self, self._listener, self._executor)
        else:
            self._service = ConsumeConcurrentlyService(self, self._listener, self._executor)
        try:
            await self._start_core()
        except BaseException:
            self._executor.shutdown(wait=False)
            raise

    async def shutdown(self) -> None:
        if not self._running:
            return
        await self._shutdown_core()
        if self._service is not None:
            await self._service.shutdown()
        if self._inner_producer is not None:
            await self._inner_producer.shutdown()
        if self._executor is not None:
            await asyncio.get_running_loop().run_in_executor(None, self._executor.shutdown)

    async def __aenter__(self) -> AsyncPushConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    # ---- queues ----

    def _start_queue(self, mq: MessageQueue, pq: ProcessQueue, offset: int) -> None:
        self._pull_tasks[mq] = asyncio.ensure_future(self._pull_loop(mq, pq, offset))

    async def _stop_queue(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        task = self._pull_tasks.pop(mq, None)
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        if isinstance(self._service, ConsumeOrderlyService):
            await self._service.wait_idle(mq, 1.0)

    async def _pull_loop(self, mq: MessageQueue, pq: ProcessQueue, offset: int) -> None:
        config = self.config
        size_limit = config.pull_threshold_size_for_queue * 1024 * 1024
        error_delay = config.pull_time_delay_mills_when_pull_exception / 1000
        next_offset = offset
        while self._running and not pq.dropped:
            if self._paused:
                await asyncio.sleep(1.0)
                continue
            if pq.msg_count > config.pull_threshold_for_queue or pq.msg_size > size_limit:
                self._flow_control(mq, pq, "cached messages")
                await asyncio.sleep(_FLOW_CONTROL_DELAY)
                continue
            if not self.orderly and pq.max_span > config.consume_concurrently_max_span:
                self._flow_control(mq, pq, "offset span")
                await asyncio.sleep(_FLOW_CONTROL_DELAY)
                continue
            if self.orderly and self.clustering and not pq.locked:
                await asyncio.sleep(error_delay)
                continue
            subscription = self.subscriptions.get(mq.topic)
            if subscription is None:
                await asyncio.sleep(error_delay)
                continue
            assert self.offset_store is not None
            commit_offset = 0
            if self.clustering:
                commit_offset = max(0, await self.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_MEMORY))
            try:
                result = await self.pull_queue(mq, subscription, next_offset, config.pull_batch_size,
                                               suspend=True, commit_offset=commit_offset)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - pull again later
                if self._running and not pq.dropped:
                    log.warning("pull of %s at %d failed: %s", mq, next_offset, exc)
                    await asyncio.sleep(error_delay)
                continue
            pq.last_pull_timestamp = time.monotonic()
            if pq.dropped:
                return
            status = result.pull_status
            if status is PullStatus.FOUND:
                next_offset = result.next_begin_offset
                if result.messages:
                    dispatch = pq.put_messages(result.messages)
                    assert self._service is not None
                    self._service.submit(result.messages, pq, mq, dispatch)
            elif status in (PullStatus.NO_NEW_MSG, PullStatus.NO_MATCHED_MSG):
                next_offset = result.next_begin_offset
                if pq.is_empty:
                    self.offset_store.update_offset(mq, next_offset, True)
            else:  # OFFSET_ILLEGAL: start over where the broker says
                log.warning("%s: offset %d of %s is illegal; moving to %d", self.group, next_offset, mq,
                            result.next_begin_offset)
                pq.dropped = True
                self.offset_store.update_offset(mq, result.next_begin_offset, False)
                try:
                    await self.offset_store.persist(mq)
                except Exception as exc:  # noqa: BLE001
                    log.info("committing the moved offset of %s failed: %s", mq, exc)
                self._pull_tasks.pop(mq, None)
                self.process_queues.pop(mq, None)
                self.rebalance_immediately()
                return
            if config.pull_interval:
                await asyncio.sleep(config.pull_interval / 1000)

    def _flow_control(self, mq: MessageQueue, pq: ProcessQueue, why: str) -> None:
        self.flow_control_times += 1
        if self.flow_control_times % _FLOW_CONTROL_LOG_EVERY == 1:
            log.info("%s: flow control on %s (%s: %d messages, %d bytes cached)", self.group, mq, why,
                     pq.msg_count, pq.msg_size)

    # ---- retries ----

    async def send_message_back(self, msg: MessageExt, delay_level: int) -> bool:
        """Return a failed message to the broker for a later retry (or the DLQ with
        ``delay_level`` -1); if the broker cannot take it back, re-send it to the retry topic
        as a new message. False when neither worked."""
        instance = self._check_running()
        max_times = self.config.effective_max_reconsume_times(self.orderly)
        try:
            address = instance.broker_address(msg.broker_name or "") or msg.store_host
            await instance.api.consumer_send_message_back(
                address, msg.commit_log_offset, self.group, delay_level, msg.msg_id, msg.topic,
                max_times, instance.timeout)
            return True
        except Exception as exc:  # noqa: BLE001 - try the retry topic directly
            log.info("send-back of %s failed (%s); sending it to the retry topic", msg.msg_id, exc)
        try:
            await self._resend_to_retry_topic(msg, delay_level, max_times)
            return True
        except Exception as exc:  # noqa: BLE001
            log.warning("message %s could not be returned for retry: %s", msg.msg_id, exc)
            return False

    async def _resend_to_retry_topic(self, msg: MessageExt, delay_level: int, max_times: int) -> None:
        from rocketstore.client.producer import AsyncProducer

        if self._inner_producer is None:
            self._inner_producer = AsyncProducer(config=ProducerConfig(
                producer_group=CLIENT_INNER_PRODUCER_GROUP, namesrv_addr=self.config.namesrv_addr,
                client_ip=self.config.client_ip, instance_name=self.config.instance_name))
            await self._inner_producer.start()
        retry = Message(retry_topic(self.group), msg.body, flag=msg.flag)
        retry.properties = dict(msg.properties)
        retry.properties.pop(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, None)
        retry.properties[MessageConst.ORIGIN_MESSAGE_ID] = (
            msg.properties.get(MessageConst.ORIGIN_MESSAGE_ID) or msg.msg_id)
        retry.properties.setdefault(MessageConst.RETRY_TOPIC, msg.topic)
        retry.properties[MessageConst.RECONSUME_TIME] = str(msg.reconsume_times + 1)
        retry.properties[MessageConst.MAX_RECONSUME_TIMES] = str(max_times)
        retry.delay_time_level = 3 + msg.reconsume_times if delay_level >= 0 else 0
        await self._inner_producer.send(retry)


class PushConsumer(BlockingClient[AsyncPushConsumer]):
    """A blocking push consumer: :class:`AsyncPushConsumer` on an event loop thread::

        consumer = PushConsumer("orders-consumer", namesrv_addr="127.0.0.1:9876")
        consumer.subscribe("orders", "*")

        @consumer.register_message_listener
        def handle(messages):
            for msg in messages:
                print(msg.msg_id, msg.body)

        consumer.start()
        ...
        consumer.shutdown()

    The listener runs on the consume thread pool, never on the loop thread.
    """

    not_running_text = "the consumer is not running: call start() first"
    shutdown_timeout = 60.0

    def __init__(self, consumer_group: str | None = None, *, config: PushConsumerConfig | None = None,
                 allocate_strategy: AllocateMessageQueueStrategy | None = None, **options: Unpack[PushConsumerOptions]) -> None:
        core = AsyncPushConsumer(consumer_group, config=config, allocate_strategy=allocate_strategy,
                                 **options)
        super().__init__(core, f"rocketstore-consumer-{core.config.consumer_group}")
        self.config = core.config

    @property
    def client_id(self) -> str | None:
        return self._core.client_id

    def subscribe(self, topic: str, expression: Selector = "*") -> None:
        self._on_loop(self._core.subscribe, topic, expression)

    def unsubscribe(self, topic: str) -> None:
        self._on_loop(self._core.unsubscribe, topic)

    def register_message_listener(self, listener: Listener | None = None, *, orderly: bool = False) -> Any:
        """``consumer.register_message_listener(fn)``, or as a decorator with or without
        ``(orderly=True)``."""
        if listener is None:
            return lambda fn: self._core.register_message_listener(fn, orderly=orderly)
        return self._core.register_message_listener(listener, orderly=orderly)

    def suspend(self) -> None:
        self._core.suspend()

    def resume(self) -> None:
        self._core.resume()
