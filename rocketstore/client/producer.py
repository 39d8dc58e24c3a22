"""Producers: :class:`AsyncProducer` (asyncio) and :class:`Producer` (blocking, on a thread).

RocketMQ's DefaultMQProducer. A send finds the topic's route (from the name servers, cached
and refreshed every 30 s; a topic they do not know takes the route of ``TBW102``, which the
broker creates on first send when it auto-creates topics), picks a queue round robin, or by a
selector, and sends SEND_MESSAGE_V2 (SEND_BATCH_MESSAGE for a batch). A synchronous send that
fails on the network, or gets a broker error that another broker may not have (SYSTEM_ERROR,
SYSTEM_BUSY... see ``RETRY_RESPONSE_CODES``), is tried again on another broker, up to
``retry_times_when_send_failed`` more times, within ``send_msg_timeout`` overall. Bodies over
``compress_msg_body_over_howmuch`` (4 KiB) go compressed with ``compress_type`` (ZLIB by default,
or LZ4 or ZSTD), with sysFlag bit 0 and the codec in bits 8-10 as RocketMQ's producer sets them
(a ZLIB body is 0x301); consumers decode them by those bits.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import enum
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rocketstore.client.config import ProducerConfig
from rocketstore.client.errors import MQBrokerError, MQClientError
from rocketstore.client.instance import ClientInstance
from rocketstore.client.loop_thread import BlockingClient
from rocketstore.client.message import (
    RETRY_GROUP_TOPIC_PREFIX,
    Message,
    MessageConst,
    MessageExt,
    MessageQueue,
    SendResult,
    SendStatus,
    SysFlag,
    encode_properties,
    new_uniq_key,
    validate_topic,
)
from rocketstore.client.records import encode_batch
from rocketstore.client.route import TopicPublishInfo
from rocketstore.client.selector import MessageQueueSelector
from rocketstore.common.compression import compress_body, compression_flags
from rocketstore.common.send_header import V2_NAME
from rocketstore.remoting import RemotingCommand, RemotingConnection, ResponseCode
from rocketstore.remoting.errors import RemotingConnectError, RemotingError

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from rocketstore.client.options import ProducerOptions

log = logging.getLogger(__name__)

#: Broker answers after which a synchronous send tries another broker (DefaultMQProducer).
RETRY_RESPONSE_CODES = frozenset(int(code) for code in {
    ResponseCode.TOPIC_NOT_EXIST, ResponseCode.SERVICE_NOT_AVAILABLE, ResponseCode.SYSTEM_ERROR,
    ResponseCode.SYSTEM_BUSY, ResponseCode.NO_PERMISSION, ResponseCode.NO_BUYER_ID,
    ResponseCode.NOT_IN_CURRENT_UNIT,
})
_SEND_STATUS = {
    int(ResponseCode.SUCCESS): SendStatus.SEND_OK,
    int(ResponseCode.FLUSH_DISK_TIMEOUT): SendStatus.FLUSH_DISK_TIMEOUT,
    int(ResponseCode.FLUSH_SLAVE_TIMEOUT): SendStatus.FLUSH_SLAVE_TIMEOUT,
    int(ResponseCode.SLAVE_NOT_AVAILABLE): SendStatus.SLAVE_NOT_AVAILABLE,
}
#: How long a broker that refused a connection is avoided (with send_latency_fault_enable).
_NOT_AVAILABLE_SECONDS = 30.0
_TRANSACTION_PREPARED = int(SysFlag.TRANSACTION_PREPARED)


class CommunicationMode(enum.Enum):
    SYNC = "SYNC"
    ASYNC = "ASYNC"
    ONEWAY = "ONEWAY"


def _make_config(config: ProducerConfig | None, producer_group: str | None, options: Mapping[str, Any]) -> ProducerConfig:
    if config is not None and options:
        return config.replace(**options)
    base = config or ProducerConfig(**options)
    if producer_group is not None:
        base = base.replace(producer_group=producer_group)
    return base


class AsyncProducer:
    """A producer on the running asyncio loop::

        producer = AsyncProducer("orders-producer", namesrv_addr="127.0.0.1:9876")
        await producer.start()
        result = await producer.send(Message("orders", b"...", tags="paid", keys=["o-42"]))
        await producer.shutdown()

    Options are :class:`ProducerConfig`'s fields (or pass ``config=``). Timeouts given to a
    call are in seconds; the config's are RocketMQ's milliseconds.
    """

    def __init__(self, producer_group: str | None = None, *, config: ProducerConfig | None = None,
                 **options: Unpack[ProducerOptions]) -> None:
        self.config = _make_config(config, producer_group, options)
        self.group = self.config.producer_group
        self._default_queue_nums = str(self.config.default_topic_queue_nums)
        self._instance: ClientInstance | None = None
        self._publish: dict[str, TopicPublishInfo] = {}
        self._unavailable_until: dict[str, float] = {}
        self._running = False

    # ---- life ----

    @property
    def client_id(self) -> str | None:
        return self._instance.client_id if self._instance else None

    @property
    def instance(self) -> ClientInstance | None:
        """The connections, routes and heartbeats behind the producer (None until started)."""
        return self._instance

    async def start(self) -> None:
        if self._running:
            return
        instance = ClientInstance(self.config)
        await instance.start()
        instance.producers[self.group] = self
        self._instance = instance
        self._running = True

    async def shutdown(self) -> None:
        if not self._running or self._instance is None:
            return
        self._running = False
        instance = self._instance
        instance.producers.pop(self.group, None)
        await instance.unregister(self.group, None)
        await instance.shutdown()

    async def __aenter__(self) -> AsyncProducer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    def _checked_instance(self) -> ClientInstance:
        if not self._running or self._instance is None:
            raise MQClientError("the producer is not running: call start() first")
        return self._instance

    # ---- ProducerMember ----

    def topics_in_use(self) -> set[str]:
        return set(self._publish)

    def update_publish_info(self, topic: str, info: TopicPublishInfo) -> None:
        old = self._publish.get(topic)
        if old is not None:
            info.send_which_queue = old.send_which_queue
        self._publish[topic] = info

    # ---- routes ----

    async def _find_publish_info(self, topic: str) -> TopicPublishInfo:
        instance = self._checked_instance()
        info = self._publish.get(topic)
        if info is None or not info.ok():
            self._publish.setdefault(topic, TopicPublishInfo())
            await instance.update_route(topic)
            info = self._publish[topic]
        if not info.ok():
            await instance.update_route(topic, default_topic=self.config.create_topic_key,
                                        default_queue_nums=self.config.default_topic_queue_nums)
            info = self._publish[topic]
        if not info.ok():
            raise MQClientError(f"No route info of this topic: {topic}")
        return info

    async def fetch_publish_message_queues(self, topic: str) -> list[MessageQueue]:
        """The queues ``topic``'s messages may be sent to."""
        return list((await self._find_publish_info(validate_topic(topic))).message_queues)

    # ---- sending ----

    async def send(self, msg: Message, *, queue: MessageQueue | None = None,
                   selector: MessageQueueSelector | None = None, arg: Any = None,
                   timeout: float | None = None) -> SendResult:
        """Send and wait for the broker's answer. ``queue`` sends to that queue; ``selector``
        picks one from ``arg`` (ordered messages); neither: round robin with retries."""
        result = await self._send(msg, CommunicationMode.SYNC, queue, selector, arg, timeout)
        assert result is not None
        return result

    async def send_oneway(self, msg: Message, *, queue: MessageQueue | None = None,
                          selector: MessageQueueSelector | None = None, arg: Any = None) -> None:
        """Send without waiting for (or getting) an answer: fastest, and may be lost."""
        await self._send(msg, CommunicationMode.ONEWAY, queue, selector, arg, None)

    async def send_batch(self, messages: Sequence[Message], *, queue: MessageQueue | None = None,
                         timeout: float | None = None) -> SendResult:
        """Send messages of one topic as one request; they get consecutive offsets in one
        queue. ``msg_id`` of the result joins the messages' ids with commas."""
        batch = _BatchMessage.of(messages)
        result = await self._send(batch, CommunicationMode.SYNC, queue, None, None, timeout)
        assert result is not None
        return result

    def check_transaction_state(self, connection: RemotingConnection, message: MessageExt,
                                request: RemotingCommand) -> None:
        """A broker asks about a transaction of this group: a plain producer cannot answer
        (:class:`rocketstore.client.transaction.AsyncTransactionProducer` does)."""
        log.warning("broker %s checks transaction %s of group %s: this producer has no "
                    "transaction listener", connection.remote_address, message.transaction_id, self.group)

    def _check_message(self, msg: Message) -> None:
        if not isinstance(msg, Message):
            raise TypeError(f"msg must be a Message, got {type(msg).__name__}")
        validate_topic(msg.topic)
        if not msg.body:
            raise MQClientError("the message body is empty")
        if len(msg.body) > self.config.max_message_size:
            raise MQClientError(f"the message body is {len(msg.body)} bytes; max_message_size is "
                                f"{self.config.max_message_size}")

    async def _send(self, msg: Message, mode: CommunicationMode, queue: MessageQueue | None,
                    selector: MessageQueueSelector | None, arg: Any, timeout: float | None) -> SendResult | None:
        self._check_message(msg)
        loop = asyncio.get_running_loop()
        timeout = self.config.send_msg_timeout / 1000 if timeout is None else timeout
        begin = loop.time()
        deadline = begin + timeout
        info = await self._find_publish_info(msg.topic)
        if queue is not None or selector is not None:
            if queue is None:
                assert selector is not None
                queue = selector(list(info.message_queues), msg, arg)
                if not isinstance(queue, MessageQueue):
                    raise MQClientError(f"the selector returned {queue!r}, not a MessageQueue")
            if queue.topic != msg.topic:
                raise MQClientError(f"queue {queue} is not a queue of topic {msg.topic}")
            return await self._send_kernel(msg, queue, mode, max(0.001, deadline - loop.time()))
        attempts = 1 + {
            CommunicationMode.SYNC: self.config.retry_times_when_send_failed,
            CommunicationMode.ASYNC: self.config.retry_times_when_send_async_failed,
            CommunicationMode.ONEWAY: 0,
        }[mode]
        last_broker: str | None = None
        last_error: Exception | None = None
        last_result: SendResult | None = None
        tried = 0
        avoid = self._avoid if self.config.send_latency_fault_enable else None
        for _ in range(attempts):
            remaining = deadline - loop.time()
            if remaining <= 0:
                last_error = last_error or MQClientError("send timed out")
                break
            mq = info.select_one_message_queue(last_broker, avoid)
            last_broker = mq.broker_name
            tried += 1
            try:
                result = await self._send_kernel(msg, mq, mode, remaining)
            except MQBrokerError as exc:
                if exc.response_code not in RETRY_RESPONSE_CODES:
                    raise
                last_error = exc
                log.info("send to %s failed (%s); trying another broker", mq.broker_name, exc)
                continue
            except (RemotingError, MQClientError) as exc:
                last_error = exc
                if isinstance(exc, RemotingConnectError):
                    self._unavailable_until[mq.broker_name] = loop.time() + _NOT_AVAILABLE_SECONDS
                log.info("send to %s failed (%s); trying another broker", mq.broker_name, exc)
                continue
            if (result is not None and result.send_status is not SendStatus.SEND_OK
                    and self.config.retry_another_broker_when_not_store_ok):
                last_result = result
                continue
            return result
        if last_result is not None:
            return last_result
        spent = int((loop.time() - begin) * 1000)
        raise MQClientError(f"send to topic {msg.topic} failed after {tried} attempt(s) in {spent} ms: "
                            f"{last_error}") from last_error

    def _avoid(self, broker_name: str) -> bool:
        until = self._unavailable_until.get(broker_name)
        return until is not None and until > asyncio.get_running_loop().time()

    async def _send_kernel(self, msg: Message, mq: MessageQueue, mode: CommunicationMode,
                           timeout: float) -> SendResult | None:
        instance = self._checked_instance()
        address = instance.master_address(mq.broker_name)
        if address is None:
            await instance.update_route(mq.topic)
            address = instance.master_address(mq.broker_name)
            if address is None:
                raise MQClientError(f"The broker[{mq.broker_name}] not exist")
        batch = isinstance(msg, _BatchMessage)
        # a batch's own properties go with every message of it (RocketMQ's broker appends them
        # to each one's): its messages have their keys, it has none (as RocketMQ's client)
        if not batch and MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX not in msg.properties:
            msg.properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = new_uniq_key()
        sys_flag = 0
        body = msg.body
        if not batch and len(body) > self.config.compress_msg_body_over_howmuch:
            body = compress_body(body, self.config.compress_type, self.config.compress_level)
            sys_flag |= compression_flags(self.config.compress_type)
        properties = msg.properties
        if properties.get(MessageConst.TRANSACTION_PREPARED) == "true":
            sys_flag |= _TRANSACTION_PREPARED
        reconsume_times = "0"
        max_reconsume_times = None
        if msg.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            properties = dict(properties)
            reconsume_times = properties.pop(MessageConst.RECONSUME_TIME, "0")
            max_reconsume_times = properties.pop(MessageConst.MAX_RECONSUME_TIMES, None)
        header = {
            V2_NAME["producer_group"]: self.group,
            V2_NAME["topic"]: msg.topic,
            V2_NAME["default_topic"]: self.config.create_topic_key,
            V2_NAME["default_topic_queue_nums"]: self._default_queue_nums,
            V2_NAME["queue_id"]: str(mq.queue_id),
            V2_NAME["sys_flag"]: str(sys_flag),
            V2_NAME["born_timestamp"]: str(int(time.time() * 1000)),
            V2_NAME["flag"]: str(msg.flag),
            V2_NAME["properties"]: encode_properties(properties),
            V2_NAME["reconsume_times"]: reconsume_times,
            V2_NAME["unit_mode"]: "false",
            V2_NAME["batch"]: "true" if batch else "false",
        }
        if max_reconsume_times is not None:
            header[V2_NAME["max_reconsume_times"]] = max_reconsume_times
        reply = await instance.api.send_message(address, header, body, batch=batch, timeout=timeout,
                                                oneway=mode is CommunicationMode.ONEWAY)
        if reply is None:
            return None
        msg_id = (",".join(m.properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] for m in msg.messages)
                  if isinstance(msg, _BatchMessage) else msg.properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX])
        queue_id = reply.queue_id if reply.queue_id >= 0 else mq.queue_id
        return SendResult(
            send_status=_SEND_STATUS[reply.code],
            msg_id=msg_id,
            offset_msg_id=reply.msg_id,
            message_queue=MessageQueue(mq.topic, mq.broker_name, queue_id),
            queue_offset=reply.queue_offset,
            transaction_id=reply.transaction_id,
            region_id=reply.region_id,
        )


class _BatchMessage(Message):
    """Messages of one topic encoded as one batch body (RocketMQ's MessageBatch)."""

    __slots__ = ("messages",)
    messages: list[Message]

    @classmethod
    def of(cls, messages: Sequence[Message]) -> _BatchMessage:
        items = list(messages)
        if not items:
            raise MQClientError("a batch needs at least one message")
        first = items[0]
        for msg in items:
            if not isinstance(msg, Message):
                raise TypeError(f"a batch holds Messages, got {type(msg).__name__}")
            validate_topic(msg.topic)
            if not msg.body:
                raise MQClientError("a message of the batch has an empty body")
            if msg.delay_time_level > 0:
                raise MQClientError("a batch cannot hold delayed messages (delay_time_level)")
            if msg.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                raise MQClientError("a batch cannot be sent to a retry topic")
            if msg.topic != first.topic:
                raise MQClientError(f"a batch holds messages of one topic; got {first.topic} and {msg.topic}")
            if msg.wait_store_msg_ok != first.wait_store_msg_ok:
                raise MQClientError("the messages of a batch must agree on wait_store_msg_ok")
            if MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX not in msg.properties:
                msg.properties[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = new_uniq_key()
        batch = cls(first.topic, encode_batch(items), wait_store_msg_ok=first.wait_store_msg_ok)
        batch.messages = items
        return batch


SendCallback = Callable[[SendResult | None, BaseException | None], None]


class Producer(BlockingClient[AsyncProducer]):
    """A blocking producer: :class:`AsyncProducer` on an event loop thread of its own::

        with Producer("orders-producer", namesrv_addr="127.0.0.1:9876") as producer:
            result = producer.send(Message("orders", b"..."))
            future = producer.send_async(Message("orders", b"..."), callback)
            producer.send_oneway(Message("orders", b"..."))
            producer.flush()                    # every send_async done, its callback run

    Callbacks of :meth:`send_async` run on a thread pool of ``client_callback_executor_threads``
    threads, never on the loop, so they may call the producer again.
    """

    not_running_text = "the producer is not running: call start() first"

    def __init__(self, producer_group: str | None = None, *, config: ProducerConfig | None = None,
                 **options: Unpack[ProducerOptions]) -> None:
        core = self._make_core(producer_group, config, dict(options))
        super().__init__(core, f"rocketstore-producer-{core.config.producer_group}")
        self.config = core.config
        self._callbacks: concurrent.futures.ThreadPoolExecutor | None = None
        #: send_async calls not finished yet (the send, then its callback), for flush()
        self._outstanding: set[concurrent.futures.Future[Any]] = set()
        self._outstanding_lock = threading.Lock()

    def _make_core(self, producer_group: str | None, config: ProducerConfig | None,
                   options: dict[str, Any]) -> AsyncProducer:
        return AsyncProducer(producer_group, config=config, **options)

    @property
    def client_id(self) -> str | None:
        return self._core.client_id

    def start(self) -> None:
        if self._loop is not None:
            return
        super().start()
        self._callbacks = concurrent.futures.ThreadPoolExecutor(
            self.config.client_callback_executor_threads, thread_name_prefix="rocketstore-send-callback")

    def shutdown(self) -> None:
        try:
            super().shutdown()
        finally:
            callbacks, self._callbacks = self._callbacks, None
            if callbacks is not None:
                callbacks.shutdown(wait=True)

    def send(self, msg: Message, *, queue: MessageQueue | None = None,
             selector: MessageQueueSelector | None = None, arg: Any = None,
             timeout: float | None = None) -> SendResult:
        return self._loop_or_fail().run(self._core.send(msg, queue=queue, selector=selector, arg=arg,
                                                        timeout=timeout))

    def send_async(self, msg: Message, callback: SendCallback | None = None, *,
                   queue: MessageQueue | None = None, selector: MessageQueueSelector | None = None,
                   arg: Any = None, timeout: float | None = None) -> concurrent.futures.Future[SendResult]:
        """Send without blocking; the future (and ``callback(result, error)``) completes with
        the result, with retries on other brokers (``retry_times_when_send_async_failed``)."""
        loop = self._loop_or_fail()
        future = loop.submit(self._send_async(msg, queue, selector, arg, timeout))
        if callback is not None:
            executor = self._callbacks
            assert executor is not None

            def done(f: concurrent.futures.Future[SendResult]) -> None:
                error = f.exception() if not f.cancelled() else concurrent.futures.CancelledError()
                result = f.result() if error is None else None
                try:
                    self._track(executor.submit(_run_callback, callback, result, error))
                except RuntimeError:  # the pool is shut down: run it here
                    _run_callback(callback, result, error)

            future.add_done_callback(done)
        # tracked after ``done`` was added: done callbacks run in order, so the callback's own
        # future is tracked before the send's is forgotten and flush() never sees a gap
        self._track(future)
        return future

    def _track(self, future: concurrent.futures.Future[Any]) -> None:
        with self._outstanding_lock:
            self._outstanding.add(future)

        def forget(f: concurrent.futures.Future[Any]) -> None:
            with self._outstanding_lock:
                self._outstanding.discard(f)

        future.add_done_callback(forget)

    def flush(self, timeout: float | None = None) -> None:
        """Wait until every :meth:`send_async` made so far has finished, its callback included
        (as kafka-python's ``flush``). Raises TimeoutError when some are still running after
        ``timeout`` seconds; failed sends are not raised here (their futures and callbacks say)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._outstanding_lock:
                waiting = set(self._outstanding)
            if not waiting:
                return
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            _, not_done = concurrent.futures.wait(waiting, remaining)
            if not_done and deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"flush: {len(not_done)} asynchronous send(s) still running "
                                   f"after {timeout:g} s")

    async def _send_async(self, msg: Message, queue: MessageQueue | None, selector: MessageQueueSelector | None,
                          arg: Any, timeout: float | None) -> SendResult:
        result = await self._core._send(msg, CommunicationMode.ASYNC, queue, selector, arg, timeout)
        assert result is not None
        return result

    def send_oneway(self, msg: Message, *, queue: MessageQueue | None = None,
                    selector: MessageQueueSelector | None = None, arg: Any = None) -> None:
        self._loop_or_fail().run(self._core.send_oneway(msg, queue=queue, selector=selector, arg=arg))

    def send_batch(self, messages: Sequence[Message], *, queue: MessageQueue | None = None,
                   timeout: float | None = None) -> SendResult:
        return self._loop_or_fail().run(self._core.send_batch(messages, queue=queue, timeout=timeout))

    def fetch_publish_message_queues(self, topic: str) -> list[MessageQueue]:
        return self._loop_or_fail().run(self._core.fetch_publish_message_queues(topic))


def _run_callback(callback: SendCallback, result: SendResult | None, error: BaseException | None) -> None:
    try:
        callback(result, error)
    except Exception:
        log.exception("send callback raised")
