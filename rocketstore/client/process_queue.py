"""ProcessQueue: the messages of one queue pulled and not yet consumed (RocketMQ's ProcessQueue).

Pulling adds messages; consuming removes them, in any order for concurrent consumption. The
offset a consumer may commit is the smallest offset still cached (everything below it is done),
or one past the largest ever cached when none is left. Its size (count and body bytes) is what
flow control looks at. For orderly consumption, messages are taken in offset order and
committed together; a failed batch is put back to be consumed again.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterable

from rocketstore.client.message import MessageExt

#: A lock the broker granted is trusted this long without renewal (REBALANCE_LOCK_MAX_LIVE_TIME).
REBALANCE_LOCK_MAX_LIVE_TIME = 30.0
#: Locks are renewed this often (REBALANCE_LOCK_INTERVAL).
REBALANCE_LOCK_INTERVAL = 20.0


class ProcessQueue:
    def __init__(self) -> None:
        self._messages: dict[int, MessageExt] = {}
        self._offsets: list[int] = []          # sorted keys of _messages
        self._consuming: dict[int, MessageExt] = {}
        self.msg_count = 0
        self.msg_size = 0
        self.queue_offset_max = -1
        self.dropped = False
        self.locked = False
        self.last_lock_timestamp = time.monotonic()
        self.last_pull_timestamp = time.monotonic()
        self.last_consume_timestamp = time.monotonic()
        self.consuming = False
        #: Bumped by a seek or a reset: messages cached before it are stale.
        self.generation = 0

    # ---- pulled messages ----

    def put_messages(self, messages: Iterable[MessageExt]) -> bool:
        """Cache pulled messages; True when consumption should be dispatched (orderly)."""
        added = False
        for msg in messages:
            offset = msg.queue_offset
            if offset in self._messages:
                continue
            self._messages[offset] = msg
            if not self._offsets or offset > self._offsets[-1]:
                self._offsets.append(offset)
            else:
                bisect.insort(self._offsets, offset)
            self.msg_count += 1
            self.msg_size += len(msg.body)
            self.queue_offset_max = max(self.queue_offset_max, offset)
            added = True
        dispatch = added and not self.consuming
        if dispatch:
            self.consuming = True
        return dispatch

    @property
    def max_span(self) -> int:
        return self._offsets[-1] - self._offsets[0] if self._offsets else 0

    def remove_messages(self, messages: Iterable[MessageExt]) -> int:
        """Drop consumed messages; returns the offset that may be committed, or -1."""
        removed = False
        for msg in messages:
            found = self._messages.pop(msg.queue_offset, None)
            if found is not None:
                index = bisect.bisect_left(self._offsets, msg.queue_offset)
                if index < len(self._offsets) and self._offsets[index] == msg.queue_offset:
                    del self._offsets[index]
                self.msg_count -= 1
                self.msg_size -= len(found.body)
                removed = True
        if self._offsets:
            return self._offsets[0]
        return self.queue_offset_max + 1 if removed or self.queue_offset_max >= 0 else -1

    def clear(self) -> None:
        self._messages.clear()
        self._offsets.clear()
        self._consuming.clear()
        self.msg_count = 0
        self.msg_size = 0
        self.queue_offset_max = -1
        self.generation += 1

    def cached(self) -> list[MessageExt]:
        return [self._messages[o] for o in self._offsets]

    @property
    def is_empty(self) -> bool:
        return not self._offsets

    # ---- orderly consumption ----

    def take_messages(self, batch_size: int) -> list[MessageExt]:
        """The next ``batch_size`` messages in offset order, moved to the consuming set."""
        taken: list[MessageExt] = []
        while self._offsets and len(taken) < batch_size:
            offset = self._offsets.pop(0)
            msg = self._messages.pop(offset)
            self._consuming[offset] = msg
            taken.append(msg)
        if not taken:
            self.consuming = False
        return taken

    def commit(self) -> int:
        """The consumed batch is done: returns the offset after it, or -1 if there was none."""
        if not self._consuming:
            return -1
        offset = max(self._consuming) + 1
        self.msg_count -= len(self._consuming)
        self.msg_size -= sum(len(m.body) for m in self._consuming.values())
        self._consuming.clear()
        return offset

    def make_messages_to_consume_again(self, messages: Iterable[MessageExt]) -> None:
        for msg in messages:
            self._consuming.pop(msg.queue_offset, None)
            self._messages[msg.queue_offset] = msg
            bisect.insort(self._offsets, msg.queue_offset)

    def is_lock_expired(self) -> bool:
        return time.monotonic() - self.last_lock_timestamp > REBALANCE_LOCK_MAX_LIVE_TIME

    def info(self) -> dict[str, object]:
        """ProcessQueueInfo, for GET_CONSUMER_RUNNING_INFO."""
        return {
            "cachedMsgCount": self.msg_count,
            "cachedMsgSizeInMiB": self.msg_size // (1024 * 1024),
            "cachedMsgMinOffset": self._offsets[0] if self._offsets else 0,
            "cachedMsgMaxOffset": self._offsets[-1] if self._offsets else 0,
            "droped": self.dropped,
            "locked": self.locked,
            "lastLockTimestamp": int(time.time() * 1000),
            "lastPullTimestamp": int(time.time() * 1000),
            "transactionMsgCount": 0,
        }
