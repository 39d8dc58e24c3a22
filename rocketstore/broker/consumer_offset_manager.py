"""ConsumerOffsetManager: every consumer group's committed offsets, kept in memory and written
to RocketMQ's ``config/consumerOffset.json`` (``rocketstore.store``'s ``load_offset_table`` and
``write_offset_table`` read and write that file; it is the same file Spark and the CLI use)
every ``flushConsumerOffsetInterval`` ms and at shutdown.

Keys are ``topic@group``, then queue id -> the next offset to consume. An offset committed
here is what QUERY_CONSUMER_OFFSET answers at once; the file may lag by one interval (a crash
loses at most that much progress, and consumers then see some messages again).

The broker owns the file while it runs: writes take the file's flock (so a Spark job's
``commit_group_offsets`` never interleaves with them), and what another process committed to
the file meanwhile is replaced by the broker's table at its next write.
"""

from __future__ import annotations

import logging
import threading

from rocketstore.store import load_offset_table, offsets_lock, write_offset_table

log = logging.getLogger(__name__)

OffsetTable = dict[str, dict[int, int]]


class ConsumerOffsetManager:
    def __init__(self, root: str) -> None:
        self.root = root
        self.table: OffsetTable = {}
        self._persist_lock = threading.Lock()
        #: bumped on every change: a persist of an unchanged table writes nothing
        self.version = 0
        self._persisted_version = -1

    def load(self) -> None:
        self.table = load_offset_table(self.root)
        self._persisted_version = self.version

    # ---- reads ----

    def query(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, -1 when the group never committed on that queue."""
        queues = self.table.get(f"{topic}@{group}")
        if queues is None:
            return -1
        return queues.get(queue_id, -1)

    def query_queues(self, group: str, topic: str) -> dict[int, int]:
        return dict(self.table.get(f"{topic}@{group}", {}))

    def topics_of_group(self, group: str) -> set[str]:
        out = set()
        for key in self.table:
            topic, _, owner = key.rpartition("@")
            if owner == group:
                out.add(topic)
        return out

    def groups_of_topic(self, topic: str) -> set[str]:
        out = set()
        for key in self.table:
            owner_topic, _, group = key.rpartition("@")
            if owner_topic == topic:
                out.add(group)
        return out

    # ---- writes ----

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        key = f"{topic}@{group}"
        queues = self.table.get(key)
        if queues is None:
            queues = self.table[key] = {}
        if queues.get(queue_id) != offset:
            queues[queue_id] = offset
            self.version += 1

    def remove_group(self, group: str, topic: str | None = None) -> None:
        for key in [k for k in self.table if k.rpartition("@")[2] == group]:
            if topic is None or key.rpartition("@")[0] == topic:
                del self.table[key]
                self.version += 1

    # ---- persistence ----

    def snapshot(self) -> tuple[int, OffsetTable] | None:
        """A copy to persist (None when nothing changed since the last persist)."""
        if self.version == self._persisted_version:
            return None
        return self.version, {key: dict(queues) for key, queues in self.table.items()}

    def write(self, snapshot: tuple[int, OffsetTable]) -> None:
        """Write a snapshot (from any thread); older snapshots never overwrite newer ones."""
        version, table = snapshot
        with self._persist_lock:
            if version <= self._persisted_version:
                return
            with offsets_lock(self.root):
                write_offset_table(self.root, table)
            self._persisted_version = version

    def persist(self) -> None:
        snapshot = self.snapshot()
        if snapshot is not None:
            self.write(snapshot)
