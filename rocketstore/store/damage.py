"""Damage: bytes of the store that are not what a writer wrote, and what the store does about
them (README "Integrity").

The CommitLog is the store's only copy of the messages, so damage in it is never "repaired"
by deleting what follows: a bad region followed by valid records is kept, marked unreadable
and skipped by every reader. Only the bytes after the log's last valid record (a torn tail)
are trimmed. ``CommitLogDamage`` holds the damaged ranges; ``DamageFile`` keeps them (and
the IndexFiles found damaged while the store ran) in ``config/damagedRanges.json`` so that a
reopen knows them without scanning the whole log again.
"""
from __future__ import annotations

import bisect
import json
import logging
import os
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from rocketstore.common.atomic_file import write_atomically

log = logging.getLogger(__name__)

DAMAGE_FILE = "damagedRanges.json"


@dataclass(frozen=True)
class DamagedRange:
    """CommitLog bytes [start, end) that hold no readable record."""

    start: int
    end: int
    reason: str

    @property
    def size(self) -> int:
        return self.end - self.start

    def as_dict(self) -> dict[str, Any]:
        return {"start": self.start, "end": self.end, "bytes": self.size, "reason": self.reason}

    def __str__(self) -> str:
        return f"[{self.start:,}, {self.end:,}) ({self.size:,} bytes: {self.reason})"


class CommitLogDamage:
    """The CommitLog's damaged ranges: sorted, disjoint, published copy-on-write (readers on
    any thread look them up without a lock; changes are serialised)."""

    def __init__(self, ranges: Iterable[DamagedRange] = ()) -> None:
        self._lock = threading.Lock()
        #: the ranges, sorted (a plain attribute: hot paths test it for emptiness)
        self.ranges: tuple[DamagedRange, ...] = ()
        self._starts: tuple[int, ...] = ()
        #: called with each range added (the store persists and reports them)
        self.on_change: Any = None
        for r in ranges:
            self.add(r.start, r.end, r.reason, notify=False)

    def __bool__(self) -> bool:
        return bool(self.ranges)

    def __len__(self) -> int:
        return len(self.ranges)

    def __iter__(self):
        return iter(self.ranges)

    def total_bytes(self) -> int:
        return sum(r.size for r in self.ranges)

    def covering(self, offset: int) -> DamagedRange | None:
        """The range that holds offset, or None."""
        ranges = self.ranges
        if not ranges:
            return None
        i = bisect.bisect_right(self._starts, offset) - 1
        if i >= 0 and ranges[i].start <= offset < ranges[i].end:
            return ranges[i]
        return None

    def overlapping(self, start: int, end: int) -> list[DamagedRange]:
        """The ranges that share a byte with [start, end)."""
        ranges = self.ranges
        if not ranges or end <= start:
            return []
        i = max(0, bisect.bisect_right(self._starts, start) - 1)
        out = []
        for r in ranges[i:]:
            if r.start >= end:
                break
            if r.end > start:
                out.append(r)
        return out

    def bytes_between(self, start: int, end: int) -> int:
        """Damaged bytes within [start, end)."""
        return sum(min(r.end, end) - max(r.start, start) for r in self.overlapping(start, end))

    def add(self, start: int, end: int, reason: str, *, notify: bool = True
            ) -> DamagedRange | None:
        """Mark [start, end) damaged (merged with ranges it touches); the new range, or None
        when it was already known."""
        if end <= start:
            return None
        with self._lock:
            known = self.covering(start)
            if known is not None and known.end >= end:
                return None
            merged_start, merged_end, reasons = start, end, [reason]
            keep = []
            for r in self.ranges:
                if r.end < merged_start or r.start > merged_end:
                    keep.append(r)
                else:
                    merged_start = min(merged_start, r.start)
                    merged_end = max(merged_end, r.end)
                    reasons.insert(0, r.reason)
            new = DamagedRange(merged_start, merged_end, _join_reasons(reasons))
            keep.append(new)
            keep.sort(key=lambda r: r.start)
            self._publish(keep)
        if notify and self.on_change is not None:
            self.on_change(new)
        return new

    def replace(self, start: int, end: int, ranges: Iterable[DamagedRange]) -> None:
        """Forget the ranges within [start, end) and add `ranges` (a scan of that part of the
        log found them again): ranges a scan no longer sees (bytes since repaired) go."""
        with self._lock:
            keep = [r for r in self.ranges if r.end <= start or r.start >= end]
            self._publish(keep)
        for r in ranges:
            self.add(r.start, r.end, r.reason, notify=False)

    def drop_from(self, offset: int) -> None:
        """Forget what lies at or after offset (the log's end moved there)."""
        with self._lock:
            keep = []
            for r in self.ranges:
                if r.start >= offset:
                    continue
                keep.append(r if r.end <= offset else DamagedRange(r.start, offset, r.reason))
            self._publish(keep)

    def _publish(self, ranges: list[DamagedRange]) -> None:
        self.ranges = tuple(ranges)
        self._starts = tuple(r.start for r in ranges)


def _join_reasons(reasons: list[str]) -> str:
    seen = list(dict.fromkeys(r for r in reasons if r))
    return "; ".join(seen) if seen else "damaged"


class DamageFile:
    """``config/damagedRanges.json`` (rocketstore only; RocketMQ ignores it): the CommitLog's
    damaged ranges and the IndexFiles found damaged, so a reopen knows them. A writer
    rewrites it whenever they change (temp file, fsync, rename); readers only read it. An
    unreadable file is reported and ignored: recovery and the readers find damage again."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.problem: str | None = None      # why the file could not be read, if it could not

    def load(self) -> tuple[list[DamagedRange], dict[str, str]]:
        """(CommitLog ranges, {IndexFile name: reason}); empty when there is no file."""
        self.problem = None
        try:
            with open(self.path, encoding="utf-8") as f:
                data = json.load(f)
        except FileNotFoundError:
            return [], {}
        except (OSError, ValueError) as exc:
            self.problem = f"unreadable: {exc}"
            log.error("ignoring %s (%s): damage recorded there is found again by recovery "
                      "and by the readers", self.path, self.problem)
            return [], {}
        ranges: list[DamagedRange] = []
        index: dict[str, str] = {}
        try:
            for item in data.get("commitLog", []):
                start, end = int(item["start"]), int(item["end"])
                if 0 <= start < end:
                    ranges.append(DamagedRange(start, end, str(item.get("reason", "damaged"))))
            for item in data.get("indexFiles", []):
                index[str(item["name"])] = str(item.get("reason", "damaged"))
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            self.problem = f"malformed: {exc}"
            log.error("ignoring %s (%s)", self.path, self.problem)
            return [], {}
        return ranges, index

    def save(self, ranges: Iterable[DamagedRange], index_files: dict[str, str]) -> None:
        ranges = list(ranges)
        if not ranges and not index_files:
            if os.path.exists(self.path):
                os.remove(self.path)
            return
        now = int(time.time() * 1000)
        data = {"updated": now,
                "commitLog": [r.as_dict() for r in ranges],
                "indexFiles": [{"name": n, "reason": why} for n, why in sorted(index_files.items())]}
        write_atomically(self.path, json.dumps(data, indent=1))
