"""The store directory: file names, file sizes and the geometry read back from existing files.

One home for these facts (docs/format.md describes the layout they implement)::

    <root>/commitlog/<20-digit start offset>          CommitLog segments
    <root>/consumequeue/<topic>/<queueId>/<20 digits>  ConsumeQueue files (20-byte units)
    <root>/index/<yyyyMMddHHmmssSSS>                  IndexFiles
    <root>/checkpoint, <root>/abort, <root>/lock, <root>/config/*.json
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from rocketstore.common.text import is_ascii_int

SEGMENT_NAME_DIGITS = 20
CONSUME_QUEUE_UNIT_SIZE = 20
INDEX_HEADER_SIZE = 40
INDEX_SLOT_SIZE = 4
INDEX_ITEM_SIZE = 20
#: RocketMQ's default maxIndexNum / maxHashSlotNum, the ratio assumed when only a file's
#: size is known.
INDEX_ITEMS_PER_SLOT = 4

#: Files are sparse and get their blocks on disk as writes need them (MappedFile.allocate_to),
#: in steps of: (CommitLog segments; the CommitLogPrefaultService allocates further ahead)
COMMIT_LOG_ALLOCATION_CHUNK = 4 << 20
#: ConsumeQueue files: from the smallest step up to the largest, each the size allocated so
#: far, so a queue of a few messages takes 64 KiB and a busy one rarely allocates.
CONSUME_QUEUE_ALLOCATION_MIN = 64 << 10
CONSUME_QUEUE_ALLOCATION_MAX = 1 << 20

COMMITLOG_DIR = "commitlog"
CONSUME_QUEUE_DIR = "consumequeue"
INDEX_DIR = "index"
CONFIG_DIR = "config"
CHECKPOINT_FILE = "checkpoint"
ABORT_FILE = "abort"
LOCK_FILE = "lock"


class StoreFormatError(ValueError):
    """A store directory whose files do not form a valid sequence (gap, size, name)."""


def segment_name(offset: int) -> str:
    """A segment's name: its start offset, zero-padded to 20 digits (UtilAll.offset2FileName)."""
    return f"{offset:0{SEGMENT_NAME_DIGITS}d}"


def is_segment_name(name: str) -> bool:
    return len(name) == SEGMENT_NAME_DIGITS and is_ascii_int(name)


def is_index_file_name(name: str) -> bool:
    return is_ascii_int(name)


def index_file_size(hash_slots: int, items: int) -> int:
    return INDEX_HEADER_SIZE + INDEX_SLOT_SIZE * hash_slots + INDEX_ITEM_SIZE * items


def segment_files(directory: str | os.PathLike[str]) -> list[str]:
    """Paths of the segment files (20-digit names) in directory, in offset order; [] when the
    directory does not exist."""
    return _files(directory, is_segment_name)


def index_files(root: str | os.PathLike[str]) -> list[str]:
    """Paths of the store's IndexFiles, oldest first."""
    return _files(os.path.join(root, INDEX_DIR), is_index_file_name)


def consume_queue_files(root: str | os.PathLike[str]) -> list[str]:
    """Paths of every ConsumeQueue file of the store."""
    found: list[str] = []
    cq_root = os.path.join(root, CONSUME_QUEUE_DIR)
    for topic in _dirs(cq_root):
        for queue in _dirs(os.path.join(cq_root, topic)):
            found.extend(segment_files(os.path.join(cq_root, topic, queue)))
    return found


def _files(directory: str | os.PathLike[str], name_ok: Any) -> list[str]:
    directory = os.fspath(directory)
    try:
        names = os.listdir(directory)
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [os.path.join(directory, n) for n in sorted(names)
            if name_ok(n) and os.path.isfile(os.path.join(directory, n))]


def _dirs(directory: str) -> list[str]:
    try:
        names = os.listdir(directory)
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(n for n in names if os.path.isdir(os.path.join(directory, n)))


@dataclass(frozen=True)
class StorePaths:
    """Where each part of the store at root lives."""

    root: str
    commitlog: str

    @classmethod
    def of(cls, root: str | os.PathLike[str], commitlog: str | None = None) -> StorePaths:
        root = os.path.abspath(os.fspath(root))
        return cls(root, commitlog or os.path.join(root, COMMITLOG_DIR))

    @property
    def consume_queue_root(self) -> str:
        return os.path.join(self.root, CONSUME_QUEUE_DIR)

    def consume_queue(self, topic: str, queue_id: int) -> str:
        return os.path.join(self.root, CONSUME_QUEUE_DIR, topic, str(queue_id))

    @property
    def index(self) -> str:
        return os.path.join(self.root, INDEX_DIR)

    @property
    def config(self) -> str:
        return os.path.join(self.root, CONFIG_DIR)

    def config_file(self, name: str) -> str:
        return os.path.join(self.root, CONFIG_DIR, name)

    @property
    def checkpoint(self) -> str:
        return os.path.join(self.root, CHECKPOINT_FILE)

    @property
    def abort(self) -> str:
        return os.path.join(self.root, ABORT_FILE)

    @property
    def lock(self) -> str:
        return os.path.join(self.root, LOCK_FILE)


def index_geometry(size: int, hash_slots: int | None = None, index_num: int | None = None
                   ) -> tuple[int, int]:
    """(hash slots, items) of an IndexFile of `size` bytes (40 + 4 * slots + 20 * items).
    Given one of the two, the other follows from the size; given neither, RocketMQ's ratio of
    4 items a slot. Raises StoreFormatError when the size does not fit."""
    if hash_slots is not None and index_num is not None:
        if index_file_size(hash_slots, index_num) != size:
            raise StoreFormatError(
                f"an IndexFile of {hash_slots:,} hash slots and {index_num:,} items is "
                f"{index_file_size(hash_slots, index_num):,} bytes, not {size:,}")
        return hash_slots, index_num
    if hash_slots is not None:
        rest = size - INDEX_HEADER_SIZE - INDEX_SLOT_SIZE * hash_slots
        if rest < 2 * INDEX_ITEM_SIZE or rest % INDEX_ITEM_SIZE:
            raise StoreFormatError(f"max_hash_slot_num {hash_slots:,} does not fit an IndexFile "
                                   f"of {size:,} bytes (40 + 4*slots + 20*items)")
        return hash_slots, rest // INDEX_ITEM_SIZE
    if index_num is not None:
        rest = size - INDEX_HEADER_SIZE - INDEX_ITEM_SIZE * index_num
        if rest < INDEX_SLOT_SIZE or rest % INDEX_SLOT_SIZE:
            raise StoreFormatError(f"max_index_num {index_num:,} does not fit an IndexFile "
                                   f"of {size:,} bytes (40 + 4*slots + 20*items)")
        return rest // INDEX_SLOT_SIZE, index_num
    per_slot = INDEX_SLOT_SIZE + INDEX_ITEMS_PER_SLOT * INDEX_ITEM_SIZE
    if size <= INDEX_HEADER_SIZE or (size - INDEX_HEADER_SIZE) % per_slot:
        raise StoreFormatError(
            f"an IndexFile of {size:,} bytes does not have RocketMQ's 4 items per hash slot "
            "(40 + 84*slots bytes): give max_hash_slot_num or max_index_num")
    slots = (size - INDEX_HEADER_SIZE) // per_slot
    return slots, INDEX_ITEMS_PER_SLOT * slots


def detect_geometry(root: str | os.PathLike[str], commitlog: str | None = None, *,
                    hash_slots: int | None = None, index_num: int | None = None
                    ) -> dict[str, int]:
    """StoreConfig file sizes of an existing store, read from its files: the CommitLog segment
    size (the first segment's), the ConsumeQueue file size (the first ConsumeQueue file's that
    holds whole units) and the IndexFile geometry. hash_slots / index_num are what the caller
    believes of the IndexFiles: kept when they fit the first file's size, otherwise the
    geometry follows from the size (see index_geometry). Kinds without files, or whose files
    fit no geometry, are left out (opening the store reports those files)."""
    paths = StorePaths.of(root, commitlog)
    found: dict[str, int] = {}
    segments = segment_files(paths.commitlog)
    size = _segment_size(segments)
    if size:
        found["mapped_file_size_commit_log"] = size
    cq_size = _first_consume_queue_file_size(paths)
    if cq_size:
        found["mapped_file_size_consume_queue"] = cq_size
    indexes = index_files(paths.root)
    if indexes:
        size = os.path.getsize(indexes[0])
        if hash_slots is not None and index_num is not None and \
                index_file_size(hash_slots, index_num) == size:
            geometry: tuple[int, int] | None = (hash_slots, index_num)
        else:
            try:
                geometry = index_geometry(size)
            except StoreFormatError:
                geometry = None
        if geometry is not None:
            found["max_hash_slot_num"], found["max_index_num"] = geometry
    return found


def _segment_size(segments: list[str]) -> int:
    """The segment size of a file queue: the distance between consecutive names (a damaged
    file cut short does not tell it), else the largest file's size; 0 when unknown."""
    starts = [int(os.path.basename(p)) for p in segments]
    steps = [b - a for a, b in zip(starts, starts[1:], strict=False) if b > a]
    if steps:
        return min(steps)
    sizes = [os.path.getsize(p) for p in segments]
    return max(sizes, default=0)


def _first_consume_queue_file_size(paths: StorePaths) -> int:
    """The ConsumeQueue file size: the distance between consecutive file names of a queue
    (a damaged file cut short does not tell it), else the largest file that holds whole
    units; 0 when there is none."""
    steps: list[int] = []
    largest = 0
    for topic in _dirs(paths.consume_queue_root):
        for queue in _dirs(os.path.join(paths.consume_queue_root, topic)):
            files = segment_files(os.path.join(paths.consume_queue_root, topic, queue))
            starts = [int(os.path.basename(p)) for p in files]
            steps += [b - a for a, b in zip(starts, starts[1:], strict=False)
                      if b > a and (b - a) % CONSUME_QUEUE_UNIT_SIZE == 0]
            for path in files:
                size = os.path.getsize(path)
                if size % CONSUME_QUEUE_UNIT_SIZE == 0:
                    largest = max(largest, size)
    return min(steps) if steps else largest
