"""Where a store is and how to open it from a Spark job: the store root, the file sizes read
from its files (so a store written with any settings opens as it is), a read-only open for
planning and a lightweight snapshot for the tasks.

Nothing here imports pyspark: the planning and reading code is usable (and tested) without it.
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from rocketstore.config import StoreConfig
from rocketstore.store.checkpoint import StoreCheckpoint
from rocketstore.store.commit_log import CommitLog
from rocketstore.store.consume_queue import UNIT_SIZE, ConsumeQueue
from rocketstore.store.message_store import MessageStore

SEGMENT_NAME_DIGITS = 20


def _is_segment_name(name: str) -> bool:
    return len(name) == SEGMENT_NAME_DIGITS and name.isdigit()


def _first_file(directory: str, name_ok: Any) -> str | None:
    try:
        names = sorted(n for n in os.listdir(directory)
                       if name_ok(n) and os.path.isfile(os.path.join(directory, n)))
    except OSError:
        return None
    return os.path.join(directory, names[0]) if names else None


def detect_file_sizes(root: str) -> dict[str, int]:
    """StoreConfig file sizes of an existing store, read from its files (as ``rocketstore
    dump`` does): the CommitLog segment size is the size of the first segment, the
    ConsumeQueue file size that of the first ConsumeQueue file, the IndexFile slots from the
    first index file (40 + 4 * slots + 20 * 4 * slots bytes, RocketMQ's default ratio)."""
    found: dict[str, int] = {}
    first = _first_file(os.path.join(root, "commitlog"), _is_segment_name)
    if first is not None:
        size = os.path.getsize(first)
        if size > 0:
            found["mapped_file_size_commit_log"] = size
    cq_root = os.path.join(root, "consumequeue")
    if os.path.isdir(cq_root):
        for topic in sorted(os.listdir(cq_root)):
            topic_dir = os.path.join(cq_root, topic)
            if not os.path.isdir(topic_dir):
                continue
            for queue in sorted(os.listdir(topic_dir)):
                cq_first = _first_file(os.path.join(topic_dir, queue), _is_segment_name)
                if cq_first is not None:
                    size = os.path.getsize(cq_first)
                    if size > 0 and size % UNIT_SIZE == 0:
                        found["mapped_file_size_consume_queue"] = size
                        break
            if "mapped_file_size_consume_queue" in found:
                break
    first_index = _first_file(os.path.join(root, "index"), str.isdigit)
    if first_index is not None:
        size = os.path.getsize(first_index)
        if size > 40 and (size - 40) % 84 == 0:
            found["max_hash_slot_num"] = (size - 40) // 84
            found["max_index_num"] = 4 * found["max_hash_slot_num"]
    return found


@dataclass(frozen=True)
class StoreLocation:
    """A store directory and the file sizes to open it with. Small and picklable: it travels
    in every InputPartition, and each task opens the files itself."""

    root: str
    commit_log_file_size: int
    consume_queue_file_size: int
    extra: tuple[tuple[str, Any], ...] = field(default=())   # other StoreConfig fields

    @classmethod
    def detect(cls, path: str, *, commit_log_file_size: int | None = None,
               consume_queue_file_size: int | None = None, must_exist: bool = True
               ) -> StoreLocation:
        """The store at path (its root, the directory holding ``commitlog/``), with the file
        sizes found in it; explicit sizes win. must_exist=False allows a new, empty store
        (for writing): missing sizes take StoreConfig's defaults."""
        if not isinstance(path, str) or not path:
            raise ValueError("option 'path' is required: the rocketstore directory (the one "
                             "holding commitlog/)")
        root = os.path.abspath(os.path.expanduser(path))
        if must_exist:
            if not os.path.isdir(root):
                raise FileNotFoundError(f"option 'path': store directory {root} does not exist")
            if not os.path.isdir(os.path.join(root, "commitlog")):
                hint = ""
                if os.path.basename(root) == "commitlog":
                    hint = f" (give the store root {os.path.dirname(root)}, not its commitlog/)"
                raise ValueError(f"option 'path': {root} is not a rocketstore directory: it has "
                                 f"no commitlog/ subdirectory{hint}")
        sizes = detect_file_sizes(root) if os.path.isdir(root) else {}
        defaults = StoreConfig(store_path_root_dir=root)
        cl = commit_log_file_size or sizes.pop("mapped_file_size_commit_log", None) or \
            defaults.mapped_file_size_commit_log
        sizes.pop("mapped_file_size_commit_log", None)
        cq = consume_queue_file_size or sizes.pop("mapped_file_size_consume_queue", None) or \
            defaults.mapped_file_size_consume_queue
        sizes.pop("mapped_file_size_consume_queue", None)
        return cls(root, int(cl), int(cq), tuple(sorted(sizes.items())))

    def config(self, **changes: Any) -> StoreConfig:
        values: dict[str, Any] = {
            "store_path_root_dir": self.root,
            "mapped_file_size_commit_log": self.commit_log_file_size,
            "mapped_file_size_consume_queue": self.consume_queue_file_size,
            **dict(self.extra),
        }
        values.update(changes)
        return StoreConfig(**values)

    @contextmanager
    def open_read_only(self) -> Iterator[MessageStore]:
        """MessageStore.open(read_only=True): no lock, no writing recovery, no file modified;
        it sees the valid prefix of what is there while another process writes."""
        store = MessageStore.open(self.root, self.config(), read_only=True)
        try:
            yield store
        finally:
            store.shutdown()

    def snapshot(self, end_offset: int | None = None) -> StoreSnapshot:
        return StoreSnapshot(self, end_offset)


class StoreSnapshot:
    """What a task needs to decode records: the CommitLog segment files mapped read-only with
    the end fixed at ``end_offset`` (the consistent prefix captured when the job was planned),
    and ConsumeQueues on demand. Unlike ``MessageStore.open(read_only=True)`` it runs no
    recovery scan: the planner already validated everything below end_offset (records below
    a published offset never change), so opening costs a few mmaps, not a pass over the log.

    Quacks like a MessageStore for ``rocketstore.store.columnar`` (``.commit_log``)."""

    def __init__(self, location: StoreLocation, end_offset: int | None = None) -> None:
        self.location = location
        self.config = location.config(read_only=True)
        checkpoint = StoreCheckpoint(os.path.join(location.root, "checkpoint"), read_only=True)
        self.commit_log = CommitLog(self.config, location.root, checkpoint, read_only=True)
        self.commit_log.load()
        if end_offset is not None:
            # positions only (read-only): nothing past end_offset is readable
            self.commit_log.set_end(max(end_offset, self.commit_log.min_offset()),
                                    zero_tail=False)
        self._queues: dict[tuple[str, int], ConsumeQueue] = {}

    def consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        key = (topic, queue_id)
        cq = self._queues.get(key)
        if cq is None:
            directory = os.path.join(self.location.root, "consumequeue", topic, str(queue_id))
            if not os.path.isdir(directory):
                return None
            cq = ConsumeQueue(topic, queue_id, os.path.join(self.location.root, "consumequeue"),
                              self.location.consume_queue_file_size, read_only=True)
            cq.load()
            self._queues[key] = cq
        return cq

    def close(self) -> None:
        for cq in self._queues.values():
            cq.close()
        self._queues.clear()
        self.commit_log.queue.close()

    def __enter__(self) -> StoreSnapshot:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
