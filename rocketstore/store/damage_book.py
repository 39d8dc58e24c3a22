"""DamageBook: the store's account of its damage (README "Integrity"). It keeps what readers,
dispatch and queries find (the CommitLog's damaged ranges, IndexFiles found damaged) in
``config/damagedRanges.json`` when the store is writable, judges the records whose queue
offsets do not fit their ConsumeQueue, and reports it all."""
from __future__ import annotations

import logging
from typing import Any

from rocketstore.store.commit_log import CommitLog
from rocketstore.store.consume_queue import ConsumeQueue
from rocketstore.store.damage import DAMAGE_FILE, DamagedRange, DamageFile
from rocketstore.store.index_service import IndexService
from rocketstore.store.recovery import RecoveryReport, gap_explained

log = logging.getLogger(__name__)


class DamageBook:
    """The damage of one store's CommitLog and IndexFiles, kept on disk by a writer."""

    def __init__(self, commit_log: CommitLog, index_service: IndexService, path: str, *,
                 read_only: bool) -> None:
        self.commit_log = commit_log
        self.index_service = index_service
        self.read_only = read_only
        self.file = DamageFile(path)
        #: IndexFiles found damaged (name -> why): a writer's next open rebuilds them
        self.index_files: dict[str, str] = {}

    def load(self) -> None:
        """Take the ranges and IndexFiles the file names; a writer keeps new damage on disk
        from now on."""
        ranges, self.index_files = self.file.load()
        self.commit_log.damage.replace(0, 2**63 - 1, ranges)
        if not self.read_only:
            self.commit_log.damage.on_change = self.found

    def forget_rebuilt_index_files(self) -> None:
        """Drop the IndexFiles the index service no longer holds damaged (rebuilt at open)."""
        for name in list(self.index_files):
            if name not in self.index_service.damaged_files:
                del self.index_files[name]

    @property
    def problem(self) -> str | None:
        """Why the damage file could not be read, if it could not (named by recovery)."""
        return None if self.file.problem is None else f"{DAMAGE_FILE}: {self.file.problem}"

    def ranges(self) -> list[DamagedRange]:
        return list(self.commit_log.damage)

    def found(self, damaged: DamagedRange) -> None:
        """A reader or dispatch found new damage in a writable store: keep it on disk."""
        log.error("CommitLog damage at %s: kept, unreadable, skipped by readers", damaged)
        self.save()

    def save(self) -> None:
        try:
            self.file.save(self.commit_log.damage, self.index_files)
        except OSError as exc:
            log.error("cannot record the damaged ranges in %s: %s", self.file.path,
                      exc)

    def index_file_damaged(self, name: str, why: str) -> None:
        """A query found an IndexFile damaged: a writer keeps the name so that its next open
        rebuilds the file (queries read the CommitLog over its range meanwhile)."""
        if not self.read_only:
            self.index_files[name] = why
            self.save()

    def queue_gap_allowed(self, cq: ConsumeQueue, phy: int, queue_offset: int) -> bool:
        """ConsumeQueue.gap_allowed: a record whose queue offset is past its queue's next
        one leaves a gap only where damaged bytes (or retention) can hold the records
        missing in between; otherwise its QUEUEOFFSET is the damage: the record is marked
        damaged and gets no unit (never a ConsumeQueue file created up to it)."""
        end = cq.file_max_offset
        after = cq.max_physic_offset if cq.queue.files and end > cq.min_offset else -1
        if gap_explained(self.commit_log, after, phy, queue_offset - end):
            return True
        status, size, _reason = self.commit_log.record_at(phy)
        self.commit_log.damage.add(phy, phy + (size if status == "ok" else 1),
                                   f"queue offset {queue_offset} of {cq.topic}:{cq.queue_id} "
                                   f"is past the queue's next ({end})")
        return False

    def queue_offset_taken(self, cq: ConsumeQueue, phy: int, size: int,
                           queue_offset: int) -> None:
        """ConsumeQueue.offset_taken: a record after its queue's newest one whose queue
        offset the queue already has (a duplicate, or one that went backwards): its
        QUEUEOFFSET is the damage, never the records after it."""
        unit = cq.get_unit(queue_offset)
        held = f"the record at {unit[0]}" if unit is not None else "an earlier record"
        self.commit_log.damage.add(phy, phy + size,
                                   f"queue offset {queue_offset} of {cq.topic}:{cq.queue_id} "
                                   f"belongs to {held}")

    def report(self, rec: RecoveryReport | None) -> dict[str, Any]:
        """What is damaged and how the store works around it (README "Integrity"), as
        JSON-able data: the CommitLog's damaged ranges (unreadable, skipped by every reader),
        the torn tail recovery (rec) gave up, ConsumeQueues and IndexFiles rebuilt or served
        from the CommitLog, and files found short, missing or unreadable. ``damaged`` says
        whether anything is."""
        ranges = [r.as_dict() for r in self.commit_log.damage]
        tail = None
        if rec is not None and rec.stop_status == "corrupt":
            tail = {"offset": rec.end_offset, "reason": rec.stop_reason,
                    "truncatedBytes": rec.truncated_bytes}
        queues = list(rec.queues_repaired) if rec is not None else []
        index = dict(self.index_files)
        index.update(self.index_service.damaged_files)
        files = list(rec.problems) if rec is not None else []
        return {
            "damaged": bool(ranges or tail or queues or index or files),
            "commitLog": ranges,
            "commitLogDamagedBytes": sum(r["bytes"] for r in ranges),
            "tornTail": tail,
            "consumeQueues": queues,
            "indexFiles": [{"name": n, "reason": why} for n, why in sorted(index.items())],
            "files": files,
        }
