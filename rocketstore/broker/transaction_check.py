"""TransactionalMessageCheckService: half messages nobody ended are asked about (RocketMQ
4.9.8's TransactionalMessageCheckService, TransactionalMessageServiceImpl.check and
DefaultTransactionalMessageCheckListener).

Every ``transactionCheckInterval`` a pass walks each queue of ``RMQ_SYS_TRANS_HALF_TOPIC`` from
the check group's offset (``CID_RMQ_SYS_TRANS``), reading the op topic from that group's op
offset to learn which halves are done. A half still open:

- stored after the pass began, or younger than ``transactionTimeOut`` (or its own
  ``CHECK_IMMUNITY_TIME_IN_SECONDS``): the pass stops there (or, with an immunity time, the
  half is put back once, marked with ``TRAN_PREPARED_QUEUE_OFFSET``);
- checked ``transactionCheckMax`` times already (``TRANSACTION_CHECK_TIMES``), or older than
  the CommitLog's retention: moved to ``TRANS_CHECK_MAX_TIME_TOPIC`` (queue 0) and passed;
- else put back at the end of the half queue with ``TRANSACTION_CHECK_TIMES`` + 1, and a live
  producer of its group (``PGROUP``) is sent CHECK_TRANSACTION_STATE 39 (oneway) naming the
  copy, whose answer comes back as END_TRANSACTION.

The pass then commits the group's offsets on both topics (the op offset up to the first op
not yet matched), so progress survives a restart with the consumer offsets. It runs on its
own thread; what touches the broker's tables (offsets, producers, topics) runs on the event
loop.
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from rocketstore.broker.client_groups import ProducerManager
from rocketstore.broker.config import BrokerConfig
from rocketstore.broker.consumer_offset_manager import ConsumerOffsetManager
from rocketstore.broker.topic_config import TopicConfigManager
from rocketstore.broker.transaction import (
    REMOVE_TAG,
    TransactionalMessageService,
    producer_group_of,
    record_as_real_message,
)
from rocketstore.common.perm import PERM_READ, PERM_WRITE
from rocketstore.common.properties import MessageConst
from rocketstore.common.record import MESSAGE_SYS_FLAGS
from rocketstore.common.text import quote
from rocketstore.common.topics import (
    TRANS_CHECK_GROUP,
    TRANS_CHECK_MAX_TIME_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
)
from rocketstore.message import (
    GetMessageStatus,
    Message,
    MessageExt,
    MessageProperty,
    PutMessageResult,
)
from rocketstore.remoting import RequestCode, create_request
from rocketstore.store import MessageStore

log = logging.getLogger("rocketstore.broker")

#: A pass over one queue stops after this long (MAX_PROCESS_TIME_LIMIT, ms).
MAX_PROCESS_TIME_LIMIT_MS = 60_000
#: Half messages not found twice in a row end a queue's pass (MAX_RETRY_COUNT_WHEN_HALF_NULL).
MAX_RETRY_COUNT_WHEN_HALF_NULL = 1
_OP_PULL_BATCH = 32
#: PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET: the queue offset of the half an immune copy stands for.
PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"

_FOUND, _NO_NEW, _NO_MATCHED, _ILLEGAL = "FOUND", "NO_NEW_MSG", "NO_MATCHED_MSG", "OFFSET_ILLEGAL"


def _pull_status(status: GetMessageStatus) -> str:
    """TransactionalMessageBridge.getMessage's PullStatus of a store answer."""
    if status == GetMessageStatus.FOUND:
        return _FOUND
    if status == GetMessageStatus.NO_MATCHED_MESSAGE:
        return _NO_MATCHED
    if status in (GetMessageStatus.NO_MESSAGE_IN_QUEUE, GetMessageStatus.OFFSET_OVERFLOW_ONE):
        return _NO_NEW
    return _ILLEGAL


@dataclass
class _Pulled:
    status: str
    next_begin_offset: int
    messages: list[MessageExt] | None


def calculate_op_offset(done: list[int], old_offset: int) -> int:
    """The op offset after the ops processed: past every op up to the first not yet done."""
    offset = old_offset
    for op_offset in sorted(done):
        if op_offset != offset:
            break
        offset += 1
    return offset


def _int_or(text: str | None, default: int) -> int:
    try:
        return int(text) if text is not None else default
    except ValueError:
        return default


class TransactionalMessageCheckService:
    def __init__(self, config: BrokerConfig, store: MessageStore,
                 transactions: TransactionalMessageService, offsets: ConsumerOffsetManager,
                 producers: ProducerManager, topics: TopicConfigManager,
                 loop: asyncio.AbstractEventLoop,
                 clock_ms: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        self.config = config
        self.store = store
        self.transactions = transactions
        self.offsets = offsets
        self.producers = producers
        self.topics = topics
        self.loop = loop
        self._clock_ms = clock_ms
        #: the check group's offsets this run committed (ahead of the table, which the loop updates)
        self._committed: dict[tuple[str, int], int] = {}
        self._stopped = threading.Event()
        self._wakeup = threading.Event()
        self._thread: threading.Thread | None = None
        #: halves sent to a producer, and the ones discarded (all passes)
        self.checks_sent = 0
        self.discarded = 0

    # ---- life ----

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="TransactionalMessageCheckService",
                                        daemon=True)
        self._thread.start()

    def shutdown(self) -> None:
        self._stopped.set()
        self._wakeup.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def wakeup(self) -> None:
        """Run a pass now."""
        self._wakeup.set()

    def _run(self) -> None:
        while not self._stopped.is_set():
            self._wakeup.wait(self.config.transaction_check_interval / 1000)
            self._wakeup.clear()
            if self._stopped.is_set():
                break
            try:
                self.check()
            except Exception:  # noqa: BLE001 - the next pass tries again
                log.exception("transaction check failed")

    # ---- one pass ----

    def check(self) -> None:
        """One pass over every half queue (TransactionalMessageServiceImpl.check)."""
        for queue_id in self.store.queues(TRANS_HALF_TOPIC):
            if self._stopped.is_set():
                return
            self._check_queue(queue_id)

    def _check_queue(self, queue_id: int) -> None:
        start_ms = self._clock_ms()
        timeout_ms = self.config.transaction_time_out
        check_max = self.config.transaction_check_max
        half_offset = self._offset(TRANS_HALF_TOPIC, queue_id)
        op_offset = self._offset(TRANS_OP_HALF_TOPIC, queue_id)
        done_ops: list[int] = []
        removed: dict[int, int] = {}
        ops = self._fill_op_remove_map(removed, queue_id, op_offset, half_offset, done_ops)
        null_count = 1
        new_offset = i = half_offset
        while not self._stopped.is_set():
            if self._clock_ms() - start_ms > MAX_PROCESS_TIME_LIMIT_MS:
                log.info("transaction check of half queue %d stopped at its time limit", queue_id)
                break
            if i in removed:
                done_ops.append(removed.pop(i))
                new_offset = i = i + 1
                continue
            half, pulled = self._half_at(queue_id, i)
            if half is None:
                null_count += 1
                if null_count - 1 > MAX_RETRY_COUNT_WHEN_HALF_NULL or pulled.status == _NO_NEW:
                    break
                new_offset = i = max(pulled.next_begin_offset, i + 1)
                continue
            properties = dict(half.properties)
            if self._need_discard(properties, check_max) or self._need_skip(half):
                self._discard(half, properties)
                new_offset = i = i + 1
                continue
            if half.store_timestamp >= start_ms:
                break
            age_ms = self._clock_ms() - half.born_timestamp
            immunity_ms = timeout_ms
            immunity_text = properties.get(MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS)
            if immunity_text is not None:
                immunity_ms = _int_or(immunity_text, timeout_ms // 1000) * 1000
                if age_ms < immunity_ms:
                    if self._check_prepare_queue_offset(removed, done_ops, half, properties):
                        new_offset = i = i + 1
                        continue
            elif 0 <= age_ms < immunity_ms:
                break
            found = ops.messages
            need_check = ((found is None and age_ms > immunity_ms)
                          or (found is not None
                              and found[-1].born_timestamp - start_ms > timeout_ms)
                          or age_ms <= -1)
            if not need_check:
                if found is None:
                    break       # every op is read and the half is not due yet
                ops = self._fill_op_remove_map(removed, queue_id, ops.next_begin_offset, half_offset,
                                               done_ops)
                continue
            copy = self._put_back(half, properties)
            if copy is None:
                break
            self._send_check(copy)
            new_offset = i = i + 1
        if new_offset != half_offset:
            self._commit(TRANS_HALF_TOPIC, queue_id, new_offset)
        new_op_offset = calculate_op_offset(done_ops, op_offset)
        if new_op_offset != op_offset:
            self._commit(TRANS_OP_HALF_TOPIC, queue_id, new_op_offset)

    # ---- reading ----

    def _offset(self, topic: str, queue_id: int) -> int:
        """The check group's offset, the queue's min offset when it has none."""
        offset = self._committed.get((topic, queue_id))
        if offset is None:
            offset = self.offsets.query(TRANS_CHECK_GROUP, topic, queue_id)
        if offset < 0:
            offset = self.store.get_min_offset_in_queue(topic, queue_id)
        return offset

    def _pull(self, topic: str, queue_id: int, offset: int, count: int) -> _Pulled:
        result = self.store.get_message(TRANS_CHECK_GROUP, topic, queue_id, offset, count, "*")
        status = _pull_status(result.status)
        return _Pulled(status, result.next_begin_offset,
                       list(result.messages) if status == _FOUND and result.messages else None)

    def _half_at(self, queue_id: int, offset: int) -> tuple[MessageExt | None, _Pulled]:
        pulled = self._pull(TRANS_HALF_TOPIC, queue_id, offset, 1)
        return (pulled.messages[0] if pulled.messages else None), pulled

    def _fill_op_remove_map(self, removed: dict[int, int], queue_id: int, op_offset: int,
                            min_half_offset: int, done_ops: list[int]) -> _Pulled:
        """Read up to 32 ops: an op for a half below the check's offset is done, else its half
        is remembered as removed (half queue offset -> op queue offset)."""
        pulled = self._pull(TRANS_OP_HALF_TOPIC, queue_id, op_offset, _OP_PULL_BATCH)
        if pulled.status in (_ILLEGAL, _NO_MATCHED):
            log.warning("transaction op queue %d: offset %d is %s; moving to %d", queue_id,
                        op_offset, pulled.status, pulled.next_begin_offset)
            self._commit(TRANS_OP_HALF_TOPIC, queue_id, pulled.next_begin_offset)
            return pulled
        for op in pulled.messages or ():
            if op.tags != REMOVE_TAG:
                log.error("transaction op at %d has tags %s, not %s", op.queue_offset,
                          quote(op.tags), REMOVE_TAG)
                continue
            half_offset = _int_or(bytes(op.body).decode("utf-8", "replace"), -1)
            if half_offset < min_half_offset:
                done_ops.append(op.queue_offset)
            else:
                removed[half_offset] = op.queue_offset
        return pulled

    def _need_discard(self, properties: dict[str, str], check_max: int) -> bool:
        """Checked enough; else TRANSACTION_CHECK_TIMES is counted up (in ``properties``)."""
        text = properties.get(MessageConst.TRANSACTION_CHECK_TIMES)
        times = 1
        if text is not None:
            times = _int_or(text, 0)
            if times >= check_max:
                return True
            times += 1
        properties[MessageConst.TRANSACTION_CHECK_TIMES] = str(times)
        return False

    def _need_skip(self, half: MessageExt) -> bool:
        """Older than the CommitLog keeps files: it may be gone before it is resolved."""
        reserved_ms = self.store.config.file_reserved_time * 3600 * 1000
        return self._clock_ms() - half.born_timestamp > reserved_ms

    def _check_prepare_queue_offset(self, removed: dict[int, int], done_ops: list[int],
                                    half: MessageExt, properties: dict[str, str]) -> bool:
        """A half within its immunity time: done when the half it copies is; else put back
        (marked with the original's queue offset) once."""
        text = properties.get(PREPARED_QUEUE_OFFSET)
        if text is None:
            properties[PREPARED_QUEUE_OFFSET] = str(half.queue_offset)
            return self._put_back(half, properties) is not None
        prepared = _int_or(text, -1)
        if prepared == -1:
            return False
        if prepared in removed:
            done_ops.append(removed.pop(prepared))
            return True
        return self._put_back(half, properties) is not None

    # ---- writing ----

    def _copy(self, half: MessageExt, topic: str, properties: dict[str, str]) -> Message:
        return Message(topic, bytes(half.body), properties=properties, flag=half.flag,
                       born_timestamp=half.born_timestamp, born_host=half.born_host,
                       sys_flag=half.sys_flag & MESSAGE_SYS_FLAGS,
                       reconsume_times=half.reconsume_times)

    def _put_back(self, half: MessageExt, properties: dict[str, str]) -> MessageExt | None:
        """putBackHalfMsgQueue: the half again at the end of its queue (with the properties
        given); the stored copy, None when it could not be stored."""
        result = self.store.append_message(self._copy(half, TRANS_HALF_TOPIC, properties),
                                           half.queue_id)
        if not result.ok:
            log.warning("putting half message %d back failed: %s (%s)", half.queue_offset,
                        result.status.name, result.reason)
            return None
        return self.store.look_message_by_offset(result.commitlog_offset)

    def _discard(self, half: MessageExt, properties: dict[str, str]) -> None:
        """resolveDiscardMsg: to TRANS_CHECK_MAX_TIME_TOPIC (queue 0)."""
        log.error("half message %s (transaction %s) checked %s times: discarded to %s",
                  half.msg_id, quote(half.uniq_key), properties.get(MessageConst.TRANSACTION_CHECK_TIMES),
                  TRANS_CHECK_MAX_TIME_TOPIC)
        self.loop.call_soon_threadsafe(self.topics.create_in_send_back, TRANS_CHECK_MAX_TIME_TOPIC, 1,
                                       PERM_READ | PERM_WRITE)
        result: PutMessageResult = self.store.append_message(
            self._copy(half, TRANS_CHECK_MAX_TIME_TOPIC, properties), 0)
        if not result.ok:
            log.warning("discarding half message %s failed: %s", half.msg_id, result.status.name)
        self.discarded += 1

    def _commit(self, topic: str, queue_id: int, offset: int) -> None:
        self._committed[(topic, queue_id)] = offset
        self.loop.call_soon_threadsafe(self.offsets.commit, TRANS_CHECK_GROUP, topic, queue_id, offset)

    def _send_check(self, half: MessageExt) -> None:
        """sendCheckMessage: CHECK_TRANSACTION_STATE about ``half`` to a producer of its group."""
        group = producer_group_of(half) or ""
        uniq_key = half.properties.get(MessageProperty.UNIQ_KEY) or half.msg_id
        header = {"tranStateTableOffset": str(half.queue_offset),
                  "commitLogOffset": str(half.commitlog_offset),
                  "msgId": uniq_key, "transactionId": uniq_key, "offsetMsgId": half.msg_id}
        body = record_as_real_message(half)
        self.checks_sent += 1
        self.loop.call_soon_threadsafe(self._send_on_loop, group, header, body)

    def _send_on_loop(self, group: str, header: dict[str, str], body: bytes) -> None:
        channels = list(self.producers.groups.get(group, {}).values())
        if not channels:
            log.warning("no producer of group %s online to check transaction %s", quote(group),
                        quote(header["transactionId"]))
            return
        channel = random.choice(channels)
        try:
            channel.connection.invoke_oneway(
                create_request(RequestCode.CHECK_TRANSACTION_STATE, header, body))
        except Exception as exc:  # noqa: BLE001 - a closing connection: the next pass asks again
            log.info("checking transaction %s with %s failed: %s", quote(header["transactionId"]),
                     channel.connection.remote_address, exc)
