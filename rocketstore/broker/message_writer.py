"""MessageWriter: how the broker puts messages into the store without blocking its event loop.

Producers' sends and consumers' send-backs go through here, so both:

- turn a delayed message (``DELAY`` property, level > 0) into a message of
  ``SCHEDULE_TOPIC_XXXX``, queue ``level - 1``, with the real topic and queue in the
  ``REAL_TOPIC`` / ``REAL_QID`` properties, as RocketMQ's CommitLog.putMessage does (the
  schedule service puts it back when it is due);
- append without waiting for SYNC_FLUSH's flush or SYNC_MASTER's slave, and hand back a
  future that the store's durability thread resolves once the flush is done and that the
  HAService resolves once a slave acknowledged the record, so the event loop serves other
  requests meanwhile (RocketMQ's CommitLog.asyncPutMessage with its submitFlushRequest and
  submitReplicaRequest, combined: the slave's failure wins).

A group commit round makes many sends durable at once: the loop asks the group commit directly
(the store's DurableWatch, no thread in between) and the round that makes its sends durable
writes an eventfd the loop reads, so the loop wakes once a round, not once a send, and answers
them all in append order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from rocketstore.broker._stored_wait import StoredWaits
from rocketstore.common.record import TRANSACTION_TYPE_MASK, SysFlag
from rocketstore.common.topics import SCHEDULE_TOPIC
from rocketstore.message import (
    Message,
    MessageProperty,
    PutMessageResult,
    PutMessagesResult,
)
from rocketstore.remoting import DeferredReply
from rocketstore.store import MessageStore

if TYPE_CHECKING:
    from rocketstore._native.batch_put import EncodedBatch
    from rocketstore.ha import HAService

# prepared and rolled-back messages are not delayed (commit and none may be)
_PREPARED, _ROLLBACK = int(SysFlag.TRANSACTION_PREPARED), int(SysFlag.TRANSACTION_ROLLBACK)

T = TypeVar("T")


def delay_level_of(properties: dict[str, str]) -> int:
    """The DELAY property as an int (0 when absent or not a number)."""
    text = properties.get(MessageProperty.DELAY)
    if not text:
        return 0
    try:
        return int(text)
    except ValueError:
        return 0


class MessageWriter:
    def __init__(self, store: MessageStore, loop: asyncio.AbstractEventLoop) -> None:
        self.store = store
        self.loop = loop
        self.delay_levels_ms = store.config.delay_levels_ms
        self.max_delay_level = len(self.delay_levels_ms)
        self.sync_flush = store.config.flush_disk_type == "SYNC_FLUSH"
        self.sync_master = store.config.broker_role == "SYNC_MASTER"
        #: whether a send's reply may wait (for the flush, the slave or both)
        self.waits = self.sync_flush or self.sync_master
        self._ha: HAService | None = None
        #: RocketMQ 4.9.8 waits slaveTimeout for the slave (CommitLog.submitReplicaRequest)
        self.slave_timeout_s = store.config.slave_timeout / 1000
        #: SYNC_FLUSH: the flush answers, on this loop (close() at shutdown)
        self._watch = store.durable_watch() if self.sync_flush else None
        self._watch_timer: asyncio.TimerHandle | None = None
        if self._watch is not None:
            loop.add_reader(self._watch.fileno(), self._watch.poll)
        #: a waiting send's parts, set up natively (when_stored)
        self.stored_waits = StoredWaits(self.sync_master, self.slave_timeout_s,
                                        self._watch_flush if self.sync_flush else None)

    @property
    def ha(self) -> HAService | None:
        """The master's HAService (the broker sets it once listening; None: no slave can
        connect, so SYNC_MASTER answers SLAVE_NOT_AVAILABLE)."""
        return self._ha

    @ha.setter
    def ha(self, service: HAService | None) -> None:
        self._ha = service
        self.stored_waits.acks = None if service is None else service.acks

    def schedule_if_delayed(self, message: Message, queue_id: int) -> int:
        """Redirect a delayed message to SCHEDULE_TOPIC_XXXX (in place); returns the queue id
        to put it to."""
        properties = message.properties
        level = self._delay_level(message)
        if level <= 0:
            return queue_id
        if level > self.max_delay_level:
            level = self.max_delay_level
            properties[MessageProperty.DELAY] = str(level)
        properties[MessageProperty.REAL_TOPIC] = message.topic
        properties[MessageProperty.REAL_QID] = str(queue_id)
        message.topic = SCHEDULE_TOPIC
        return level - 1

    @staticmethod
    def _delay_level(message: Message) -> int:
        """The level a message is delayed by (0: not delayed: prepared and rolled-back
        transaction messages never are)."""
        if message.sys_flag & TRANSACTION_TYPE_MASK in (_PREPARED, _ROLLBACK):
            return 0
        return delay_level_of(message.properties)

    def put_sent(self, message: Message, queue_id: int) -> PutMessageResult:
        """A producer's message with a DELAY property: stored as :meth:`put` stores it, but
        without WAIT when it is not delayed after all (level 0, a transaction's prepare or
        rollback). RocketMQ's SendMessageProcessor leaves WAIT out of the stored text, and only
        the delay redirect of its CommitLog writes the text again from every property, WAIT
        included."""
        if self._delay_level(message) <= 0:
            message.properties.pop(MessageProperty.WAIT, None)
        return self.put(message, queue_id)

    def put(self, message: Message, queue_id: int) -> PutMessageResult:
        """Append (a delayed message goes to the schedule topic); not waited for: see
        :meth:`when_stored`."""
        queue_id = self.schedule_if_delayed(message, queue_id)
        return self.store.append_message(message, queue_id)

    def put_batch(self, messages: list[Message], queue_id: int) -> PutMessagesResult:
        return self.store.put_messages(messages, queue_id, wait_flush=False)

    def put_encoded_batch(self, batch: EncodedBatch, topic: str, queue_id: int) -> PutMessagesResult:
        return self.store.put_encoded_batch(batch, topic, queue_id, wait_flush=False)

    def needs_wait(self, properties: dict[str, str]) -> bool:
        """SYNC_FLUSH or SYNC_MASTER, unless the producer said WAIT=false (RocketMQ's
        waitStoreMsgOK: it waits neither for the flush nor for the slave)."""
        return self.waits and properties.get(MessageProperty.WAIT) != "false"

    def when_stored(self, next_offset: int, on_done: Callable[[int], T]) -> DeferredReply:
        """A reply of ``on_done(status)``, run on the loop once the CommitLog below
        next_offset is flushed (SYNC_FLUSH) and acknowledged by a slave (SYNC_MASTER), and
        given to the connection at once (a DeferredReply: no Future, no extra loop turn).
        status is a PutMessageStatus: PUT_OK, FLUSH_DISK_TIMEOUT, or, winning over it,
        FLUSH_SLAVE_TIMEOUT / SLAVE_NOT_AVAILABLE (no slave, or the best one more than
        haSlaveFallbehindMax behind: answered without waiting for a slave). What on_done
        raises answers SYSTEM_ERROR. The send path calls ``stored_waits.when_stored``
        directly (this, natively)."""
        return self.stored_waits.when_stored(next_offset, on_done)

    def _watch_flush(self, next_offset: int, callback: Callable[[bool], None]) -> None:
        watch = self._watch
        assert watch is not None    # SYNC_FLUSH (once closed, it answers by what is durable)
        watch.watch(next_offset, callback)
        if watch.pending and self._watch_timer is None:
            self._watch_timer = self.loop.call_later(self._timeout_check_s, self._check_timeouts)

    @property
    def _timeout_check_s(self) -> float:
        """How often sends waiting for a flush are checked against their deadline."""
        watch = self._watch
        return min(0.1, watch.timeout_s / 4) if watch is not None else 0.1

    def _check_timeouts(self) -> None:
        """FLUSH_DISK_TIMEOUT for sends that waited past sync_flush_timeout (and answers the
        rest of a round whose notification is still on its way)."""
        self._watch_timer = None
        watch = self._watch
        if watch is None:
            return
        watch.poll()
        if watch.pending:
            self._watch_timer = self.loop.call_later(self._timeout_check_s, self._check_timeouts)

    def close(self) -> None:
        """After the store shut down (its last flush done): answer every send still waiting for
        a flush by what is durable, and stop watching."""
        watch = self._watch
        if self._watch_timer is not None:
            self._watch_timer.cancel()
            self._watch_timer = None
        if watch is not None and not watch.closed:
            self.loop.remove_reader(watch.fileno())
            watch.close()
