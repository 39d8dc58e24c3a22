"""The store directory: file names, file sizes and the geometry read back from existing files.

One home for these facts (docs/format.md describes the layout they implement)::

    <root>/commitlog/<20-digit start offset>          CommitLog segments
    <root>/consumequeue/<topic>/<queueId>/<20 digits>  ConsumeQueue files (20-byte units)
    <root>/index/<yyyyMMddHHmmssSSS>                  IndexFiles
    <root>/checkpoint, <root>/abort, <root>/lock, <root>/config/*.json
"""
from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

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
#: ConsumeQueue extension files (RocketMQ's storePathConsumeQueueExt default)
CONSUME_QUEUE_EXT_DIR = "consumequeue_ext"
INDEX_DIR = "index"
CONFIG_DIR = "config"
CHECKPOINT_FILE = "checkpoint"
ABORT_FILE = "abort"
LOCK_FILE = "lock"


class StoreFormatError(ValueError):
    """A store directory whose files do not form a valid sequence (gap, size, name)."""


class IndexGeometryError(StoreFormatError):
    """An IndexFile whose hash slots and items cannot be told from its size and data."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"index file {path}: {reason}")
        self.path = path
        self.reason = reason


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


#: How many of a file's newest items read_index_geometry checks against their slots.
_GEOMETRY_CHECKED_ITEMS = 16
_WORD = 4       # the file is big-endian 4-byte words: header 10, then slots, then 5 per item


def read_index_geometry(path: str | os.PathLike[str],
                        preferred: Iterable[tuple[int, int] | None] = ()) -> tuple[int, int]:
    """(hash slots, items) of the IndexFile at path, as it was written.

    The size (40 + 4*slots + 20*items) leaves many pairs; the data decide among them. With the
    true geometry, item 1 is the first put (phyOffset = the header's beginPhyOffset, prevIndex
    0), item indexCount-1 the last (phyOffset = endPhyOffset), the item after it is empty,
    each of the newest items is the head of its slot (keyHash % slots points at it), and the
    header's hashSlotCount and indexCount fit. ``preferred`` pairs (the config's, the previous
    file's) and RocketMQ's 4 items a slot are tried first, then every pair the size allows.
    When no pair fits the data (a damaged file), the first of those tried first that fits the
    size is taken (IndexFile.check then finds the damage). A file without items reads the same
    under any geometry: the first pair tried first that fits its size, else the one with the
    fewest slots. IndexGeometryError when no pair fits the size, or none of those tried first
    does and the data fit none or several (then give max_hash_slot_num/max_index_num)."""
    path = os.fspath(path)
    size = os.path.getsize(path)
    if size < index_file_size(1, 2) or (size - INDEX_HEADER_SIZE) % _WORD:
        raise IndexGeometryError(path, f"{size:,} bytes: no IndexFile has that "
                                 "size (40 + 4*slots + 20*items, items >= 2)")
    words = np.memmap(path, dtype=">u4", mode="r")     # unmapped when the last view goes
    return _geometry_of(path, size, words, [p for p in preferred if p is not None])


def _geometry_of(path: str, size: int, words: np.ndarray, preferred: list[tuple[int, int]]
                 ) -> tuple[int, int]:
    begin_phy = (int(words[4]) << 32) | int(words[5])
    end_phy = (int(words[6]) << 32) | int(words[7])
    slot_count, index_count = int(words[8]), int(words[9])
    for name, count in (("indexCount", index_count), ("hashSlotCount", slot_count)):
        if count >= 1 << 31:
            raise IndexGeometryError(path, f"{name} {count - (1 << 32)} is negative")
    with_ratio = list(preferred)
    try:
        with_ratio.append(index_geometry(size))         # RocketMQ's 4 items a slot
    except StoreFormatError:
        pass
    fits_size = [(s, n) for s, n in with_ratio if s >= 1 and n >= 2 and index_file_size(s, n) == size]
    low_slots, low_items = max(slot_count, 1), max(index_count, 2)
    high_slots = (size - INDEX_HEADER_SIZE - INDEX_ITEM_SIZE * low_items) // INDEX_SLOT_SIZE
    if high_slots < low_slots:
        raise IndexGeometryError(path, f"its {size:,} bytes cannot hold the "
                                 f"{slot_count:,} used slots and {index_count:,} items its "
                                 "header counts")
    # slots s fit the size when 4*s = size - 40 (mod 20): one residue mod 5
    first = low_slots + (((size - INDEX_HEADER_SIZE) // _WORD - low_slots) % 5)
    if index_count <= 1:        # no item: nothing tells the geometry, nothing depends on it
        for s, n in fits_size:
            return s, n
        if first > high_slots:
            raise IndexGeometryError(path, f"no geometry fits its {size:,} bytes")
        return first, (size - INDEX_HEADER_SIZE - INDEX_SLOT_SIZE * first) // INDEX_ITEM_SIZE
    header = (begin_phy, end_phy, slot_count, index_count)
    for s, n in fits_size:
        if _fits_data(words, s, n, header):
            return s, n
    found = []
    for s in _candidate_slots(words, size, first, high_slots, header):
        n = (size - INDEX_HEADER_SIZE - INDEX_SLOT_SIZE * s) // INDEX_ITEM_SIZE
        if _fits_data(words, s, n, header):
            found.append((s, n))
            if len(found) > 4:
                break
    if len(found) == 1:
        return found[0]
    if not found and fits_size:
        # damaged data: read as the config (or RocketMQ's ratio) says; its check finds the damage
        return fits_size[0]
    if not found:
        raise IndexGeometryError(
            path, f"no geometry (hash slots, items) of its {size:,} bytes fits its "
            f"data (indexCount {index_count:,}, hashSlotCount {slot_count:,}, phyOffsets "
            f"{begin_phy}..{end_phy})")
    shown = ", ".join(f"{s:,} slots/{n:,} items" for s, n in found[:4])
    raise IndexGeometryError(
        path, f"its data fit {len(found)} geometries ({shown}"
        f"{', ...' if len(found) > 4 else ''}): give the store's max_hash_slot_num and "
        "max_index_num (--hash-slots/--index-num)")


#: Candidate slot counts checked at once (numpy arrays of this length).
_CANDIDATE_CHUNK = 1 << 20


def _candidate_slots(words: np.ndarray, size: int, first: int, high_slots: int,
                     header: tuple[int, int, int, int]) -> list[int]:
    """The slot counts (first, first + 5, ... high_slots) whose item 1 and last item have the
    header's phyOffsets, item 1 no predecessor, and the last item heads its slot: checked over
    all of them at once (numpy, in chunks); past 64 survivors the search stops."""
    begin_phy, end_phy, _, index_count = header
    out: list[int] = []
    for start in range(first, high_slots + 1, 5 * _CANDIDATE_CHUNK):
        slots = np.arange(start, min(high_slots, start + 5 * (_CANDIDATE_CHUNK - 1)) + 1, 5,
                          dtype=np.int64)
        base = 10 + slots
        item1 = base + 5
        last = base + 5 * (index_count - 1)
        ok = (words[item1 + 1] == begin_phy >> 32) & (words[item1 + 2] == begin_phy & 0xFFFFFFFF)
        ok &= words[item1 + 4] == 0
        ok &= (words[last + 1] == end_phy >> 32) & (words[last + 2] == end_phy & 0xFFFFFFFF)
        slots, last = slots[ok], last[ok]
        hashes = words[last].astype(np.int64)
        ok = hashes < 1 << 31
        slots, hashes = slots[ok], hashes[ok]
        heads = words[10 + hashes % slots].astype(np.int64)
        items = (size - INDEX_HEADER_SIZE - INDEX_SLOT_SIZE * slots) // INDEX_ITEM_SIZE
        ok = (heads == index_count - 1) | ((heads >= index_count) & (heads < items))
        out.extend(slots[ok].tolist())
        if len(out) > 64:
            break
    return out


def _fits_data(words: np.ndarray, slots: int, items: int,
               header: tuple[int, int, int, int]) -> bool:
    """Whether the file's data read as `slots` hash slots and `items` items (see
    read_index_geometry); the header has at least one item."""
    begin_phy, end_phy, slot_count, index_count = header
    if index_count > items or slot_count > slots:
        return False
    base = 10 + slots

    def item(k: int) -> tuple[int, int, int]:
        at = base + 5 * k
        return int(words[at]), (int(words[at + 1]) << 32) | int(words[at + 2]), int(words[at + 4])

    first_hash, first_phy, first_prev = item(1)
    if first_phy != begin_phy or first_prev != 0:
        return False
    if item(index_count - 1)[1] != end_phy:
        return False
    if index_count < items and words[base + 5 * index_count:base + 5 * index_count + 5].any():
        return False
    seen: set[int] = set()
    for k in range(index_count - 1, max(0, index_count - 1 - _GEOMETRY_CHECKED_ITEMS), -1):
        key_hash, _, prev = item(k)
        if key_hash >= 1 << 31 or prev >= k:        # hashes are >= 0, chains go back
            return False
        slot = key_hash % slots
        if slot not in seen:
            seen.add(slot)
            head = int(words[10 + slot])
            # the slot's newest item; a put that crashed before its header count may be newer
            if head != k and not index_count <= head < items:
                return False
    return True


def detect_geometry(root: str | os.PathLike[str], commitlog: str | None = None, *,
                    hash_slots: int | None = None, index_num: int | None = None
                    ) -> dict[str, int]:
    """StoreConfig file sizes of an existing store, read from its files: the CommitLog segment
    size (the first segment's), the ConsumeQueue file size (the first ConsumeQueue file's that
    holds whole units) and the IndexFile geometry of its newest IndexFile (read_index_geometry;
    hash_slots / index_num, what the caller believes, are tried first). Kinds without files,
    or whose files fit no geometry, are left out (opening the store reports those files)."""
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
    believed = (hash_slots, index_num) if hash_slots is not None and index_num is not None else None
    for path in reversed(indexes):
        try:
            found["max_hash_slot_num"], found["max_index_num"] = read_index_geometry(path, [believed])
            break
        except StoreFormatError:
            continue
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
