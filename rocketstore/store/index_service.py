"""IndexService: the key index over the CommitLog (RocketMQ 4.9's IndexService).

Index files live in ``<root>/index/``, named by their creation time ``yyyyMMddHHmmssSSS``
(local time), oldest first. The reput thread calls :meth:`IndexService.dispatch` with each
batch of new records; the native ``build_index`` puts their keys, and when a file fills up the
next one is created, the full one is flushed (in the background, as RocketMQ does) and
:attr:`IndexService.on_file_full` is told its end timestamp (the checkpoint's
indexMsgTimestamp).

Threads: one writer (the reput thread) and any number of readers. Mutations of the file list
(dispatch rolling a file, delete_expired, truncate, shutdown) happen under a lock and publish a
new tuple (copy-on-write); a query reads the tuple it finds, holds each file while it walks it,
and never sees a half-written item because a put writes the item, then the slot, then the
header count.

:meth:`IndexService.query_offsets` is RocketMQ's queryOffset: raw candidates, including other
keys whose hashes collide and duplicates. :meth:`IndexService.query` checks every candidate
with a caller's ``verify(phy_offset)`` (the store compares the stored record's topic, keys and
store time) and keeps walking past rejected ones, so two colliding keys never return each
other's messages (RocketMQ issue 3613) and up to ``max_num`` true matches come back.
"""

from __future__ import annotations

import datetime
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from rocketstore._native.index_build import build_index
from rocketstore._native.index_file import IndexFile, IndexFileCorruptError, query_files
from rocketstore._native.index_keys import index_key_hash, record_index_key_hashes
from rocketstore._native.mapped_file import MappedFile
from rocketstore.config import StoreConfig
from rocketstore.store.clock import Clock, SystemClock
from rocketstore.store.layout import (
    INDEX_DIR,
    IndexGeometryError,
    is_index_file_name,
    read_index_geometry,
)
from rocketstore.store.mapped_file_queue import remove_creating_leftovers

__all__ = ["IndexBatch", "IndexFileCorruptError", "IndexHole", "IndexService", "index_file_name"]

log = logging.getLogger(__name__)

#: Store timestamps are kept in whole seconds in an item: an item's time is up to 999 ms
#: before the record's. query() widens its window by this much; verify() checks exactly.
TIME_GRANULARITY_MS = 1000
_LONG_MAX = 2**63 - 1


@dataclass(frozen=True)
class IndexHole:
    """The CommitLog range [start, end] (end None: to the log's end; start -1: from its
    start) whose keys were in the damaged index file `name`."""

    name: str
    start: int
    end: int | None
    reason: str


class IndexBatch(Protocol):
    """What dispatch needs of a batch (rocketstore._native.dispatch.DispatchBatch has it)."""

    @property
    def mapped_file(self) -> MappedFile: ...

    @property
    def positions(self) -> Any: ...

    @property
    def phy_offsets(self) -> Any: ...


def index_file_name(ms: int) -> str:
    """UtilAll.timeMillisToHumanString: ``yyyyMMddHHmmssSSS`` in local time."""
    t = time.localtime(ms // 1000)
    return time.strftime("%Y%m%d%H%M%S", t) + f"{ms % 1000:03d}"


def _next_name(name: str) -> str:
    """The file name one millisecond after `name` (calendar arithmetic on the digits)."""
    try:
        t = datetime.datetime.strptime(name[:14], "%Y%m%d%H%M%S")
        t += datetime.timedelta(milliseconds=int(name[14:]) + 1)
        return t.strftime("%Y%m%d%H%M%S") + f"{t.microsecond // 1000:03d}"
    except ValueError:  # not a date (a foreign name): any larger 17-digit name will do
        return str(int(name) + 1).zfill(17)


def _destroy_now(f: IndexFile) -> None:
    """Delete f now: a query still reading it is detached (it reads zeros, never faults)."""
    if not f.destroy(0):
        f.destroy(0)


def _check_text(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be str, got {type(value).__name__}")
    return value


class IndexService:
    """The index files of one store and the operations RocketMQ's IndexService has."""

    def __init__(self, config: StoreConfig, root: str | os.PathLike[str], read_only: bool = False,
                 clock: Clock | None = None):
        """clock: where wall-clock time is read (the names of new files); the system's by
        default."""
        self.config = config
        self.clock: Clock = clock or SystemClock()
        self.root = os.fspath(root)
        self.store_path = os.path.join(self.root, INDEX_DIR)
        self.read_only = read_only
        self.hash_slot_num = config.max_hash_slot_num
        self.index_num = config.max_index_num
        if self.index_num < 2:
            raise ValueError(f"max_index_num must be >= 2 (item 0 is never used), "
                             f"got {self.index_num}")
        #: Called with a full file's endTimestamp once it is flushed (the store records it
        #: as the checkpoint's indexMsgTimestamp). May run on a background thread.
        self.on_file_full: Callable[[int], None] | None = None
        #: Flush full files on a background thread (RocketMQ's FlushIndexFileThread).
        self.async_flush_full = True
        #: ms a destroyed file waits for readers before it is detached (RocketMQ: 3000).
        self.destroy_interval_ms = 3000.0
        self._files: tuple[IndexFile, ...] = ()
        #: CommitLog ranges whose index file is damaged (see load): queries over them read
        #: the CommitLog until a writer rebuilds them
        self.holes: list[IndexHole] = []
        self._checked: set[int] = set()     # ids of files IndexFile.check() passed
        #: told (name, why) when a query finds a file damaged (the store keeps it on disk)
        self.on_damaged: Callable[[str, str], None] | None = None
        #: IndexFiles found damaged (name -> why) and what was done: rebuilt from the
        #: CommitLog (writable), or queries over their range go to the CommitLog (read-only)
        self.damaged_files: dict[str, str] = {}
        self._lock = threading.RLock()
        self._flushers: list[threading.Thread] = []

    # ---- files -------------------------------------------------------------------------------
    @property
    def files(self) -> tuple[IndexFile, ...]:
        """The index files, oldest first (a snapshot)."""
        return self._files

    def file_names(self) -> list[str]:
        """Names of the index files on disk (loaded or not), oldest first."""
        return self._file_names()

    def _file_names(self) -> list[str]:
        try:
            names = os.listdir(self.store_path)
        except FileNotFoundError:
            return []
        return sorted(n for n in names if is_index_file_name(n)
                      and os.path.isfile(os.path.join(self.store_path, n)))

    def load(self, last_exit_ok: bool, checkpoint_index_ts: int = 0,
             *, drop_corrupt: bool = False, tolerate_damage: bool = False,
             damaged: dict[str, str] | None = None) -> None:
        """IndexService.load: open every index file, oldest first. After an unclean exit, a
        file whose endTimestamp is newer than the checkpoint's index timestamp is dropped (its
        records get re-dispatched). A corrupt file (header out of range, wrong size) raises
        IndexFileCorruptError, or with drop_corrupt is deleted (logged) so its records can be
        indexed again.

        tolerate_damage (what a store does): a corrupt file, one named in `damaged` (found
        damaged by an earlier run) and, when writable, a newest file whose slots and items
        fail IndexFile.check() are damage: their CommitLog ranges become ``holes``. A writer
        deletes such files (rebuild_holes() indexes their ranges again; the newest one's is
        dispatched again); a reader leaves them and answers queries over their ranges from
        the CommitLog."""
        damaged = dict(damaged or {})
        with self._lock:
            if self._files:
                raise RuntimeError("index files are already loaded")
            if not self.read_only and os.path.isdir(self.store_path):
                remove_creating_leftovers(self.store_path)
            loaded: list[IndexFile] = []
            bad: list[tuple[str, str]] = []
            try:
                for name in self._file_names():
                    path = os.path.join(self.store_path, name)
                    try:
                        f = self._load_file(path, loaded[-1] if loaded else None)
                    except IndexFileCorruptError as exc:
                        if tolerate_damage:
                            bad.append((name, exc.reason))
                            if not self.read_only:
                                os.remove(path)
                            continue
                        if not drop_corrupt or self.read_only:
                            raise
                        log.error("dropping corrupt index file %s: %s", path, exc.reason)
                        os.remove(path)
                        continue
                    if tolerate_damage and name in damaged:
                        bad.append((name, damaged[name]))
                        self._drop_loaded(f)
                        continue
                    if f.index_count <= 1 and not self.read_only:
                        # no item: a file created just before a crash (its header never
                        # written); as the newest file its endPhyOffset 0 would re-index
                        # everything replayed. Nothing is lost by dropping it.
                        log.info("index file %s holds no item: dropped", path)
                        f.destroy(0)
                        continue
                    if not last_exit_ok and f.end_timestamp > checkpoint_index_ts:
                        log.info("index file %s ends after the checkpoint (%d > %d): dropped",
                                 path, f.end_timestamp, checkpoint_index_ts)
                        if self.read_only:
                            f.close()
                        else:
                            f.destroy(0)
                        continue
                    loaded.append(f)
                if tolerate_damage and not self.read_only and loaded:
                    # the file dispatch goes on writing into is checked in full now
                    why = loaded[-1].check()
                    if why is not None:
                        newest = loaded.pop()
                        bad.append((os.path.basename(newest.file_name), why))
                        self._drop_loaded(newest)
            except BaseException:
                for f in loaded:
                    f.close()
                raise
            self._files = tuple(loaded)
            self._checked = {id(loaded[-1])} if loaded and not self.read_only else set()
            for name, why in bad:
                self._add_hole(name, why)

    def _load_file(self, path: str, previous: IndexFile | None) -> IndexFile:
        """The IndexFile at path with the geometry it was written with (read from its data:
        the config's, or the file before it's, is tried first; new files get the config's,
        as RocketMQ's, while an old file keeps its own). IndexFileCorruptError when its size
        or data fit no geometry."""
        preferred = [(self.hash_slot_num, self.index_num)]
        if previous is not None:
            preferred.append((previous.hash_slot_num, previous.index_num))
        try:
            slots, items = read_index_geometry(path, preferred)
        except IndexGeometryError as exc:
            raise IndexFileCorruptError(path, exc.reason) from None
        return IndexFile.load(path, slots, items, read_only=self.read_only)

    def _drop_loaded(self, f: IndexFile) -> None:
        if self.read_only:
            f.close()
        else:
            f.destroy(0)

    def _add_hole(self, name: str, reason: str) -> IndexHole:
        """Record the CommitLog range of a damaged file `name` that is not (or no longer) in
        the file list: from the end of the good file before it to the start of the one after
        it (None: the log's end)."""
        before = [f for f in self._files if os.path.basename(f.file_name) < name]
        after = [f for f in self._files if os.path.basename(f.file_name) > name]
        hole = IndexHole(name, before[-1].end_phy_offset if before else -1,
                         after[0].begin_phy_offset if after else None, reason)
        self.holes = sorted([*self.holes, hole], key=lambda h: h.name)
        self.damaged_files[name] = reason
        log.error("index file %s is damaged (%s): %s", os.path.join(self.store_path, name),
                  reason, "queries over its CommitLog range read the CommitLog"
                  if self.read_only else "its range is indexed again")
        return hole

    def rebuild_holes(self, batches: Callable[[int, int | None], Any]) -> list[str]:
        """Index the CommitLog range of every damaged file between good ones again, into a
        new file of the same name (a writer, after recovery; the range after the newest good
        file is dispatch's), with exactly the items the file had: the keys of the record at
        each end that its neighbours hold are left to them. batches(start, end) yields the
        DispatchBatches of the records that start in [start, end) (end None: the log's
        end). Returns what was done, one line per file."""
        self._check_writable()
        done: list[str] = []
        with self._lock:
            for hole in list(self.holes):
                if hole.end is None:
                    done.append(f"{hole.name}: indexed again by dispatch ({hole.reason})")
                    self.holes.remove(hole)
                    continue
                made = self._rebuild(hole, batches)
                self._files = tuple(sorted((*self._files, *made),
                                           key=lambda g: os.path.basename(g.file_name)))
                self._checked.update(id(g) for g in made)
                self.holes.remove(hole)
                self.damaged_files.pop(hole.name, None)
                start = max(hole.start, 0)
                done.append(f"{hole.name}: rebuilt from CommitLog [{start}, {hole.end}] "
                            f"({hole.reason})")
                log.error("index file %s rebuilt from the CommitLog range [%d, %d]",
                          hole.name, start, hole.end)
        return done

    def _rebuild(self, hole: IndexHole, batches: Callable[[int, int | None], Any]
                 ) -> list[IndexFile]:
        assert hole.end is not None
        before = [f for f in self._files if os.path.basename(f.file_name) < hole.name]
        after = [f for f in self._files if os.path.basename(f.file_name) > hole.name]
        prev = before[-1] if before else None
        start = max(hole.start, 0)
        # the first record's keys already in prev, the last record's in the next file
        first_keys = prev.trailing_items(start) if prev is not None and \
            prev.end_phy_offset == start else 0
        next_keys = 0
        if after:
            nxt = after[0]
            while next_keys + 1 < nxt.index_count and \
                    nxt.read_item(next_keys + 1)[1] == hole.end:
                next_keys += 1
        made = [IndexFile.create(os.path.join(self.store_path, hole.name),
                                 self.hash_slot_num, self.index_num,
                                 prev.end_phy_offset if prev is not None else 0,
                                 prev.end_timestamp if prev is not None else 0)]
        limit = os.path.basename(after[0].file_name) if after else None

        def roll() -> bool:
            name = _next_name(os.path.basename(made[-1].file_name))
            if limit is not None and name >= limit:
                log.error("index file %s: the rebuilt range does not fit before %s; the rest "
                          "of it is not indexed", hole.name, limit)
                return False
            made.append(IndexFile.create(os.path.join(self.store_path, name),
                                         self.hash_slot_num, self.index_num,
                                         made[-1].end_phy_offset, made[-1].end_timestamp))
            return True

        key_start = first_keys
        for batch in batches(start, hole.end + 1):
            positions = np.ascontiguousarray(batch.positions, dtype=np.int64)
            phys = np.asarray(batch.phy_offsets)
            inner = positions[phys < hole.end]
            nxt_i, nk = build_index(made[-1], batch.mapped_file, inner, 0, key_start)
            while nxt_i < len(inner):
                if not roll():
                    return made
                nxt_i, nk = build_index(made[-1], batch.mapped_file, inner, nxt_i, nk)
            key_start = 0
            for i in np.flatnonzero(phys == hole.end).tolist():
                # the record the next file starts with: only the keys it does not hold
                pos = int(positions[i])
                hashes = record_index_key_hashes(batch.mapped_file, pos)
                ts = int(batch.store_timestamps[i])
                for h in hashes[first_keys if hole.end == start else 0:
                                len(hashes) - next_keys]:
                    while not made[-1].put_hash(h, hole.end, ts):
                        if not roll():
                            return made
        for g in made:
            g.flush()
        return made

    def _new_file(self, prev: IndexFile | None) -> IndexFile:
        """getAndCreateLastIndexFile: a file named by now (strictly after the newest name, so
        two files made in one millisecond never collide), starting where prev ended."""
        os.makedirs(self.store_path, exist_ok=True)
        last = os.path.basename(self._files[-1].file_name) if self._files else ""
        name = index_file_name(self.clock.wall_ms())
        while name <= last or os.path.exists(os.path.join(self.store_path, name)):
            name = _next_name(max(name, last))
        end_phy = prev.end_phy_offset if prev is not None else 0
        end_ts = prev.end_timestamp if prev is not None else 0
        f = IndexFile.create(os.path.join(self.store_path, name), self.hash_slot_num,
                             self.index_num, end_phy, end_ts)
        self._files = (*self._files, f)
        return f

    def _flush_full(self, f: IndexFile) -> None:
        """IndexService.flush(f): msync, then report its endTimestamp when it is full."""
        try:
            f.flush()
        except Exception:  # noqa: BLE001 - logged; the file is flushed again at shutdown
            log.exception("flush of index file %s failed", f.file_name)
            return
        if f.is_write_full and self.on_file_full is not None:
            self.on_file_full(f.end_timestamp)

    def _schedule_flush(self, f: IndexFile) -> None:
        if not self.async_flush_full:
            self._flush_full(f)
            return
        self._flushers = [t for t in self._flushers if t.is_alive()]
        t = threading.Thread(target=self._flush_full, args=(f,), name="FlushIndexFileThread",
                             daemon=True)
        self._flushers.append(t)
        t.start()

    def _wait_flushers(self) -> None:
        flushers, self._flushers = self._flushers, []
        for t in flushers:
            t.join()

    # ---- dispatch ----------------------------------------------------------------------------
    def writable_file(self) -> tuple[IndexFile, int, int]:
        """The file new keys go to (created when there is none), with where the native
        dispatch resumes: (file, key_start, key_start_phy), key_start being the keys of the
        record at key_start_phy (the newest indexed one) already in the index."""
        if self.read_only:
            raise PermissionError("the index service is read-only")
        with self._lock:
            f = self._files[-1] if self._files else self._new_file(None)
            end_phy = f.end_phy_offset
            return f, self._already_put(end_phy) if end_phy > 0 else 0, end_phy

    def roll(self, full: IndexFile) -> IndexFile:
        """The file to go on with after a put was refused: the same one once it has blocks
        for its next items (make_room; OSError when the disk has no room), else the next
        file after a full one (which is flushed in the background)."""
        with self._lock:
            if self._files and self._files[-1] is not full:
                return self._files[-1]
            if full.needs_room:
                full.make_room()
                return full
            if full.index_count <= 1:       # a fresh file took nothing: can not happen
                raise RuntimeError(f"index file {full.file_name} accepts no item")
            f = self._new_file(full)
            self._schedule_flush(full)
            return f

    def _already_put(self, phy: int) -> int:
        """Keys of the record at phy already in the index (it is the newest indexed record):
        the trailing items with that offset, across files when its keys were split."""
        total = 0
        for f in reversed(self._files):
            k = f.trailing_items(phy)
            total += k
            if k < f.index_count - 1 or f.begin_phy_offset != phy:
                break
        return total

    def dispatch(self, batch: IndexBatch) -> None:
        """The dispatcher hook (CommitLogDispatcherBuildIndex): index a batch of records."""
        if not self.config.message_index_enable:
            return
        if self.read_only:
            raise PermissionError("the index service is read-only")
        positions = np.ascontiguousarray(batch.positions, dtype=np.int64)
        n = len(positions)
        if n == 0:
            return
        mf = batch.mapped_file
        with self._lock:
            f = self._files[-1] if self._files else None
            start = key_start = 0
            if f is not None:
                # Re-dispatch (recovery): records below the newest indexed offset are skipped
                # by build_index; the newest one resumes after the keys it already has.
                end_phy = f.end_phy_offset
                phys = getattr(batch, "phy_offsets", None)
                phys = (np.asarray(phys, dtype=np.int64) if phys is not None
                        else positions + mf.file_from_offset)
                j = int(np.searchsorted(phys, end_phy, side="left"))
                if j < n and phys[j] == end_phy:
                    start, key_start = j, self._already_put(end_phy)
                else:
                    start = j
            if f is None:
                f = self._new_file(None)
            while start < n:
                nxt, nk = build_index(f, mf, positions, start, key_start)
                if nxt >= n:
                    break
                if f.needs_room:            # blocks for the next items first (OSError: none)
                    f.make_room()
                    start, key_start = nxt, nk
                    continue
                if f.index_count <= 1:      # a fresh file took nothing: can not happen
                    raise RuntimeError(f"index file {f.file_name} accepts no item")
                full = f
                f = self._new_file(full)
                self._schedule_flush(full)
                start, key_start = nxt, nk

    # ---- queries -----------------------------------------------------------------------------
    def _cap(self, max_num: int) -> int:
        if not isinstance(max_num, int):
            raise TypeError(f"max_num must be int, got {type(max_num).__name__}")
        return min(max_num, self.config.max_msgs_num_batch)

    def query_offsets(self, topic: str, key: str, max_num: int, begin: int, end: int
                      ) -> list[int]:
        """IndexService.queryOffset: CommitLog offsets indexed under topic#key with an index
        time in [begin, end], newest first, at most min(max_num, max_msgs_num_batch). Raw: may
        include records of colliding keys and duplicates (DefaultMessageStore.queryMessage
        sorts this list ascending)."""
        _check_text("topic", topic)
        _check_text("key", key)
        return query_files(self._files, f"{topic}#{key}", self._cap(max_num), begin, end)

    def query(self, topic: str, key: str, max_num: int, begin: int, end: int,
              verify: Callable[[int], bool]) -> list[int]:
        """Offsets of records that really carry topic#key: each candidate is passed to
        verify(phy_offset) (the store checks the stored record's topic, keys and store time
        against [begin, end]); rejected ones are skipped and the walk goes on, so up to
        min(max_num, max_msgs_num_batch) verified offsets come back, newest first, each once.
        The index window starts 999 ms early (items keep whole seconds)."""
        _check_text("topic", topic)
        _check_text("key", key)
        max_num = self._cap(max_num)
        out: list[int] = []
        if max_num <= 0:
            return out
        wbegin = max(begin - (TIME_GRANULARITY_MS - 1), -(2**63))
        key_hash = index_key_hash(f"{topic}#{key}")
        seen: set[int] = set()
        checked = self._checked
        for f in reversed(self._files):
            if id(f) not in checked and not self._passes_check(f):
                continue
            if f.is_time_matched(wbegin, end):
                item = -1
                while len(out) < max_num:
                    cands, item = f.walk(key_hash, item, max_num - len(out), wbegin, end)
                    for phy in cands:
                        if phy not in seen:
                            seen.add(phy)
                            if verify(phy):
                                out.append(phy)
                    if item == 0:
                        break
            if f.begin_timestamp < wbegin or len(out) >= max_num:
                break
        return out

    def _passes_check(self, f: IndexFile) -> bool:
        """IndexFile.check() once per file, at its first query (files are checked lazily: a
        full check reads the whole file). A damaged file leaves the list; its range becomes
        a hole that queries read from the CommitLog."""
        if id(f) in self._checked:
            return True
        why = f.check()
        if why is None:
            self._checked.add(id(f))
            return True
        name = os.path.basename(f.file_name)
        with self._lock:
            if f in self._files:
                self._files = tuple(g for g in self._files if g is not f)
                self._add_hole(name, why)
                f.close()       # unmapped once the queries walking it let go
        if self.on_damaged is not None:
            self.on_damaged(name, why)
        return False

    def index_last_update(self) -> tuple[int, int]:
        """(endTimestamp, endPhyOffset) of the newest file (QueryOffsetResult's
        indexLastUpdateTimestamp / indexLastUpdatePhyoffset); (0, 0) without files."""
        files = self._files
        if not files:
            return (0, 0)
        return (files[-1].end_timestamp, files[-1].end_phy_offset)

    # ---- maintenance -------------------------------------------------------------------------
    def _check_writable(self) -> None:
        if self.read_only:
            raise PermissionError("the index service is read-only")

    def delete_expired(self, min_phy_offset: int) -> int:
        """IndexService.deleteExpiredFile: delete the oldest files whose endPhyOffset <
        min_phy_offset (never the newest one). Returns how many were deleted; a file still
        read by a query stays listed until a later call."""
        self._check_writable()
        with self._lock:
            files = self._files
            doomed: list[IndexFile] = []
            for f in files[:-1]:
                if f.end_phy_offset < min_phy_offset:
                    doomed.append(f)
                else:
                    break
            gone = [f for f in doomed if f.destroy(self.destroy_interval_ms)]
            if gone:
                gone_ids = {id(f) for f in gone}
                self._files = tuple(f for f in files if id(f) not in gone_ids)
            return len(gone)

    def truncate(self, phy_offset: int) -> None:
        """Remove every index item of a record at or after phy_offset (the CommitLog was
        truncated there): newer files are deleted, the one holding the cut is cut."""
        self._check_writable()
        with self._lock:
            self._wait_flushers()
            files = list(self._files)
            while files:
                f = files[-1]
                f.truncate(phy_offset)
                if f.index_count > 1:
                    break
                files.pop()
                self._files = tuple(files)
                _destroy_now(f)
            self._files = tuple(files)

    def flush(self) -> None:
        """Wait for background flushes of full files, then flush the newest file."""
        with self._lock:
            self._wait_flushers()
            if self._files and not self.read_only:
                self._files[-1].flush()

    def shutdown(self) -> None:
        """Flush and close every file (IndexService.shutdown)."""
        with self._lock:
            self._wait_flushers()
            files, self._files = self._files, ()
            for f in files:
                f.close()

    def destroy(self) -> None:
        """Delete every index file (IndexService.destroy)."""
        self._check_writable()
        with self._lock:
            self._wait_flushers()
            files, self._files = self._files, ()
            for f in files:
                _destroy_now(f)
