"""verify: check every byte of a store that can be checked (``rocketstore verify PATH``).

Recovery walks the last CommitLog files only (RocketMQ's rule); verify walks all of them:
every record (magic, sizes, the header fields the CRC does not cover, PHYSICALOFFSET, body
CRC), every ConsumeQueue unit against the record it points at (and every record against
its unit), every IndexFile (header, the chains of its slots and items, every item against
the record it points at and that record's keys), the checkpoint and the JSON files under
config/. It opens the store read-only and changes nothing.
"""
from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rocketstore._native import dispatch
from rocketstore._native.index_file import IndexFile, IndexFileCorruptError
from rocketstore._native.index_keys import record_index_key_hashes
from rocketstore.common.fastjson import loads_fastjson
from rocketstore.common.record import TRANSACTION_TYPE_MASK, SysFlag
from rocketstore.common.text import is_ascii_int
from rocketstore.config import StoreConfig
from rocketstore.store.consume_queue import BLANK_UNIT_SIZE, UNIT_DTYPE, ConsumeQueue
from rocketstore.store.damage import DamagedRange
from rocketstore.store.layout import (
    INDEX_HEADER_SIZE,
    INDEX_SLOT_SIZE,
    IndexGeometryError,
    read_index_geometry,
)
from rocketstore.store.message_store import MessageStore
from rocketstore.store.shutdown_state import QUEUE_OFFSETS_FILE, check_shutdown_state
from rocketstore.store.store_lock import lock_holder

log = logging.getLogger(__name__)

MAX_LISTED = 20          # problems named per kind (the rest are counted)
ITEM_DTYPE = np.dtype([("hash", ">i4"), ("phy", ">i8"), ("diff", ">i4"), ("prev", ">i4")])
# progress(what, done, total)
Progress = Callable[[str, int, int], None]


@dataclass
class Findings:
    """Problems of one kind: the first MAX_LISTED named, all counted."""

    count: int = 0
    listed: list[str] = field(default_factory=list)

    def add(self, text: str) -> None:
        self.count += 1
        if len(self.listed) < MAX_LISTED:
            self.listed.append(text)

    def as_dict(self) -> dict[str, Any]:
        return {"count": self.count, "listed": self.listed}


@dataclass
class VerifyReport:
    """What verify found. ``ok`` when nothing is damaged."""

    store: str
    records: int = 0
    record_bytes: int = 0
    damaged: list[DamagedRange] = field(default_factory=list)
    tail: list[DamagedRange] = field(default_factory=list)
    units_checked: int = 0
    items_checked: int = 0
    units_in_damage: int = 0        # units / items of records lost in damaged ranges
    items_in_damage: int = 0
    index_files: int = 0
    commit_log_files: Findings = field(default_factory=Findings)
    consume_queues: Findings = field(default_factory=Findings)
    index: Findings = field(default_factory=Findings)
    other_files: Findings = field(default_factory=Findings)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.damaged or self.tail or self.commit_log_files.count
                    or self.consume_queues.count or self.index.count
                    or self.other_files.count)

    def as_dict(self) -> dict[str, Any]:
        return {
            "store": self.store, "ok": self.ok, "records": self.records,
            "recordBytes": self.record_bytes,
            "commitLog": {"damaged": [r.as_dict() for r in self.damaged],
                          "damagedBytes": sum(r.size for r in self.damaged),
                          "tornTail": [r.as_dict() for r in self.tail],
                          "files": self.commit_log_files.as_dict()},
            "consumeQueue": {"unitsChecked": self.units_checked,
                             "unitsOfDamagedRecords": self.units_in_damage,
                             **self.consume_queues.as_dict()},
            "index": {"files": self.index_files, "itemsChecked": self.items_checked,
                      "itemsOfDamagedRecords": self.items_in_damage,
                      **self.index.as_dict()},
            "otherFiles": self.other_files.as_dict(),
            "notes": self.notes,
        }

    def summary(self) -> str:
        """One line: what is damaged (or that nothing is)."""
        if self.ok:
            return (f"no damage: {self.records:,} records, {self.units_checked:,} "
                    f"ConsumeQueue units, {self.items_checked:,} IndexFile items checked")
        parts = []
        if self.damaged:
            parts.append(f"{len(self.damaged)} damaged CommitLog range(s) "
                         f"({sum(r.size for r in self.damaged):,} bytes, first "
                         f"[{self.damaged[0].start}, {self.damaged[0].end}): "
                         f"{self.damaged[0].reason})")
        if self.tail:
            parts.append(f"invalid bytes after the last valid record at {self.tail[0].start} "
                         f"({self.tail[0].reason})")
        for name, f in (("CommitLog file", self.commit_log_files),
                        ("ConsumeQueue", self.consume_queues), ("IndexFile", self.index),
                        ("other file", self.other_files)):
            if f.count:
                parts.append(f"{f.count} {name} problem(s) (first: {f.listed[0]})")
        return "damage found: " + "; ".join(parts)


class _QueueCheck:
    """Records against their ConsumeQueue units, batch by batch, and which units were
    matched by a record (the rest point at no record of their queue)."""

    def __init__(self, store: MessageStore, report: VerifyReport) -> None:
        self.store = store
        self.report = report
        self.matched: dict[tuple[str, int], np.ndarray] = {}
        self._first: dict[tuple[str, int], int] = {}
        self._units: dict[tuple[str, int], np.ndarray] = {}
        self.starts: list[np.ndarray] = []      # every record's offset, in log order

    @staticmethod
    def units(cq: ConsumeQueue) -> tuple[int, np.ndarray]:
        """(logical offset of the first, units) of cq's files as they are (no in-memory
        repairs); a missing or short file reads as invalid (zero) units."""
        files = cq.queue.files
        if not files:
            return 0, np.zeros(0, UNIT_DTYPE)
        first = files[0].file_from_offset // 20
        # the files as they are on disk: up to their first hole (nothing is written past
        # it), not to where recovery put the queue's end (units past an invalid one are
        # checked too)
        out = np.zeros((files[-1].file_from_offset // 20 - first)
                       + _written(files[-1]) // 20, UNIT_DTYPE)
        for mf in files:
            n = _written(mf) // 20
            if n:
                at = mf.file_from_offset // 20 - first
                out[at:at + n] = np.frombuffer(mf.view(0, n * 20), UNIT_DTYPE)
        return first, out

    def __call__(self, batch: dispatch.DispatchBatch) -> None:
        self.starts.append(np.array(batch.phy_offsets, dtype=np.int64))
        self.report.record_bytes += int(np.sum(batch.sizes, dtype=np.int64))
        tran = batch.sys_flags & TRANSACTION_TYPE_MASK
        counted = (tran == SysFlag.TRANSACTION_NOT_TYPE) | (tran == SysFlag.TRANSACTION_COMMIT)
        for topic_id, topic in enumerate(batch.topics):
            rows = np.flatnonzero(counted & (batch.topic_ids == topic_id))
            if not len(rows):
                continue
            for queue_id in np.unique(batch.queue_ids[rows]).tolist():
                mine = rows[batch.queue_ids[rows] == queue_id]
                self._queue(topic, queue_id, batch, mine)

    def _queue(self, topic: str, queue_id: int, batch: dispatch.DispatchBatch,
               rows: np.ndarray) -> None:
        key = (topic, queue_id)
        cq = self.store.consume_queues.find(topic, queue_id)
        if cq is None:
            self.report.consume_queues.add(
                f"{topic}:{queue_id}: no ConsumeQueue for the record at "
                f"{int(batch.phy_offsets[rows[0]])} ({len(rows)} record(s))")
            return
        if key not in self.matched:
            self._first[key], self._units[key] = self.units(cq)
            self.matched[key] = np.zeros(len(self._units[key]), bool)
        first = self._first[key]
        units = self._units[key]
        qoffs = np.asarray(batch.queue_offsets[rows]) - first
        phys = np.asarray(batch.phy_offsets[rows])
        sizes = np.asarray(batch.sizes[rows])
        tags = np.asarray(batch.tags_codes[rows])
        inside = (qoffs >= 0) & (qoffs < len(units))
        for i in np.flatnonzero(~inside & (qoffs >= 0)).tolist():
            self.report.consume_queues.add(
                f"{topic}:{queue_id}: the record at {int(phys[i])} (queue offset "
                f"{int(qoffs[i]) + first}) has no unit (the queue ends at "
                f"{len(units) + first})")
        idx = qoffs[inside]
        u = units[idx]
        unit_tags = cq.real_tags_codes(u)
        ok = (u["offset"] == phys[inside]) & (u["size"] == sizes[inside]) & \
            (unit_tags == tags[inside])
        self.report.units_checked += int(ok.sum())
        for j in np.flatnonzero(~ok).tolist():
            q = int(idx[j])
            self.report.consume_queues.add(
                f"{topic}:{queue_id} unit {q + first}: ({int(u['offset'][j])}, "
                f"{int(u['size'][j])}, {int(unit_tags[j])}) where its record is "
                f"({int(phys[inside][j])}, {int(sizes[inside][j])}, {int(tags[inside][j])})")
        self.matched[key][idx[ok]] = True

    def finish(self, min_phy: int) -> None:
        """Units that no record matched: they point at no record of their queue."""
        for cq in self.store.consume_queues.all():
            key = (cq.topic, cq.queue_id)
            if key in self._units:
                first, units, matched = self._first[key], self._units[key], self.matched[key]
            else:
                first, units = self.units(cq)
                matched = np.zeros(len(units), bool)
            valid = (units["offset"] >= 0) & (units["size"] > 0)
            # the queue ends at the first invalid unit; blanks, units before the queue's
            # start, units of records deleted with their files and units of records lost in
            # damaged CommitLog ranges (reported there) are no record's
            end = len(units) if valid.all() else int(np.argmin(valid))
            start = max(0, cq.min_offset - first)
            skip = (units["size"] == BLANK_UNIT_SIZE) | (units["offset"] < min_phy) | \
                _in_ranges(units["offset"], self.report.damaged)
            self.report.units_in_damage += int(
                (_in_ranges(units["offset"], self.report.damaged)[start:end]
                 & ~matched[start:end]).sum())
            bad = np.flatnonzero(~matched[start:end] & ~skip[start:end]) + start
            for q in bad[:MAX_LISTED].tolist():
                self.report.consume_queues.add(
                    f"{cq.topic}:{cq.queue_id} unit {q + first} points at "
                    f"{int(units['offset'][q])} ({int(units['size'][q])} bytes): not a "
                    "record of this queue at that queue offset")
            self.report.consume_queues.count += max(0, len(bad) - MAX_LISTED)
            if end < len(units) and (units[end:]["size"] != 0).any():
                self.report.consume_queues.add(
                    f"{cq.topic}:{cq.queue_id}: invalid unit {end + first} before later "
                    "units")


def _written(mf) -> int:
    """Bytes of mf up to its first hole (a hole holds nothing; reading it on tmpfs would
    take space)."""
    return max(0, min(mf.file_size, mf.allocated_position))


def _in_ranges(offsets: np.ndarray, ranges: list[DamagedRange]) -> np.ndarray:
    """Which offsets lie in one of the (sorted, disjoint) ranges."""
    if not ranges:
        return np.zeros(len(offsets), bool)
    starts = np.array([r.start for r in ranges], np.int64)
    ends = np.array([r.end for r in ranges], np.int64)
    k = np.searchsorted(starts, offsets, side="right") - 1
    return (k >= 0) & (offsets < ends[np.maximum(k, 0)])


def _check_index(store: MessageStore, starts: np.ndarray, report: VerifyReport) -> None:
    config = store.config
    geometry: tuple[int, int] | None = (config.max_hash_slot_num, config.max_index_num)
    log_min = store.get_min_phy_offset()
    for path in sorted(os.listdir(store.index_service.store_path)
                       if os.path.isdir(store.index_service.store_path) else []):
        full = os.path.join(store.index_service.store_path, path)
        if not is_ascii_int(path) or not os.path.isfile(full):
            continue
        report.index_files += 1
        try:
            # each file as it was written (the config's geometry is for new files)
            slots, items = read_index_geometry(full, [geometry, (config.max_hash_slot_num,
                                                                 config.max_index_num)])
            f = IndexFile.load(full, slots, items, read_only=True)
        except IndexGeometryError as exc:
            report.index.add(f"{path}: {exc.reason}")
            continue
        except IndexFileCorruptError as exc:
            report.index.add(f"{path}: {exc.reason}")
            continue
        geometry = (slots, items)
        try:
            why = f.check()
            if why is not None:
                report.index.add(f"{path}: {why}")
                continue
            count = f.index_count
            if count <= 1:
                continue
            items_at = INDEX_HEADER_SIZE + INDEX_SLOT_SIZE * slots
            table = np.frombuffer(f.mapped_file.view(items_at + 20, (count - 1) * 20),
                                  ITEM_DTYPE)
            report.items_checked += len(table)
            phys = table["phy"].astype(np.int64)
            lost = _in_ranges(phys, report.damaged)
            report.items_in_damage += int(lost.sum())
            alive = (phys >= log_min) & ~lost
            k = np.searchsorted(starts, phys)
            at_record = (k < len(starts)) & (starts[np.minimum(k, len(starts) - 1)] == phys)
            for n in np.flatnonzero(alive & ~at_record)[:MAX_LISTED].tolist():
                report.index.add(f"{path} item {n + 1}: phyOffset {int(phys[n])} is not the "
                                 "start of a valid record")
            extra = int((alive & ~at_record).sum()) - MAX_LISTED
            report.index.count += max(0, extra)
            hashes = table["hash"].astype(np.int64)
            for phy in np.unique(phys[alive & at_record]).tolist():
                mf = store.commit_log.queue.find_by_offset(phy)
                if mf is None:
                    continue
                keys = set(record_index_key_hashes(mf, phy - mf.file_from_offset))
                for n in np.flatnonzero(phys == phy).tolist():
                    if int(hashes[n]) not in keys:
                        report.index.add(f"{path} item {n + 1}: keyHash {int(hashes[n])} is "
                                         f"not a key of the record at {phy}")
        finally:
            f.close()


def _check_other_files(store: MessageStore, report: VerifyReport) -> None:
    if store.checkpoint.problem:
        report.other_files.add(f"checkpoint: {store.checkpoint.problem}")
    config_dir = store.paths.config
    for name in sorted(os.listdir(config_dir) if os.path.isdir(config_dir) else []):
        if not name.endswith(".json"):
            continue
        path = os.path.join(config_dir, name)
        if name == QUEUE_OFFSETS_FILE:
            problem = check_shutdown_state(path)[1]
            if problem is not None:
                report.other_files.add(f"{path}: {problem} (ignored: a hint, as if absent)")
            continue
        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
            if text.strip():
                data = loads_fastjson(text, loads=json.loads)
                if not isinstance(data, dict):
                    raise ValueError("not a JSON object")
        except (OSError, ValueError) as exc:
            report.other_files.add(f"{path}: {exc}")


def verify(path: str | os.PathLike[str], config: StoreConfig | None = None, *,
           check_crc: bool = True,
           progress: Callable[[int, int], None] | None = None) -> VerifyReport:
    """Check every record, unit, index item and file of the store at path (read-only).
    progress(done, total) follows the CommitLog scan (bytes, called per segment file), the
    longest part."""
    with MessageStore.open(path, config, read_only=True) as store:
        report = VerifyReport(store.root)
        writer, _pid = lock_holder(store.paths.lock)
        if writer:
            report.notes.append("a writer has the store open: the newest records may be "
                                "written while verify reads (its last file is not searched "
                                "past the last valid record)")
        if os.path.exists(store.paths.abort) and not writer:
            report.notes.append("the last writer did not shut down cleanly (abort file): "
                                "its next writable open runs abnormal recovery")
        for problem in store.commit_log.queue.problems:
            report.commit_log_files.add(problem)
        files = store.commit_log.queue.files
        check = _QueueCheck(store, report)
        if files:
            found = store.commit_log.scan_files(0, check_crc=check_crc, on_batch=check,
                                                progress=progress,
                                                search_last_file=not writer, tags_codes=True,
                                                known_end=store.clean_end)
            report.records = found.records
            report.damaged = found.damaged
            report.tail = found.tail
            rec = store.recovery
            if not found.tail and rec is not None and rec.stop_status == "corrupt":
                # recovery (read-only: in memory) already set the log's end before the tail
                segment = store.config.mapped_file_size_commit_log
                end = rec.end_offset - rec.end_offset % segment + segment
                report.tail = [DamagedRange(rec.end_offset, end,
                                            rec.stop_reason or "corrupt record")]
        check.finish(store.get_min_phy_offset())
        starts = np.concatenate(check.starts) if check.starts else np.zeros(0, np.int64)
        if store.config.message_index_enable:
            _check_index(store, starts, report)
        _check_other_files(store, report)
        for problem in store.consume_queues.problems:
            report.consume_queues.add(problem)
    return report
