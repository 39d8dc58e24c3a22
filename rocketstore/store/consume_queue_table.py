"""All ConsumeQueues of a store (RocketMQ's consumeQueueTable) and the dispatcher that builds
them from the CommitLog."""
from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

import numpy as np

from rocketstore._native.consume_queue import group_records, write_grouped_units
from rocketstore._native.dispatch import DispatchBatch
from rocketstore._native.message import validate_topic
from rocketstore._native.topic_queue_table import MAX_QUEUE_ID
from rocketstore.common.text import is_ascii_int
from rocketstore.store.consume_queue import ConsumeQueue
from rocketstore.store.consume_queue_ext import ConsumeQueueExt
from rocketstore.store.layout import CONSUME_QUEUE_DIR, CONSUME_QUEUE_EXT_DIR

log = logging.getLogger(__name__)


def _segment_size(directory: str) -> int:
    """The size of the first segment in directory (0: none): an extension written with
    another mappedFileSizeConsumeQueueExt is read with its own."""
    try:
        names = sorted(n for n in os.listdir(directory) if is_ascii_int(n))
        return os.path.getsize(os.path.join(directory, names[0])) if names else 0
    except OSError:
        return 0


class ConsumeQueueTable:
    def __init__(self, root: str, file_size: int, *, read_only: bool = False,
                 ext_file_size: int = 0, ext_writes: bool = False) -> None:
        self.root_dir = os.path.join(root, CONSUME_QUEUE_DIR)
        self.file_size = file_size
        #: ConsumeQueue extensions (consumequeue_ext/): read wherever they exist, written
        #: for every queue with ext_writes (enableConsumeQueueExt)
        self.ext_root_dir = os.path.join(root, CONSUME_QUEUE_EXT_DIR)
        self.ext_file_size = ext_file_size
        self.ext_writes = ext_writes and not read_only
        #: given to every queue with an extension it writes (ConsumeQueue.ext_unit_of)
        self.ext_unit_of: Callable[[ConsumeQueue, int, int, int], int] | None = None
        self.read_only = read_only
        self._queues: dict[str, dict[int, ConsumeQueue]] = {}
        self._create_lock = threading.Lock()
        #: given to every queue (ConsumeQueue.gap_allowed): the store's judge of gaps
        self.gap_allowed = None
        #: given to every queue (ConsumeQueue.offset_taken): told of duplicate queue offsets
        self.offset_taken = None
        #: directories load() could not take as queues (logged at ERROR; describe() lists them)
        self.problems: list[str] = []

    def load(self) -> None:
        """Open every consumequeue/<topic>/<queueId>/ found on disk. A directory that is not
        a legal topic or queue id is skipped (ERROR): no record can name it, so it holds no
        unit of a readable message."""
        if not os.path.isdir(self.root_dir):
            return
        for topic in sorted(os.listdir(self.root_dir)):
            topic_dir = os.path.join(self.root_dir, topic)
            if not os.path.isdir(topic_dir):
                continue
            try:
                validate_topic(topic)
            except ValueError as exc:
                self._problem(f"ignoring {topic_dir}: not a topic ({exc})")
                continue
            for name in sorted(os.listdir(topic_dir)):
                if not is_ascii_int(name) or int(name) > MAX_QUEUE_ID:
                    self._problem(f"ignoring {os.path.join(topic_dir, name)}: not a queue id")
                    continue
                cq = self._new_queue(topic, int(name))
                try:
                    cq.load()
                except BaseException:
                    self.close()
                    raise
                self._queues.setdefault(topic, {})[int(name)] = cq

    def _problem(self, text: str) -> None:
        log.error("%s", text)
        self.problems.append(text)

    def _new_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        cq = ConsumeQueue(topic, queue_id, self.root_dir, self.file_size,
                          read_only=self.read_only)
        cq.gap_allowed = self.gap_allowed
        cq.offset_taken = self.offset_taken
        ext_dir = os.path.join(self.ext_root_dir, topic, str(queue_id))
        if self.ext_file_size and (self.ext_writes or os.path.isdir(ext_dir)):
            cq.ext = ConsumeQueueExt(topic, queue_id, self.ext_root_dir,
                                     _segment_size(ext_dir) or self.ext_file_size,
                                     read_only=self.read_only)
            if self.ext_writes:
                cq.ext_unit_of = self.ext_unit_of
        return cq

    def recover(self) -> None:
        for cq in self.all():
            cq.recover()

    def all(self) -> list[ConsumeQueue]:
        return [cq for queues in list(self._queues.values()) for cq in list(queues.values())]

    def topics(self) -> list[str]:
        return sorted(self._queues)

    def queues(self, topic: str) -> dict[int, ConsumeQueue]:
        return dict(self._queues.get(topic, {}))

    def find(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        return self._queues.get(topic, {}).get(queue_id)

    def find_or_create(self, topic: str, queue_id: int) -> ConsumeQueue:
        cq = self._queues.get(topic, {}).get(queue_id)
        if cq is None:
            with self._create_lock:
                queues = self._queues.setdefault(topic, {})
                cq = queues.get(queue_id)
                if cq is None:
                    cq = self._new_queue(topic, queue_id)
                    cq.load()
                    queues[queue_id] = cq
        return cq

    def remove_topic(self, topic: str) -> list[ConsumeQueue]:
        """Forget a topic's queues (the caller destroys their files); returns them."""
        with self._create_lock:
            queues = self._queues.pop(topic, {})
        return list(queues.values())

    def remove_queue(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        """Forget one queue (the caller destroys its files); the topic goes with its last."""
        with self._create_lock:
            queues = self._queues.get(topic, {})
            cq = queues.pop(queue_id, None)
            if not queues:
                self._queues.pop(topic, None)
        return cq

    def max_physic_offset(self) -> int:
        """End of the newest record any ConsumeQueue points at (-1 when none)."""
        return max((cq.max_physic_offset for cq in self.all()), default=-1)

    def truncate_dirty(self, phy_offset: int) -> None:
        for cq in self.all():
            cq.truncate_dirty(phy_offset)

    def correct_min_offsets(self, min_commitlog_offset: int) -> None:
        for cq in self.all():
            cq.correct_min_offset(min_commitlog_offset)

    def flush(self, least_pages: int = 0) -> None:
        for cq in self.all():
            cq.flush(least_pages)

    def close(self) -> None:
        for cq in self.all():
            cq.close()

    # ---- dispatcher ------------------------------------------------------------------------
    def dispatch(self, batch: DispatchBatch) -> None:
        """Build units for the batch's plain and committed-transaction records: one native
        pass writes every queue's units into its last file, in log order (no sort, no Python
        work per record or per queue); units that need another file (a roll, a queue's first
        file) go through ConsumeQueue.put_units afterwards, queue by queue, in order."""
        n = len(batch)
        if not n:
            return
        group_ids, keys = group_records(batch.topic_ids, batch.queue_ids, batch.sys_flags)
        queues: list[ConsumeQueue | None] = []
        files = []
        max_phys = np.empty(len(keys), np.int64)
        for g, key in enumerate(keys.tolist()):
            topic = batch.topics[key >> 32]
            queue_id = int(np.int32(np.uint32(key & 0xFFFFFFFF)))
            if not 0 <= queue_id <= MAX_QUEUE_ID:
                log.warning("record with queue id %d in topic %r: not dispatched", queue_id,
                            topic)
                queues.append(None)
                files.append(None)
                max_phys[g] = np.iinfo(np.int64).max        # every record skipped
                continue
            cq = self.find_or_create(topic, queue_id)
            queues.append(cq)
            files.append(cq.queue.last_file())
            max_phys[g] = cq.max_physic_offset
        slow = np.zeros(n, np.uint8)
        columns = (batch.phy_offsets, batch.sizes, batch.tags_codes, batch.queue_offsets)
        nslow = write_grouped_units(files, max_phys, group_ids, *columns, slow)
        for g, cq in enumerate(queues):
            if cq is not None:
                cq.max_physic_offset = int(max_phys[g])
        if not nslow:
            return
        rows = np.flatnonzero(slow)
        slow_groups = group_ids[rows]
        for g in dict.fromkeys(slow_groups.tolist()):
            cq = queues[g]
            if cq is None:
                continue
            mine = rows[slow_groups == g]
            cq.put_units(*(np.ascontiguousarray(column[mine]) for column in columns))
