"""MemoryMessageStore: the messages of memory topics, held in memory and never written to the
CommitLog (a broker's topics created with ``memory=true``).

Each memory topic keeps its records, in CommitLog format, in segments of anonymous shared
memory (``memfd``) written by the store's native record writer: the bytes a pull returns are
the records as a CommitLog would hold them, with the queue offset of their memory queue and a
physical offset from :data:`MEMORY_OFFSET_BASE` on (beyond any CommitLog's, so an offset
message id of a memory record never names a CommitLog record). A queue is an ``array`` of
its records' physical offsets: no Python object per message is kept.

All memory topics share one cap, ``max_bytes``, on the bytes of the records they hold. A put
that takes the total over it evicts the oldest messages of its own topic (arrival order) until
the total fits again; when its topic holds nothing older, the oldest message of all memory
topics (by arrival) goes instead. An evicted message moves its queue's min offset on, so a
pull below it is OFFSET_TOO_SMALL, as a pull below a disk queue's min offset. A segment's
memory goes back when its last record is evicted (a pull's views pin it until the reply is
written): the memory held stays under the cap plus one partly evicted segment per topic and
the segment being filled.

Nothing survives a restart: a memory topic comes back empty, its queues starting at offset 0.
"""

from __future__ import annotations

import bisect
import logging
import os
import threading
from array import array

from rocketstore._native import record_writer
from rocketstore._native.mapped_file import MappedFile
from rocketstore._native.record import CorruptRecordError, MessageExt, decode_at
from rocketstore.common.record import BLANK_MAGIC_CODE
from rocketstore.message import (
    GetMessageStatus,
    Message,
    PutMessageResult,
    PutMessagesResult,
    PutMessageStatus,
)
from rocketstore.store.consume_queue import offset_by_time
from rocketstore.store.get_message import MAX_FILTER_MESSAGE_COUNT, GetMessageResult, check_get_args
from rocketstore.store.services.reput import ArrivalListener
from rocketstore.store.subscription import parse_subscription

log = logging.getLogger(__name__)

#: Physical offsets of memory records start here (2**62): no CommitLog reaches it.
MEMORY_OFFSET_BASE = 1 << 62
#: A segment is this share of the cap (at least MIN_SEGMENT_BYTES, at most MAX_SEGMENT_BYTES).
SEGMENTS_PER_CAP = 32
MIN_SEGMENT_BYTES = 64 * 1024
MAX_SEGMENT_BYTES = 64 * 1024 * 1024
#: Blocks of a segment are taken as writes need them, this many bytes at a time.
ALLOCATION_CHUNK = 64 * 1024
#: What a pull returns at most (RocketMQ's maxTransferBytesOnMessageInMemory /
#: maxTransferCountOnMessageInMemory; messages in memory are always "in memory").
DEFAULT_MAX_TRANSFER_BYTES = 256 * 1024
DEFAULT_MAX_TRANSFER_COUNT = 32
_CLOSED = "the memory store is closed"


def available_memory() -> int:
    """MemAvailable of /proc/meminfo in bytes (the physical memory where it cannot be read)."""
    try:
        with open("/proc/meminfo", "rb") as f:
            for line in f:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 8 << 30


def default_max_bytes() -> int:
    """memoryTopicMaxBytes' default: 75% of the memory available now."""
    return available_memory() * 3 // 4


class _Fifo:
    """Integers appended at the back and dropped from the front (``head``), in an array."""

    __slots__ = ("items", "head")

    def __init__(self) -> None:
        self.items = array("q")
        self.head = 0

    def __len__(self) -> int:
        return len(self.items) - self.head

    def front(self) -> int:
        return self.items[self.head]

    def pop_front(self) -> None:
        self.head += 1
        # drop the dropped prefix now and then (amortised: an array's front is not freed)
        if self.head >= 1024 and self.head * 2 >= len(self.items):
            del self.items[:self.head]
            self.head = 0


class _Queue(_Fifo):
    """One memory queue: the physical offsets of its live records; the front one has queue
    offset ``min_offset``."""

    __slots__ = ("min_offset",)

    def __init__(self) -> None:
        super().__init__()
        self.min_offset = 0

    @property
    def max_offset(self) -> int:
        return self.min_offset + len(self)

    def pop_front(self) -> None:
        super().pop_front()
        self.min_offset += 1


class _Topic:
    """One memory topic: its segments (oldest first, physical offsets growing), its queues
    and the physical offset of its oldest live record (``head``)."""

    __slots__ = ("name", "segments", "starts", "queues", "head", "live_bytes", "live_count",
                 "arrivals")

    def __init__(self, name: str) -> None:
        self.name = name
        self.segments: list[MappedFile] = []
        self.starts: list[int] = []         # each segment's first physical offset
        self.queues: dict[int, _Queue] = {}
        self.head = -1
        self.live_bytes = 0
        self.live_count = 0
        #: the store-wide arrival number of each live record, oldest first
        self.arrivals = _Fifo()

    def locate(self, phy: int) -> tuple[MappedFile, int]:
        i = bisect.bisect_right(self.starts, phy) - 1
        segment = self.segments[i]
        return segment, phy - self.starts[i]


class MemoryMessageStore:
    """The memory topics of a broker (see the module docstring). Thread-safe: one lock
    around every operation (the broker calls it from its event loop)."""

    def __init__(self, max_bytes: int, store_host: str, *, max_message_size: int = 4 * 1024 * 1024,
                 max_transfer_bytes: int = DEFAULT_MAX_TRANSFER_BYTES,
                 max_transfer_count: int = DEFAULT_MAX_TRANSFER_COUNT,
                 segment_bytes: int | None = None) -> None:
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes <= 0:
            raise ValueError(f"memoryTopicMaxBytes must be a positive integer, got {max_bytes!r:.40}")
        if segment_bytes is None:
            segment_bytes = min(MAX_SEGMENT_BYTES, max(MIN_SEGMENT_BYTES, max_bytes // SEGMENTS_PER_CAP))
        if segment_bytes < MIN_SEGMENT_BYTES:
            raise ValueError(f"segment_bytes must be >= {MIN_SEGMENT_BYTES}, got {segment_bytes}")
        self.max_bytes = max_bytes
        self.segment_bytes = segment_bytes
        self.max_message_size = max_message_size
        self.max_transfer_bytes = max_transfer_bytes
        self.max_transfer_count = max_transfer_count
        # the writer's file size only bounds its own checks; segments carry their own sizes
        self._writer = record_writer.RecordWriter(max(segment_bytes, max_message_size + 4096),
                                                  max_message_size, store_host)
        self._topics: dict[str, _Topic] = {}
        self._lock = threading.Lock()
        self._next_phy = MEMORY_OFFSET_BASE
        self._arrival = 0
        self._listeners: list[ArrivalListener] = []
        self.live_bytes = 0
        self.segment_bytes_held = 0
        self.evicted_messages = 0
        self.evicted_bytes = 0
        self._closed = False

    # ---- life ----

    def add_arrival_listener(self, listener: ArrivalListener) -> None:
        """listener(topic, queue_id, next_queue_offset) after a put, on the putting thread."""
        self._listeners.append(listener)

    def close(self) -> None:
        """Let every segment go (pinned ones when their last view goes)."""
        with self._lock:
            self._closed = True
            for name in list(self._topics):
                self._drop(name)

    # ---- puts ----

    def append_message(self, message: Message, queue_id: int = 0) -> PutMessageResult:
        """Store one message of a memory topic; the oldest go when the cap is reached."""
        with self._lock:
            if self._closed:
                return record_writer.put_result(PutMessageStatus.SERVICE_NOT_AVAILABLE, _CLOSED)
            topic = self._topic(message.topic)
            result = self._append(topic, message, queue_id)
            if result.status_code == PutMessageStatus.PUT_OK:
                self._indexed(topic, queue_id, result.commitlog_offset, result.wrote_bytes)
                self._evict_for(topic)
                next_offset = topic.queues[queue_id].max_offset
        if result.status_code == PutMessageStatus.PUT_OK:
            for listener in self._listeners:
                listener(message.topic, queue_id, next_offset)
        return result

    def put_messages(self, messages: list[Message], queue_id: int = 0) -> PutMessagesResult:
        """Store a batch (one topic, one queue), validated whole before any is written (a
        failed allocation of memory may still cut it short: ``stored`` says how far)."""
        if not messages:
            raise ValueError("messages must not be empty")
        with self._lock:
            if self._closed:
                return record_writer.rejected_batch(len(messages), PutMessageStatus.SERVICE_NOT_AVAILABLE,
                                                    _CLOSED)
            topic = self._topic(messages[0].topic)
            prepared = self._writer.prepare_batch(messages, queue_id)
            if prepared.status_code != PutMessageStatus.PUT_OK:
                return prepared
            while True:
                segment = self._writable_segment(topic)
                fresh, stored = segment.wrote_position == 0, prepared.stored
                if self._writer.write_batch(segment, prepared):
                    break
                if fresh and prepared.stored == stored:
                    # an empty segment took none of the rest: one made to its size
                    self._retire_if_empty(topic, segment)
                    self._new_segment(topic, int(prepared.sizes[stored:].sum()) + 4096)
            stored = prepared.stored     # all, or those before a failed allocation
            phys = prepared.commitlog_offsets[:stored].tolist()
            for phy, size in zip(phys, prepared.sizes[:stored].tolist(), strict=True):
                self._indexed(topic, queue_id, phy, size)
            if stored == 0:
                return prepared
            self._evict_for(topic)
            next_offset = topic.queues[queue_id].max_offset
        for listener in self._listeners:
            listener(messages[0].topic, queue_id, next_offset)
        return prepared

    def _topic(self, name: str) -> _Topic:
        topic = self._topics.get(name)
        if topic is None:
            topic = self._topics[name] = _Topic(name)
        return topic

    def _new_segment(self, topic: _Topic, size: int) -> MappedFile:
        size = max(size, self.segment_bytes)
        fd = os.memfd_create(f"rocketstore-memory-topic-{topic.name[:100]}", os.MFD_CLOEXEC)
        try:
            segment = MappedFile(f"/proc/self/fd/{fd}", size, file_from_offset=self._next_phy,
                                 allocation_chunk=ALLOCATION_CHUNK)
        finally:
            os.close(fd)
        if not topic.segments:
            topic.head = self._next_phy
        self._next_phy += size
        topic.segments.append(segment)
        topic.starts.append(segment.file_from_offset)
        self.segment_bytes_held += size
        return segment

    def _writable_segment(self, topic: _Topic) -> MappedFile:
        if topic.segments and not topic.segments[-1].is_full:
            return topic.segments[-1]
        return self._new_segment(topic, self.segment_bytes)

    def _retire_if_empty(self, topic: _Topic, segment: MappedFile) -> None:
        """Drop a segment that holds only an END_FILE blank (the last one of its topic)."""
        if topic.segments and topic.segments[-1] is segment:
            topic.segments.pop()
            topic.starts.pop()
            self.segment_bytes_held -= segment.file_size
            segment.shutdown(0)
            if not topic.segments:
                topic.head = -1

    def _append(self, topic: _Topic, message: Message, queue_id: int) -> PutMessageResult:
        segment = self._writable_segment(topic)
        for _ in range(3):
            fresh = segment.wrote_position == 0
            result = self._writer.append(segment, message, queue_id)
            if result is not None:
                return result
            # the END_FILE blank closed the segment: a new one, sized for the message when
            # even an empty segment of the usual size did not take it
            if fresh:
                self._retire_if_empty(topic, segment)
                segment = self._new_segment(topic, self.max_message_size + 4096)
            else:
                segment = self._new_segment(topic, self.segment_bytes)
        raise RuntimeError("a segment sized for the largest message did not take it")

    def _indexed(self, topic: _Topic, queue_id: int, phy: int, size: int) -> None:
        queue = topic.queues.get(queue_id)
        if queue is None:
            queue = topic.queues[queue_id] = _Queue()
        queue.items.append(phy)
        topic.arrivals.items.append(self._arrival)
        self._arrival += 1
        if topic.live_count == 0:
            topic.head = phy
            self._free_passed_segments(topic)
        topic.live_count += 1
        topic.live_bytes += size
        self.live_bytes += size

    # ---- eviction ----

    def _evict_for(self, topic: _Topic) -> None:
        """Evict until the cap holds: the topic's oldest first, the oldest of all when the
        topic has nothing but its newest message left (which stays, whatever its size)."""
        while self.live_bytes > self.max_bytes:
            if topic.live_count > 1:
                self._evict_oldest(topic)
                continue
            victim = self._oldest_other(topic)
            if victim is None:
                return
            self._evict_oldest(victim)

    def _oldest_other(self, topic: _Topic) -> _Topic | None:
        """The other topic whose oldest record arrived first."""
        best: _Topic | None = None
        for other in self._topics.values():
            if other is not topic and other.live_count and (
                    best is None or other.arrivals.front() < best.arrivals.front()):
                best = other
        return best

    def _evict_oldest(self, topic: _Topic) -> None:
        segment, pos = topic.locate(topic.head)
        header = segment.read(pos, 16)
        size = int.from_bytes(header[0:4], "big")
        queue_id = int.from_bytes(header[12:16], "big")
        queue = topic.queues[queue_id]
        if queue.front() != topic.head:
            raise RuntimeError(f"memory topic {topic.name}: queue {queue_id} does not start at "
                               f"its topic's oldest record {topic.head}")
        queue.pop_front()
        topic.arrivals.pop_front()
        topic.live_count -= 1
        topic.live_bytes -= size
        self.live_bytes -= size
        self.evicted_messages += 1
        self.evicted_bytes += size
        topic.head += size
        self._free_passed_segments(topic)

    def _free_passed_segments(self, topic: _Topic) -> None:
        """Segments before the one holding the topic's oldest record go."""
        while len(topic.segments) > 1:
            first = topic.segments[0]
            pos = topic.head - topic.starts[0]
            if pos < first.wrote_position and not self._blank_at(first, pos):
                return
            topic.segments.pop(0)
            topic.starts.pop(0)
            self.segment_bytes_held -= first.file_size
            first.shutdown(0)
            topic.head = max(topic.head, topic.starts[0])

    @staticmethod
    def _blank_at(segment: MappedFile, pos: int) -> bool:
        if pos + 8 > segment.wrote_position:
            return True
        return int.from_bytes(segment.read(pos + 4, 4), "big") == BLANK_MAGIC_CODE

    # ---- reads ----

    def get_message(self, group: str, topic: str, queue_id: int, offset: int, max_msgs: int,
                    subscription: str | None = None,
                    expression_type: str | None = None) -> GetMessageResult:
        """Messages of a memory queue from offset on, as MessageStore.get_message answers
        for a disk queue (statuses, next offset, filters); records are views pinning their
        segment."""
        check_get_args(topic, queue_id, offset, max_msgs)
        sub = parse_subscription(subscription, expression_type)
        sql = sub.sql
        with self._lock:
            memory_topic = self._topics.get(topic)
            queue = None if memory_topic is None else memory_topic.queues.get(queue_id)
            if memory_topic is None or queue is None:
                return GetMessageResult(GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)
            min_offset, max_offset = queue.min_offset, queue.max_offset
            if max_offset == 0:
                return GetMessageResult(GetMessageStatus.NO_MESSAGE_IN_QUEUE, 0, min_offset, max_offset)
            if offset < min_offset:
                return GetMessageResult(GetMessageStatus.OFFSET_TOO_SMALL, min_offset,
                                        min_offset, max_offset)
            if offset == max_offset:
                return GetMessageResult(GetMessageStatus.OFFSET_OVERFLOW_ONE, offset,
                                        min_offset, max_offset)
            if offset > max_offset:
                return GetMessageResult(GetMessageStatus.OFFSET_OVERFLOW_BADLY,
                                        0 if min_offset == 0 else max_offset, min_offset, max_offset)
            result = GetMessageResult(GetMessageStatus.NO_MATCHED_MESSAGE, offset, min_offset,
                                      max_offset)
            messages = result.messages
            total = 0
            start = queue.head + offset - min_offset
            end = min(len(queue.items), start + MAX_FILTER_MESSAGE_COUNT)
            chunk = max(32, max_msgs * 2)   # a small pull converts few offsets to ints
            looked = 0
            full = False
            for first in range(start, end, chunk):
                for phy in queue.items[first:min(end, first + chunk)].tolist():
                    segment, pos = memory_topic.locate(phy)
                    msg = decode_at(segment, pos)
                    size = msg.store_size
                    if messages and (len(messages) >= min(max_msgs, self.max_transfer_count)
                                     or total + size > self.max_transfer_bytes):
                        full = True
                        break
                    looked += 1
                    if not sub.matches_code(msg.tags_code) or not sub.matches_tag(msg.tags) or (
                            sql is not None and not sql.matches(msg.properties)):
                        continue
                    messages.append(msg)
                    total += size
                    result.status = GetMessageStatus.FOUND
                if full:
                    break
            result.buffer_total_size = total
            result.next_begin_offset = offset + looked
            return result

    def _message(self, topic: str, queue_id: int, offset: int) -> MessageExt | None:
        memory_topic = self._topics.get(topic)
        queue = None if memory_topic is None else memory_topic.queues.get(queue_id)
        if memory_topic is None or queue is None or not queue.min_offset <= offset < queue.max_offset:
            return None
        segment, pos = memory_topic.locate(queue.items[queue.head + offset - queue.min_offset])
        return decode_at(segment, pos)

    def look_message_by_offset(self, commitlog_offset: int) -> MessageExt | None:
        """The held message whose record starts at a physical offset (an offset message id's),
        or None."""
        with self._lock:
            for topic in self._topics.values():
                if topic.live_count == 0 or not topic.head <= commitlog_offset:
                    continue
                segment, pos = topic.locate(commitlog_offset)
                if pos >= segment.wrote_position or self._blank_at(segment, pos):
                    continue
                try:
                    msg = decode_at(segment, pos)
                except CorruptRecordError:      # not where a record starts
                    continue
                if msg.commitlog_offset == commitlog_offset and msg.topic == topic.name:
                    return msg
            return None

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        with self._lock:
            memory_topic = self._topics.get(topic)
            queue = None if memory_topic is None else memory_topic.queues.get(queue_id)
            return 0 if queue is None else queue.max_offset

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        with self._lock:
            memory_topic = self._topics.get(topic)
            queue = None if memory_topic is None else memory_topic.queues.get(queue_id)
            return 0 if queue is None else queue.min_offset

    def get_message_store_timestamp(self, topic: str, queue_id: int, offset: int) -> int:
        """Store time of the message at a queue offset (-1 when it is not held)."""
        with self._lock:
            msg = self._message(topic, queue_id, offset)
            return -1 if msg is None else msg.store_timestamp

    def get_earliest_message_time(self, topic: str | None = None, queue_id: int = 0) -> int:
        """Store time of the oldest message held in a queue (-1 when it holds none)."""
        if topic is None:
            raise ValueError("topic is required: a memory store has no CommitLog")
        with self._lock:
            memory_topic = self._topics.get(topic)
            queue = None if memory_topic is None else memory_topic.queues.get(queue_id)
            if queue is None:
                return -1
            msg = self._message(topic, queue_id, queue.min_offset)
            return -1 if msg is None else msg.store_timestamp

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        """The queue offset of the message stored nearest to timestamp (as the disk store's)."""
        with self._lock:
            memory_topic = self._topics.get(topic)
            queue = None if memory_topic is None else memory_topic.queues.get(queue_id)
            if queue is None:
                return 0

            def time_at(offset: int) -> int:
                msg = self._message(topic, queue_id, offset)
                return -1 if msg is None else msg.store_timestamp
            return offset_by_time(queue.min_offset, queue.max_offset, timestamp, time_at)

    # ---- topics ----

    def topics(self) -> list[str]:
        with self._lock:
            return list(self._topics)

    def delete_topic(self, topic: str) -> bool:
        """Drop a memory topic's messages and queues; False when it held none."""
        with self._lock:
            return self._drop(topic)

    def _drop(self, name: str) -> bool:
        topic = self._topics.pop(name, None)
        if topic is None:
            return False
        for segment in topic.segments:
            self.segment_bytes_held -= segment.file_size
            segment.shutdown(0)
        self.live_bytes -= topic.live_bytes
        self._writer.queue_table.remove(name)
        return True

    def describe(self) -> dict[str, int]:
        """Figures for runtime info and tests."""
        with self._lock:
            return {
                "memoryTopicMaxBytes": self.max_bytes,
                "memoryTopicBytes": self.live_bytes,
                "memoryTopicSegmentBytes": self.segment_bytes_held,
                "memoryTopicMessages": sum(t.live_count for t in self._topics.values()),
                "memoryTopicEvictedMessages": self.evicted_messages,
                "memoryTopicEvictedBytes": self.evicted_bytes,
            }

