"""Retention and disk space: RocketMQ 4.9's CleanCommitLogService, CleanConsumeQueueService
and IndexService.deleteExpiredFile, run every clean_resource_interval ms by CleanFilesService
(DefaultMessageStore.cleanFilesPeriodically), and the disk watermarks.

CommitLog files are deleted oldest first, never the one being written, at most
DELETE_FILES_BATCH_MAX a run and delete_commit_log_files_interval ms apart, when

- they were last modified file_reserved_time hours ago or more, and it is one of the hours of
  delete_when, or the disk is over disk_max_used_space_ratio (75%: the clean-up watermark), or
  a manual request is pending (execute_delete_files_manually: the next 20 runs);
- or, expired or not, when the disk is over disk_space_clean_forcibly_ratio (85%) and
  clean_file_forcibly_enable.

A file still held by a reader (a live view, an in-flight read) is shut down (no new holders)
and stays until its readers let go; a later run deletes it, forcibly after
destroy_mapedfile_interval_forcibly ms (its mapping is replaced with zero pages, so a view
still alive reads zeros instead of faulting). Over disk_space_warning_level_ratio (90%) the
store refuses puts (SERVICE_NOT_AVAILABLE, the reason in the result and the log) and accepts
them again by itself once usage is back under it: the state is measured every run, and again
right after a run deleted files (RocketMQ's "disk full" flag could stay set for good,
alibaba/RocketMQ#331).

Then ConsumeQueue files whose units all point below the new minimum CommitLog offset are
deleted, each queue's minimum offset moves to its first unit still in the CommitLog, and
IndexFiles that end below it go (never the newest one of either).

Seams: disk usage is read through a DiskUsageProbe (path -> used fraction) and time through a
Clock, both injected (MessageStore.open takes them), so tests can say "the disk is 87% full"
or "it is 04:00, three days later" without filling a disk or waiting.
"""
from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rocketstore._native.mapped_file import MappedFile
from rocketstore.common.text import is_ascii_int
from rocketstore.config import StoreConfig
from rocketstore.store.clock import Clock, SystemClock
from rocketstore.store.mapped_file_queue import MappedFileQueue, last_modified_ms
from rocketstore.store.services.service_thread import ServiceThread

if TYPE_CHECKING:
    from rocketstore.store.consume_queue_table import ConsumeQueueTable
    from rocketstore.store.index_service import IndexService

log = logging.getLogger(__name__)

DELETE_FILES_BATCH_MAX = 10         # MappedFileQueue.DELETE_FILES_BATCH_MAX
MAX_MANUAL_DELETE_FILE_TIMES = 20   # CleanCommitLogService.MAX_MANUAL_DELETE_FILE_TIMES
CONSUME_QUEUE_DESTROY_INTERVAL_MS = 1000 * 60   # ConsumeQueue.deleteExpiredFile's destroy

#: disk usage of the file system holding a path, as a fraction of its size (0.87: 87% used);
#: below 0 when it cannot be read
DiskUsageProbe = Callable[[str], float]


def disk_used_ratio(path: str) -> float:
    """UtilAll.getDiskPartitionSpaceUsedPercent, as df counts it: used / (used + available)
    of the file system holding path (its nearest existing parent), where used is what is
    allocated and available what an unprivileged writer can still have; -1 when it cannot
    be read. It reaches 1.0 exactly when a write would fail with ENOSPC. (RocketMQ divides
    by the whole size and counts the blocks reserved for root as free, so on a file system
    with a large reservation its ratio never reaches its watermarks.)"""
    path = os.path.abspath(path)
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            return -1.0
        path = parent
    try:
        st = os.statvfs(path)
    except OSError:
        return -1.0
    used = st.f_blocks - st.f_bfree
    if used + st.f_bavail <= 0:
        return -1.0
    return used / (used + st.f_bavail)


def disk_space(path: str) -> dict[str, int] | None:
    """{"total", "used", "free"} bytes of the file system holding path (free: what an
    unprivileged writer can use); None when it cannot be read."""
    path = os.path.abspath(path)
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return {"total": st.f_blocks * st.f_frsize,
            "used": (st.f_blocks - st.f_bfree) * st.f_frsize,
            "free": st.f_bavail * st.f_frsize}


def local_hour(wall_ms: int) -> int:
    return time.localtime(wall_ms // 1000).tm_hour


def is_it_time_to_do(when: str, wall_ms: int) -> bool:
    """UtilAll.isItTimeToDo: the local hour is one of when's ';'-separated hours."""
    hour = local_hour(wall_ms)
    return any(int(h) == hour for h in when.split(";") if is_ascii_int(h.strip()))


@dataclass
class DeletedFile:
    kind: str           # "commitlog", "consumequeue" or "index"
    path: str
    size: int

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": self.path, "size": self.size}


@dataclass
class DiskState:
    """What the last watermark check saw."""

    used_ratio: float = -1.0            # highest of the CommitLog's and the queues' disks
    clean_immediately: bool = False     # over the forced watermark: delete before expiry
    full: bool = False                  # over the warning level: puts are refused
    reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"usedRatio": self.used_ratio, "cleanImmediately": self.clean_immediately,
                "diskFull": self.full, "reason": self.reason}


@dataclass
class CleanReport:
    """What a cleanup run deleted (or, dry, would delete) and why it ran."""

    reasons: list[str] = field(default_factory=list)    # "time", "space", "manual", "forced"
    deleted: list[DeletedFile] = field(default_factory=list)
    min_offset_before: int = 0
    min_offset_after: int = 0
    waiting: str | None = None      # a file left for its readers, when one stopped the run
    dry_run: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"reasons": self.reasons, "dryRun": self.dry_run,
                "minOffsetBefore": self.min_offset_before,
                "minOffsetAfter": self.min_offset_after, "waiting": self.waiting,
                "deleted": [d.as_dict() for d in self.deleted],
                "deletedBytes": sum(d.size for d in self.deleted)}


def _file_entry(kind: str, mf: MappedFile) -> DeletedFile:
    return DeletedFile(kind, mf.file_name, mf.file_size)


class CleanCommitLogService:
    """Deletes expired CommitLog files and keeps the disk watermarks (see the module
    docstring). on_disk_state(full, reason) is told when the warning-level state changes."""

    def __init__(self, config: StoreConfig, queue: MappedFileQueue, paths: list[str], *,
                 probe: DiskUsageProbe = disk_used_ratio, clock: Clock | None = None,
                 on_disk_state: Callable[[bool, str | None], None] | None = None) -> None:
        self.config = config
        self.queue = queue
        self.paths = paths      # the disks to watch: the CommitLog's and the queues'
        self.probe = probe
        self.clock: Clock = clock or SystemClock()
        self.on_disk_state = on_disk_state
        self.manual_delete_times = 0
        self.disk = DiskState()
        self.last_redelete_ms = self.clock.monotonic_ms()

    # ---- the watermarks ------------------------------------------------------------------
    @property
    def disk_max_used_space_ratio(self) -> int:
        """MessageStoreConfig.getDiskMaxUsedSpaceRatio: the configured value within 10..95."""
        return min(95, max(10, self.config.disk_max_used_space_ratio))

    def measure(self) -> tuple[DiskState, bool]:
        """isSpaceToDelete without acting on it: (the state the disks are in, whether usage
        is over the clean-up watermark or cannot be read)."""
        ratios = [(path, self.probe(path)) for path in self.paths]
        path, ratio = max(ratios, key=lambda pr: pr[1])
        warning = self.config.disk_space_warning_level_ratio / 100.0
        forcibly = self.config.disk_space_clean_forcibly_ratio / 100.0
        state = DiskState(used_ratio=ratio)
        if ratio > warning:
            state.full = state.clean_immediately = True
            state.reason = (f"disk full: {path} is {ratio:.1%} used, over "
                            f"disk_space_warning_level_ratio {warning:.0%}: puts are refused "
                            f"until cleanup or the user brings it back under")
        elif ratio > forcibly:
            state.clean_immediately = True
        return state, ratio < 0 or ratio > self.disk_max_used_space_ratio / 100.0

    def check_disk(self) -> bool:
        """isSpaceToDelete: measure the disks, update the warning-level state (puts refused
        over it, accepted again under it) and the forced-cleaning flag; True when usage is
        over the clean-up watermark (or cannot be read)."""
        state, space = self.measure()
        was_full = self.disk.full
        self.disk = state
        if state.full and not was_full:
            log.error("%s", state.reason)
        elif was_full and not state.full:
            log.warning("disk space OK: %.1f%% used, under disk_space_warning_level_ratio "
                        "%d%%: puts are accepted again", state.used_ratio * 100,
                        self.config.disk_space_warning_level_ratio)
        if state.full != was_full and self.on_disk_state is not None:
            self.on_disk_state(state.full, state.reason)
        if space and state.used_ratio >= 0:
            log.info("disk %.1f%% used, over disk_max_used_space_ratio %d%%: reclaiming "
                     "space", state.used_ratio * 100, self.disk_max_used_space_ratio)
        return space

    def is_time_to_delete(self) -> bool:
        return is_it_time_to_do(self.config.delete_when, self.clock.wall_ms())

    def execute_delete_files_manually(self) -> None:
        """The next MAX_MANUAL_DELETE_FILE_TIMES runs delete expired files at any hour."""
        self.manual_delete_times = MAX_MANUAL_DELETE_FILE_TIMES
        log.info("manual deletion of expired files requested")

    # ---- runs ----------------------------------------------------------------------------
    def _decide(self, manual: bool, *, apply: bool = True) -> tuple[list[str], bool]:
        """(why a run deletes: [] when it does not, whether it ignores expiry). apply: act
        on the disk state (puts refused or accepted), else only measure it."""
        reasons = []
        if self.is_time_to_delete():
            reasons.append("time")
        if apply:
            space = self.check_disk()
            state = self.disk
        else:
            state, space = self.measure()
        if space:
            reasons.append("space")
        if manual:
            reasons.append("manual")
        clean_at_once = self.config.clean_file_forcibly_enable and state.clean_immediately
        if clean_at_once and reasons:
            reasons.append("forced")
        return reasons, clean_at_once

    def run(self, pause: Callable[[float], None] = time.sleep) -> CleanReport:
        """One run: deleteExpiredFiles, then redeleteHangedFile."""
        manual = self.manual_delete_times > 0
        reasons, clean_at_once = self._decide(manual)
        report = CleanReport(reasons=reasons, min_offset_before=self.queue.min_offset())
        if reasons:
            if manual:
                self.manual_delete_times -= 1
            now = self.clock.wall_ms()
            gone = self.queue.delete_expired_by_time(
                self.config.file_reserved_time * 3600 * 1000, now, clean_at_once,
                delete_interval_s=self.config.delete_commit_log_files_interval / 1000.0,
                interval_forcibly_ms=self.config.destroy_mapedfile_interval_forcibly,
                now_mono_ms=self.clock.monotonic_ms(), pause=pause,
                limit=DELETE_FILES_BATCH_MAX)
            report.deleted = [_file_entry("commitlog", mf) for mf in gone]
            for entry in report.deleted:
                log.info("deleted CommitLog file %s (%s)", entry.path, "+".join(reasons))
            expected = self.queue.expired_by_time(
                self.config.file_reserved_time * 3600 * 1000, now, clean_at_once, 1)
            if expected and not expected[0].is_available:
                report.waiting = expected[0].file_name
                log.info("CommitLog file %s is still read: deleted once its readers let go "
                         "(at the latest %d ms after the first attempt)", report.waiting,
                         self.config.destroy_mapedfile_interval_forcibly)
            if not gone and "space" in reasons:
                log.warning("disk space will be full soon, but no CommitLog file could be "
                            "deleted")
            if gone:
                self.check_disk()   # puts may be accepted again at once
        self._redelete_hanged_file(report)
        report.min_offset_after = self.queue.min_offset()
        return report

    def _redelete_hanged_file(self, report: CleanReport) -> None:
        now = self.clock.monotonic_ms()
        if now - self.last_redelete_ms <= self.config.redelete_hanged_file_interval:
            return
        self.last_redelete_ms = now
        first = self.queue.first_file()
        if first is not None and self.queue.retry_delete_first_file(
                self.config.destroy_mapedfile_interval_forcibly, now):
            log.info("deleted CommitLog file %s after waiting for its readers",
                     first.file_name)
            report.deleted.append(_file_entry("commitlog", first))

    def plan(self, manual: bool = False) -> CleanReport:
        """What a run now would delete from the CommitLog (a dry run: nothing changes, and
        the watermark state is measured but not applied)."""
        reasons, clean_at_once = self._decide(manual or self.manual_delete_times > 0,
                                              apply=False)
        report = CleanReport(reasons=reasons, min_offset_before=self.queue.min_offset(),
                             dry_run=True)
        if reasons:
            doomed = self.queue.expired_by_time(
                self.config.file_reserved_time * 3600 * 1000, self.clock.wall_ms(),
                clean_at_once, DELETE_FILES_BATCH_MAX)
            report.deleted = [_file_entry("commitlog", mf) for mf in doomed]
        files = self.queue.files
        if report.deleted:
            report.min_offset_after = (files[len(report.deleted)].file_from_offset
                                       if len(report.deleted) < len(files)
                                       else self.queue.min_offset())
        else:
            report.min_offset_after = report.min_offset_before
        return report

    def describe(self) -> dict[str, Any]:
        """The watermarks, the last check and the oldest file's age, for stat."""
        files = self.queue.files
        first = files[0] if len(files) > 1 else None
        return {
            "diskMaxUsedSpaceRatio": self.disk_max_used_space_ratio,
            "diskSpaceCleanForciblyRatio": self.config.disk_space_clean_forcibly_ratio,
            "diskSpaceWarningLevelRatio": self.config.disk_space_warning_level_ratio,
            "fileReservedTime": self.config.file_reserved_time,
            "deleteWhen": self.config.delete_when,
            "cleanFileForciblyEnable": self.config.clean_file_forcibly_enable,
            "oldestDeletableLastModified": (last_modified_ms(first)
                                            if first is not None else None),
            **self.disk.as_dict(),
        }


class CleanConsumeQueueService:
    """After CommitLog files go: ConsumeQueue files whose units all point below the new
    minimum CommitLog offset are deleted and each queue's minimum offset is corrected; then
    IndexFiles that end below it (never the newest file of either)."""

    def __init__(self, config: StoreConfig, min_phy_offset: Callable[[], int],
                 queues: ConsumeQueueTable, index: IndexService | None) -> None:
        self.config = config
        self.min_phy_offset = min_phy_offset
        self.queues = queues
        self.index = index
        self.last_physical_min_offset = 0

    def run(self, pause: Callable[[float], None] = time.sleep,
            now_mono_ms: float = -1) -> list[DeletedFile]:
        deleted: list[DeletedFile] = []
        min_offset = self.min_phy_offset()
        if min_offset <= self.last_physical_min_offset:
            return deleted
        self.last_physical_min_offset = min_offset
        interval_s = self.config.delete_consume_queue_files_interval / 1000.0
        for cq in self.queues.all():
            before = {id(mf): mf for mf in cq.queue.files}
            count = cq.delete_expired(min_offset, CONSUME_QUEUE_DESTROY_INTERVAL_MS,
                                      now_mono_ms)
            if count:
                after = {id(mf) for mf in cq.queue.files}
                deleted.extend(_file_entry("consumequeue", mf)
                               for key, mf in before.items() if key not in after)
                if interval_s > 0:
                    pause(interval_s)
        if self.index is not None and not self.index.read_only:
            before_index = {id(f): f for f in self.index.files}
            self.index.delete_expired(min_offset)
            after_index = {id(f) for f in self.index.files}
            deleted.extend(DeletedFile("index", f.file_name, f.mapped_file.file_size)
                           for key, f in before_index.items() if key not in after_index)
        for entry in deleted:
            log.info("deleted %s file %s (below CommitLog offset %d)", entry.kind, entry.path,
                     min_offset)
        return deleted

    def plan(self, min_offset: int) -> list[DeletedFile]:
        """The files a run would delete were the CommitLog to start at min_offset."""
        out: list[DeletedFile] = []
        for cq in self.queues.all():
            out.extend(_file_entry("consumequeue", mf) for mf in cq.expired_files(min_offset))
        if self.index is not None:
            files = self.index.files
            for f in files[:-1]:
                if f.end_phy_offset >= min_offset:
                    break
                out.append(DeletedFile("index", f.file_name, f.mapped_file.file_size))
        return out


class CleanFilesService(ServiceThread):
    """DefaultMessageStore.cleanFilesPeriodically: every clean_resource_interval ms, the
    CommitLog's run, then the queues' and indexes'. The disk is checked once at start, so a
    store opened on a full disk refuses puts from its first one."""

    def __init__(self, config: StoreConfig, commit_log: CleanCommitLogService,
                 consume_queue: CleanConsumeQueueService) -> None:
        super().__init__("CleanFilesService")
        self.config = config
        self.commit_log = commit_log
        self.consume_queue = consume_queue
        self.wait_interval_s = max(config.clean_resource_interval, 1) / 1000.0

    def _pause(self, seconds: float) -> None:
        self._stopped.wait(seconds)     # between deletions; shutdown does not wait them out

    def run_cycle(self) -> CleanReport:
        report = self.commit_log.run(self._pause)
        report.deleted.extend(self.consume_queue.run(
            self._pause, self.commit_log.clock.monotonic_ms()))
        return report

    def run_once(self) -> None:
        self.run_cycle()

    def start(self) -> None:
        self.commit_log.check_disk()
        super().start()
