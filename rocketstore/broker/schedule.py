"""ScheduleMessageService: delayed messages delivered when they are due (RocketMQ's
ScheduleMessageService).

A message sent with ``DELAY=<level>`` was stored in ``SCHEDULE_TOPIC_XXXX``, queue
``level - 1``, with its real topic and queue in ``REAL_TOPIC`` / ``REAL_QID``
(:class:`rocketstore.broker.message_writer.MessageWriter`). This service follows each level's
queue in order: a message whose store time plus the level's delay (``messageDelayLevel``,
"1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h" by default) has passed is put
again to its real topic and queue with the properties it has (``DELAY``, ``WAIT``, ``REAL_TOPIC``
and ``REAL_QID`` stay in the stored text, as RocketMQ 4.9.8's messageTimeup keeps them);
the first one not yet due stops that level until its time. Progress per level is kept in
``config/delayOffset.json`` (``{"offsetTable": {level: next queue offset}}``), written every
``flushDelayOffsetInterval`` and at shutdown, so a restart neither loses nor (beyond the last
interval) repeats deliveries.

It runs on its own thread, off the event loop; a delivery does not wait for SYNC_FLUSH's
flush (RocketMQ's is not waited for either); progress only moves past a message once its put
returned PUT_OK, so a message is delivered at least once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import orjson

from rocketstore.broker.json_table import JsonTableFile, dumps_pretty
from rocketstore.broker.message_writer import MessageWriter
from rocketstore.common.record import MESSAGE_SYS_FLAGS
from rocketstore.common.topics import SCHEDULE_TOPIC
from rocketstore.message import (
    GetMessageStatus,
    Message,
    MessageExt,
    MessageProperty,
    PutMessageStatus,
)
from rocketstore.store import MessageStore

log = logging.getLogger(__name__)

#: RocketMQ's DELAY_FOR_A_WHILE (re-check) and DELAY_FOR_A_PERIOD (after a failed put).
DELAY_FOR_A_WHILE_S = 0.1
DELAY_FOR_A_PERIOD_S = 10.0
#: A level with nothing waiting is looked at again this late, or when a message arrives in
#: its queue (the store's arrival listener), whichever is first.
IDLE_RECHECK_S = 1.0
_SCAN_BATCH = 32


class ScheduleMessageService:
    def __init__(self, store: MessageStore, writer: MessageWriter, offset_path: str,
                 clock_ms: Callable[[], float] = lambda: time.time() * 1000) -> None:
        self.store = store
        self.writer = writer
        self.file = JsonTableFile(offset_path)
        self.delays_ms = writer.delay_levels_ms
        self._clock_ms = clock_ms
        self.offsets: dict[int, int] = {level: 0 for level in range(1, len(self.delays_ms) + 1)}
        self._next_check: dict[int, float] = dict.fromkeys(self.offsets, 0.0)
        #: levels a message reached since the thread last looked (set by the dispatch thread)
        self._arrived: set[int] = set()
        self._lock = threading.Lock()
        self._wakeup = threading.Event()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._persist_interval_s = store.config.flush_delay_offset_interval / 1000
        self._persisted: dict[int, int] | None = None

    # ---- persistence ----

    def load(self) -> None:
        data = self.file.load()
        if data is None:
            return
        table = data.get("offsetTable") if isinstance(data, dict) else None
        if not isinstance(table, dict):
            raise ValueError(f"{self.file.path}: offsetTable must be an object")
        for key, value in table.items():
            try:
                level, offset = int(key), int(value)
            except (TypeError, ValueError):
                raise ValueError(f"{self.file.path}: bad entry {key!r}: {value!r}") from None
            if level in self.offsets and offset >= 0:
                self.offsets[level] = offset
        self._persisted = dict(self.offsets)

    def encode(self) -> bytes:
        with self._lock:
            table = dict(self.offsets)
        return dumps_pretty({"offsetTable": table})

    def persist(self) -> None:
        with self._lock:
            table = dict(self.offsets)
        if table == self._persisted:
            return
        self.file.write(dumps_pretty({"offsetTable": table}))
        self._persisted = table

    def take_offsets(self, table: dict[int, int]) -> None:
        """A slave's copy of its master's progress (SlaveSynchronize): the levels it knows,
        at the master's offsets."""
        with self._lock:
            for level, offset in table.items():
                if level in self.offsets and offset >= 0:
                    self.offsets[level] = offset

    def offset_table_json(self) -> bytes:
        """GET_ALL_DELAY_OFFSET's body: delayOffset.json's content."""
        with self._lock:
            return orjson.dumps({"offsetTable": dict(self.offsets)}, option=orjson.OPT_NON_STR_KEYS)

    # ---- the thread ----

    def start(self) -> None:
        if self._thread is None:
            self._stopped.clear()
            self._thread = threading.Thread(target=self._run, name="ScheduleMessageService", daemon=True)
            self._thread.start()

    def wakeup(self) -> None:
        self._wakeup.set()

    def arrival(self, topic: str, queue_id: int, next_offset: int) -> None:
        """The store's arrival listener (its dispatch thread): a message reached a level."""
        if topic == SCHEDULE_TOPIC and 0 <= queue_id < len(self.delays_ms):
            with self._lock:
                self._arrived.add(queue_id + 1)
            self._wakeup.set()

    def shutdown(self, timeout_s: float = 10.0) -> None:
        self._stopped.set()
        self._wakeup.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout_s)
        try:
            self.persist()
        except OSError:
            log.exception("writing %s failed", self.file.path)

    def _run(self) -> None:
        last_persist = time.monotonic()
        while not self._stopped.is_set():
            now = time.monotonic()
            with self._lock:
                arrived, self._arrived = self._arrived, set()
            for level in arrived:
                self._next_check[level] = min(self._next_check[level], now)
            for level in self.offsets:
                if self._next_check[level] <= now and not self._stopped.is_set():
                    try:
                        self._next_check[level] = now + self.deliver_level(level)
                    except Exception:  # noqa: BLE001 - keep the other levels going
                        log.exception("delivering delay level %d failed", level)
                        self._next_check[level] = now + DELAY_FOR_A_PERIOD_S
            if time.monotonic() - last_persist >= self._persist_interval_s:
                try:
                    self.persist()
                except OSError:
                    log.exception("writing %s failed", self.file.path)
                last_persist = time.monotonic()
            wait = min(self._next_check.values()) - time.monotonic()
            if wait > 0 and self._wakeup.wait(min(wait, self._persist_interval_s)):
                self._wakeup.clear()

    def deliver_level(self, level: int) -> float:
        """Deliver what is due in one level's queue; returns seconds until it is looked at
        again."""
        queue_id = level - 1
        delay_ms = self.delays_ms[queue_id]
        while not self._stopped.is_set():
            offset = self.offsets[level]
            if self.store.get_max_offset_in_queue(SCHEDULE_TOPIC, queue_id) <= offset:
                return IDLE_RECHECK_S     # nothing waits: an arrival wakes it sooner
            result = self.store.get_message("SCHEDULE_SERVICE", SCHEDULE_TOPIC, queue_id, offset,
                                            _SCAN_BATCH, "*")
            if result.status in (GetMessageStatus.OFFSET_TOO_SMALL, GetMessageStatus.OFFSET_OVERFLOW_BADLY):
                self._set_offset(level, result.next_begin_offset)
                continue
            if result.status != GetMessageStatus.FOUND:
                if result.status == GetMessageStatus.NO_MATCHED_MESSAGE and result.next_begin_offset > offset:
                    self._set_offset(level, result.next_begin_offset)
                    continue
                return DELAY_FOR_A_WHILE_S
            for message in result.messages:
                due_ms = message.store_timestamp + delay_ms
                now_ms = self._clock_ms()
                if due_ms > now_ms:
                    # a store time in the future (a clock that jumped back) waits one delay at most
                    return min(due_ms - now_ms, delay_ms) / 1000
                if not self._deliver(message):
                    return DELAY_FOR_A_PERIOD_S
                self._set_offset(level, message.queue_offset + 1)
            if result.next_begin_offset > self.offsets[level]:
                self._set_offset(level, result.next_begin_offset)
        return DELAY_FOR_A_WHILE_S

    def _set_offset(self, level: int, offset: int) -> None:
        with self._lock:
            if offset > self.offsets[level]:
                self.offsets[level] = offset

    def _deliver(self, stored: MessageExt) -> bool:
        message = self.time_up(stored)
        if message is None:
            return True     # nothing to deliver to: skipped
        queue_id = int(stored.properties.get(MessageProperty.REAL_QID, "0") or 0)
        result = self.store.append_message(message, queue_id)
        if result.status_code in (PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT):
            return True
        log.warning("delivering a delayed message to %s failed: %s (%s); retrying in %.0f s",
                    message.topic, result.status.name, result.reason, DELAY_FOR_A_PERIOD_S)
        return False

    @staticmethod
    def time_up(stored: MessageExt) -> Message | None:
        """messageTimeup: the message as its real topic gets it. Its properties are stored
        as they are: RocketMQ 4.9.8 writes the text before it clears DELAY and WAIT in the
        message it puts, so the delivered record keeps both (and REAL_TOPIC, REAL_QID)."""
        properties = dict(stored.properties)
        topic = properties.get(MessageProperty.REAL_TOPIC)
        if not topic:
            log.warning("delayed message at CommitLog offset %d has no REAL_TOPIC: skipped",
                        stored.commitlog_offset)
            return None
        try:
            return Message(topic, bytes(stored.body), properties=properties, flag=stored.flag,
                           born_timestamp=stored.born_timestamp, born_host=stored.born_host,
                           sys_flag=stored.sys_flag & MESSAGE_SYS_FLAGS, reconsume_times=stored.reconsume_times)
        except (ValueError, TypeError, OverflowError) as exc:
            log.warning("delayed message at CommitLog offset %d cannot be delivered: %s",
                        stored.commitlog_offset, exc)
            return None
