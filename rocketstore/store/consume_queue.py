"""ConsumeQueue: per topic and queue id, 20-byte units locating each message in the CommitLog.

Logical offset n is at byte n * 20; files are named by their starting byte offset. Units are
written only by the dispatch thread; readers see units below the published write position.
"""
from __future__ import annotations

import logging
import os
from collections.abc import Callable

import numpy as np

from rocketstore._native import cq_ext
from rocketstore._native.consume_queue import write_units
from rocketstore.store.consume_queue_ext import MAX_ADDR, ConsumeQueueExt, is_ext_addr
from rocketstore.store.layout import (
    CONSUME_QUEUE_ALLOCATION_MAX,
    CONSUME_QUEUE_ALLOCATION_MIN,
    CONSUME_QUEUE_UNIT_SIZE,
)
from rocketstore.store.mapped_file_queue import MappedFileQueue

log = logging.getLogger(__name__)

UNIT_SIZE = CONSUME_QUEUE_UNIT_SIZE
UNIT_DTYPE = np.dtype([("offset", ">i8"), ("size", ">i4"), ("tags_code", ">i8")])
BLANK_UNIT_SIZE = 0x7FFFFFFF


class ConsumeQueue:
    def __init__(self, topic: str, queue_id: int, root_dir: str, file_size: int, *,
                 read_only: bool = False) -> None:
        if file_size <= 0 or file_size % UNIT_SIZE:
            raise ValueError(f"mapped_file_size_consume_queue must be a positive multiple of "
                             f"{UNIT_SIZE}, got {file_size}")
        self.topic = topic
        self.queue_id = queue_id
        self.file_size = file_size
        self.read_only = read_only
        self.queue = MappedFileQueue(os.path.join(root_dir, topic, str(queue_id)), file_size,
                                     read_only=read_only,
                                     allocation_chunk=CONSUME_QUEUE_ALLOCATION_MIN)
        self.max_physic_offset = -1     # end (offset + size) of the newest unit's record
        self.min_logic_offset = 0       # byte offset of the first valid unit
        # Read-only stores cannot rebuild a damaged queue in its files: units found in the
        # CommitLog stand in for them in memory (see recovery): `overlay` holds the units
        # from logical offset `overlay_start` on (past the files' valid end), `corrections`
        # single units whose file copy points at the wrong record.
        self.overlay_start = -1
        self.overlay: np.ndarray | None = None
        self.corrections: dict[int, tuple[int, int, int]] = {}
        self.rejected: list[int] = []   # put_units: indexes of the units it refused (gaps)
        #: put_units asks it whether a unit past the queue's end may leave a gap (the
        #: records in between are damage): gap_allowed(queue, phy, queue_offset) -> bool.
        #: None: gaps are allowed (no store around to judge).
        self.gap_allowed: Callable[[ConsumeQueue, int, int], bool] | None = None
        #: put_units tells it of a record past the queue's newest one that claims a queue
        #: offset the queue already has (its QUEUEOFFSET is damage; the record gets no
        #: unit): offset_taken(queue, phy, size, queue_offset). None: nobody to tell.
        self.offset_taken: Callable[[ConsumeQueue, int, int, int], None] | None = None
        #: the queue's extension (enableConsumeQueueExt): units written get an ext unit and
        #: its address as their tags code
        self.ext: ConsumeQueueExt | None = None
        #: writes the ext unit of a record: ext_unit_of(queue, phy, size, tags_code) -> the
        #: address (or anything above MAX_ADDR: the unit keeps its tags code)
        self.ext_unit_of: Callable[[ConsumeQueue, int, int, int], int] | None = None

    def __repr__(self) -> str:
        return (f"ConsumeQueue({self.topic!r}, {self.queue_id}, "
                f"min={self.min_offset}, max={self.max_offset})")

    # ---- lifecycle -------------------------------------------------------------------------
    def load(self) -> None:
        self.queue.load()
        if self.queue.files:
            self.min_logic_offset = self.queue.files[0].file_from_offset
        if self.ext is not None:
            self.ext.load()

    @property
    def damaged_from(self) -> int | None:
        """The first logical offset whose unit a file cut short or a missing file lost
        (load found it), or None."""
        holes = [at // UNIT_SIZE for at in self.queue.missing_from
                 if at // UNIT_SIZE >= self.min_offset]
        return min(holes) if holes else None

    def recover(self) -> None:
        """Find the last valid unit, scanning from the third-last file (RocketMQ recover()).
        Positions are set after it; what follows is a dirty tail and is dropped."""
        files = self.queue.files
        if not files:
            return
        index = max(0, len(files) - 3)
        end = files[index].file_from_offset
        max_phy = -1
        for mf in files[index:]:
            # past the file's first hole there is no unit (and on tmpfs reading a hole
            # would take space the disk may not have)
            units = _units_of(mf, min(mf.file_size, mf.allocated_position))
            valid = (units["offset"] >= 0) & (units["size"] > 0)
            count = len(units) if valid.all() else int(np.argmin(valid))
            end = mf.file_from_offset + count * UNIT_SIZE
            if count:
                last = units[count - 1]
                if last["size"] != BLANK_UNIT_SIZE:
                    max_phy = int(last["offset"]) + int(last["size"])
            if count < len(units):
                break
        self.max_physic_offset = max_phy
        for mf in files:
            if mf.file_from_offset + mf.file_size <= end:
                mf.wrote_position = mf.committed_position = mf.flushed_position = mf.file_size
        self.queue.truncate_dirty(end, zero_tail=not self.read_only)
        self.queue.flushed_where = end
        if self.ext is not None:
            self.ext.recover()
            self._truncate_ext()

    def _truncate_ext(self) -> None:
        """Drop ext units past the newest unit's (RocketMQ truncateByMaxAddress), all of them
        when no unit points into the extension."""
        if self.ext is None:
            return
        for mf in reversed(self.queue.files):
            units = _units_of(mf, mf.wrote_position)
            addrs = units["tags_code"][(units["size"] != BLANK_UNIT_SIZE)
                                       & (units["tags_code"] <= MAX_ADDR)]
            if len(addrs):
                self.ext.truncate_by_max_address(int(addrs[-1]))
                return
        self.ext.truncate_all()

    def check_end(self, unit_ok: Callable[[int, int, int, int], bool]) -> list[int]:
        """Drop the newest units whose record does not check out (unit_ok(queue_offset, phy,
        size, tags) False), so the queue ends at a unit that points at its record and
        max_physic_offset at a record's end. Returns the CommitLog offsets the dropped units
        pointed at (files are only changed when writable)."""
        dropped: list[int] = []
        while True:
            end = self.file_max_offset
            if end <= self.min_offset:
                break
            unit = self.get_unit(end - 1)
            if unit is None or unit[1] == BLANK_UNIT_SIZE or unit_ok(end - 1, *unit):
                break
            self._cut_file_units(end - 1)
            dropped.append(unit[0])
        if dropped:
            self._recompute_max_physic_offset()
        return dropped

    def cut_at(self, queue_offset: int) -> None:
        """Drop the units from queue_offset on (a writable queue zeroes them, so they are
        written again by dispatch), then recompute max_physic_offset."""
        self._cut_file_units(queue_offset)
        self._recompute_max_physic_offset()

    def _cut_file_units(self, queue_offset: int) -> None:
        cut = queue_offset * UNIT_SIZE
        for mf in self.queue.files:
            if mf.file_from_offset + mf.file_size <= cut:
                mf.wrote_position = mf.committed_position = mf.flushed_position = mf.file_size
        self.queue.truncate_dirty(cut, zero_tail=not self.read_only)
        self.queue.flushed_where = min(self.queue.flushed_where, cut)

    @property
    def file_max_offset(self) -> int:
        """The end of the units in the files (without the overlay)."""
        return self.queue.max_offset() // UNIT_SIZE

    def set_overlay(self, start: int, units: np.ndarray) -> None:
        """Serve the units from logical offset start on from `units` (read-only stores)."""
        self.overlay_start = start
        self.overlay = units

    def fix_unit(self, queue_offset: int, phy: int, size: int, tags: int) -> None:
        """The unit at queue_offset points at the wrong record: serve (phy, size, tags)
        instead; a writable queue rewrites it in its file too."""
        self.corrections[queue_offset] = (phy, size, tags)
        if self.read_only:
            return
        mf = self.queue.find_by_offset(queue_offset * UNIT_SIZE)
        if mf is None:
            return
        unit = np.zeros(1, UNIT_DTYPE)
        unit[0] = (phy, size, tags)
        mf.write_at(queue_offset * UNIT_SIZE - mf.file_from_offset, unit.tobytes())

    def correct_min_offset(self, min_commitlog_offset: int) -> None:
        """First unit whose message is still in the CommitLog (RocketMQ correctMinOffset),
        looked for from the first file on (units are in CommitLog order): a queue whose
        older files were not deleted yet (a crash between the CommitLog's deletion and the
        queues') still starts at its first unit that can be read."""
        files = self.queue.files
        if not files:
            return
        for mf in files:
            units = _units_of(mf, mf.read_position)
            ok = (units["offset"] >= min_commitlog_offset) & (units["size"] > 0) & (
                units["size"] != BLANK_UNIT_SIZE)
            if ok.any():
                self.min_logic_offset = mf.file_from_offset + int(np.argmax(ok)) * UNIT_SIZE
                return
            if mf.read_position < mf.file_size:     # the end of the queue
                self.min_logic_offset = mf.file_from_offset + len(units) * UNIT_SIZE
                return
        last = files[-1]
        self.min_logic_offset = last.file_from_offset + last.read_position

    # ---- writes (dispatch thread only) -----------------------------------------------------
    def put_units(self, phys: np.ndarray, sizes: np.ndarray, tags: np.ndarray,
                  queue_offsets: np.ndarray) -> int:
        """Append units for records in queue order; returns how many were written. A unit
        past the queue's end (units missing before it) is written only when gap_allowed
        says damage explains the gap; otherwise it is skipped (rejected holds its index)."""
        written = 0
        i, n = 0, len(phys)
        self.rejected = []
        if self.ext_unit_of is not None:
            tags = self._ext_tags(phys, sizes, tags)
        while i < n:
            qoff = int(queue_offsets[i])
            phy_end = int(phys[i]) + int(sizes[i])
            if phy_end > self.max_physic_offset and 0 <= qoff < self.file_max_offset:
                # a record after the queue's newest claims a queue offset it already has
                unit = self.get_unit(qoff)
                if unit is not None and unit[0] == int(phys[i]):
                    self.max_physic_offset = phy_end    # its own unit: the end was behind
                    continue
                if self.offset_taken is not None:
                    self.offset_taken(self, int(phys[i]), int(sizes[i]), qoff)
                self.rejected.append(i)
                i += 1
                continue
            allow_gap = False
            if int(phys[i]) + int(sizes[i]) > self.max_physic_offset and \
                    qoff > self.file_max_offset and (self.queue.files or qoff > 0):
                if self.gap_allowed is not None and not self.gap_allowed(self, int(phys[i]),
                                                                         qoff):
                    self.rejected.append(i)
                    i += 1
                    continue
                allow_gap = True
            expect = qoff * UNIT_SIZE
            last = self.queue.last_file()
            if last is None or expect >= last.file_from_offset + self.file_size:
                mf = self.queue.last_file_for_append(expect)
                if last is None and mf.file_from_offset < expect:
                    # first file of a queue that starts mid-stream (RocketMQ fillPreBlank)
                    self.min_logic_offset = expect
            else:
                mf = self.queue.find_by_offset(expect) or last
                if mf is not last:      # a unit before the last file: already built
                    i += 1
                    continue
            self._make_room(mf, int(queue_offsets[n - 1]))
            before = mf.wrote_position
            if allow_gap:       # this one unit may leave a gap; the rest are judged again
                nxt, self.max_physic_offset, _skipped, _blanks = write_units(
                    mf, phys[:i + 1], sizes[:i + 1], tags[:i + 1], queue_offsets[:i + 1], i,
                    self.max_physic_offset, True)
                written += (mf.wrote_position - before) // UNIT_SIZE
                if nxt > i:
                    i = nxt
                    continue
                before = mf.wrote_position
            i, self.max_physic_offset, _skipped, _blanks = write_units(
                mf, phys, sizes, tags, queue_offsets, i, self.max_physic_offset)
            written += (mf.wrote_position - before) // UNIT_SIZE
            if i < n and mf.wrote_position < self.file_size and \
                    int(queue_offsets[i]) * UNIT_SIZE >= mf.file_from_offset + self.file_size:
                # next unit belongs to a later file: close this one with blank units
                self._fill_to_end(mf)
        return written

    def _ext_tags(self, phys: np.ndarray, sizes: np.ndarray, tags: np.ndarray) -> np.ndarray:
        """tags with the ext address of each unit still to be written (RocketMQ
        putMessagePositionInfoWrapper: the CqExtUnit's address replaces the tags code)."""
        out = np.array(tags, np.int64)
        assert self.ext_unit_of is not None
        for i in range(len(out)):
            phy, size, code = int(phys[i]), int(sizes[i]), int(out[i])
            if phy + size > self.max_physic_offset and not is_ext_addr(code):
                address = self.ext_unit_of(self, phy, size, code)
                if is_ext_addr(address):
                    out[i] = address
        return out

    def real_tags_codes(self, units: np.ndarray) -> np.ndarray:
        """The units' tags codes, ext addresses resolved through the extension (an ext unit
        that cannot be read leaves its address)."""
        codes = np.ascontiguousarray(units["tags_code"], np.int64)
        if self.ext is None or not len(codes) or not (codes <= MAX_ADDR).any():
            return codes
        out = np.empty(len(codes), np.int64)
        state = np.empty(len(codes), np.uint8)
        cq_ext.resolve(np.ascontiguousarray(units["offset"], np.int64), codes,
                       self.ext.queue.files, self.ext.file_size, None, 0, 0, out, state)
        return np.where(state == cq_ext.MISSING, codes, out)

    def _make_room(self, mf, last_queue_offset: int) -> None:
        """Blocks on disk for mf's units up to last_queue_offset's (OSError when the disk has
        no room: the units stay unwritten and dispatch tries again later). The step grows
        with the file (CONSUME_QUEUE_ALLOCATION_MIN..MAX)."""
        need = min(self.file_size, (last_queue_offset + 1) * UNIT_SIZE - mf.file_from_offset)
        have = mf.allocated_position
        if need > have:
            mf.allocation_chunk = min(max(have, CONSUME_QUEUE_ALLOCATION_MIN),
                                      CONSUME_QUEUE_ALLOCATION_MAX)
            mf.allocate_to(need)

    def _fill_to_end(self, mf) -> None:
        count = (self.file_size - mf.wrote_position) // UNIT_SIZE
        if count:
            blank = np.zeros(count, UNIT_DTYPE)
            blank["size"] = BLANK_UNIT_SIZE
            mf.append(blank.tobytes())

    def truncate_dirty(self, phy_offset: int) -> None:
        """Drop units whose message starts at or after phy_offset (RocketMQ
        truncateDirtyLogicFiles), then recompute max_physic_offset."""
        files = self.queue.files
        cut = None
        for mf in reversed(files):
            units = _units_of(mf, mf.wrote_position)
            if not len(units):
                cut = mf.file_from_offset
                continue
            after = units["offset"] >= phy_offset
            real = units["size"] != BLANK_UNIT_SIZE
            if not (after & real).any():
                break
            first_after = int(np.argmax(after & real))
            cut = mf.file_from_offset + first_after * UNIT_SIZE
            if first_after > 0:
                break
        if cut is not None:
            self.queue.truncate_dirty(cut, zero_tail=not self.read_only)
            self._truncate_ext()
        self._recompute_max_physic_offset()

    def _recompute_max_physic_offset(self) -> None:
        self.max_physic_offset = -1
        for mf in reversed(self.queue.files):
            units = _units_of(mf, mf.wrote_position)
            real = units[units["size"] != BLANK_UNIT_SIZE]
            if len(real):
                self.max_physic_offset = int(real[-1]["offset"]) + int(real[-1]["size"])
                return

    def expired_files(self, min_commitlog_offset: int) -> list:
        """The oldest files whose last unit points below min_commitlog_offset, never the
        last file (RocketMQ deleteExpiredFileByOffset's choice)."""
        doomed = []
        for mf in self.queue.files[:-1]:
            units = _units_of(mf, mf.wrote_position)
            if len(units) and int(units[-1]["offset"]) < min_commitlog_offset:
                doomed.append(mf)
            else:
                break
        return doomed

    def delete_expired(self, min_commitlog_offset: int, interval_forcibly_ms: float = 1000,
                       now_ms: float = -1) -> int:
        """Delete files whose last unit points below min_commitlog_offset (a file still read
        waits, see MappedFileQueue.delete_before), then correct the minimum offset; returns
        the number of files deleted."""
        doomed = self.expired_files(min_commitlog_offset)
        deleted = 0
        if doomed:
            end = doomed[-1].file_from_offset + self.file_size
            deleted = self.queue.delete_before(end, interval_forcibly_ms, now_ms)
        self.correct_min_offset(min_commitlog_offset)
        if self.ext is not None:
            unit = self.get_unit(self.min_offset)
            if unit is not None and is_ext_addr(unit[2]):
                self.ext.truncate_by_min_address(unit[2])
        return deleted

    def destroy(self) -> None:
        """Delete every file of the queue and its directory (a deleted topic)."""
        if self.ext is not None:
            self.ext.destroy()
        for mf in self.queue.files:
            mf.destroy(0)
        self.queue.close()
        try:
            os.rmdir(self.queue.store_path)
        except OSError:
            pass

    def flush(self, least_pages: int = 0) -> bool:
        if self.ext is not None:
            self.ext.flush(least_pages)
        return self.queue.flush(least_pages)

    def close(self) -> None:
        if self.ext is not None:
            self.ext.close()
        self.queue.close()

    # ---- reads -----------------------------------------------------------------------------
    @property
    def min_offset(self) -> int:
        return self.min_logic_offset // UNIT_SIZE

    @property
    def max_offset(self) -> int:
        overlay = self.overlay
        if overlay is not None:
            return self.overlay_start + len(overlay)
        return self.queue.max_offset() // UNIT_SIZE

    def read_units(self, offset: int, max_count: int) -> np.ndarray | None:
        """Up to max_count units from logical offset, within one file (a zero-copy view that
        pins the file, or a copy where corrections apply); None when offset is not
        readable."""
        overlay = self.overlay
        if overlay is not None and offset >= self.overlay_start:
            units = overlay[offset - self.overlay_start:offset - self.overlay_start + max_count]
            return units if len(units) else None
        if overlay is not None:
            max_count = min(max_count, self.overlay_start - offset)
        view = self.queue.read_view(offset * UNIT_SIZE, max_count * UNIT_SIZE)
        if view is None:
            return None
        units = np.frombuffer(view[:len(view) - len(view) % UNIT_SIZE], UNIT_DTYPE)
        if self.corrections:
            fixes = [(q, u) for q, u in self.corrections.items()
                     if offset <= q < offset + len(units)]
            if fixes:
                units = units.copy()
                for q, u in fixes:
                    units[q - offset] = u
        return units

    def units_between(self, start: int, end: int) -> np.ndarray:
        """The units [start, end) as one array (a copy across files; shorter when the queue
        ends before end)."""
        parts = []
        at = start
        while at < end:
            units = self.read_units(at, end - at)
            if units is None or not len(units):
                break
            parts.append(units)
            at += len(units)
        return np.concatenate(parts) if parts else np.zeros(0, UNIT_DTYPE)

    def get_unit(self, offset: int) -> tuple[int, int, int] | None:
        """(commitlog offset, size, tags code) of the unit at logical offset, or None."""
        if offset < self.min_offset:
            return None
        units = self.read_units(offset, 1)
        if units is None or not len(units):
            return None
        u = units[0]
        return int(u["offset"]), int(u["size"]), int(u["tags_code"])

    def roll_next_file(self, offset: int) -> int:
        """First logical offset of the file after the one holding offset."""
        per_file = self.file_size // UNIT_SIZE
        return offset + per_file - offset % per_file

    def get_offset_by_time(self, timestamp: int,
                           store_time_of: Callable[[int, int], int]) -> int:
        """Logical offset of the message stored nearest to timestamp (RocketMQ
        getOffsetInQueueByTime), reading each probe's store time from the CommitLog."""
        def time_at(offset: int) -> int:
            unit = self.get_unit(offset)
            return store_time_of(unit[0], unit[1]) if unit is not None else -1
        return offset_by_time(self.min_offset, self.max_offset, timestamp, time_at)

    def total_bytes(self) -> int:
        return self.queue.total_bytes()


def _units_of(mf, length: int) -> np.ndarray:
    """The units in [0, length) of a file, as a structured array (a pinned view)."""
    count = length // UNIT_SIZE
    if count <= 0:
        return np.zeros(0, UNIT_DTYPE)
    return np.frombuffer(mf.view(0, count * UNIT_SIZE), UNIT_DTYPE)


def offset_by_time(min_offset: int, max_offset: int, timestamp: int,
                   time_at: Callable[[int], int]) -> int:
    """The offset in [min_offset, max_offset) of the message stored nearest to timestamp
    (RocketMQ getOffsetInQueueByTime: an exact hit, the first of equal ones, else the closer
    neighbour), by binary search; ``time_at(offset)`` is a message's store time, -1 when it
    is gone (the search looks later). 0 for an empty queue."""
    lo, hi = min_offset, max_offset - 1
    if hi < lo:
        return 0
    left_off = right_off = -1
    left_ts = right_ts = -1
    while lo <= hi:
        mid = (lo + hi) // 2
        ts = time_at(mid)
        if ts < 0:          # message already removed: look later
            lo = mid + 1
            continue
        if ts == timestamp:
            while mid > min_offset and time_at(mid - 1) == timestamp:
                mid -= 1
            return mid
        if ts < timestamp:
            left_off, left_ts = mid, ts
            lo = mid + 1
        else:
            right_off, right_ts = mid, ts
            hi = mid - 1
    if left_off < 0:
        return right_off if right_off >= 0 else min_offset
    if right_off < 0:
        return left_off
    return right_off if abs(timestamp - left_ts) > abs(timestamp - right_ts) else left_off
