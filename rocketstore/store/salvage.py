"""salvage: copy every valid record of a damaged store into a new one (``rocketstore salvage
PATH OUT``), the explicit repair the damage policy leaves to the user (README "Integrity").

The records are copied byte for byte, in log order, into CommitLog segments of the same
size; only what their new place changes is rewritten: PHYSICALOFFSET, QUEUEOFFSET (each
queue renumbered densely: records lost in damage leave no gap) and the
PREPAREDTRANSACTIONOFFSET of commit and rollback records (pointed at the prepared record's
new place). Consumer groups' offsets (config/consumerOffset.json) and the delay service's
(config/delayOffset.json) are moved to the renumbered queue offsets; the broker's other
config files are copied as they are. The new store's ConsumeQueues and IndexFiles are built
by opening it once. Message ids that name a CommitLog offset (offsetMsgId) change with it;
UNIQ_KEYs do not.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import struct
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rocketstore.common.fastjson import loads_fastjson
from rocketstore.common.record import (
    BLANK_MAGIC_CODE,
    BORNHOST_OFFSET,
    END_FILE_MIN_BLANK_LENGTH,
    QUEUEOFFSET_OFFSET,
    SYSFLAG_OFFSET,
    TRANSACTION_TYPE_MASK,
    SysFlag,
)
from rocketstore.common.topics import SCHEDULE_TOPIC
from rocketstore.config import StoreConfig
from rocketstore.store.damage import DamagedRange
from rocketstore.store.layout import COMMITLOG_DIR, CONFIG_DIR, segment_name
from rocketstore.store.message_store import MessageStore

log = logging.getLogger(__name__)

# progress(bytes_done, bytes_total)
Progress = Callable[[int, int], None]


@dataclass
class SalvageReport:
    source: str
    target: str
    records: int = 0
    bytes: int = 0
    skipped: list[DamagedRange] = field(default_factory=list)
    queues_renumbered: list[str] = field(default_factory=list)   # queues that had gaps
    offsets_moved: int = 0          # consumer/delay offsets moved to renumbered offsets
    files_copied: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"source": self.source, "target": self.target, "records": self.records,
                "bytes": self.bytes, "skipped": [r.as_dict() for r in self.skipped],
                "skippedBytes": sum(r.size for r in self.skipped),
                "queuesRenumbered": self.queues_renumbered,
                "offsetsMoved": self.offsets_moved, "filesCopied": self.files_copied}


class _SegmentWriter:
    """Appends records to CommitLog segment files of one size, closing each with an END_FILE
    blank as the store's writer does."""

    def __init__(self, directory: str, segment: int) -> None:
        self.directory = directory
        self.segment = segment
        self.offset = 0             # where the next record goes
        self._file = None
        self._file_start = -1
        os.makedirs(directory, exist_ok=True)

    def _open(self, start: int) -> None:
        self.close()
        path = os.path.join(self.directory, segment_name(start))
        self._file = open(path, "w+b")      # noqa: SIM115 - closed by close()
        self._file.truncate(self.segment)
        self._file_start = start

    def append(self, rec: bytes | bytearray) -> int:
        """Write rec at the next place (rolling to a new segment when it does not fit with
        room for a blank); returns its offset."""
        size = len(rec)
        if self._file is None:
            self._open(self.offset - self.offset % self.segment)
        rel = self.offset - self._file_start
        if rel + size + END_FILE_MIN_BLANK_LENGTH > self.segment:
            assert self._file is not None
            self._file.seek(rel)
            self._file.write(struct.pack(">iI", self.segment - rel, BLANK_MAGIC_CODE))
            self.offset = self._file_start + self.segment
            self._open(self.offset)
            rel = 0
        assert self._file is not None
        at = self.offset
        struct.pack_into(">q", rec, 28, at)     # PHYSICALOFFSET
        self._file.seek(rel)
        self._file.write(rec)
        self.offset += size
        return at

    def close(self) -> None:
        if self._file is not None:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            self._file = None


def _read_json(path: str) -> Any:
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return loads_fastjson(text, loads=json.loads)


def salvage(source: str | os.PathLike[str], target: str | os.PathLike[str],
            config: StoreConfig | None = None, *, check_crc: bool = True,
            progress: Progress | None = None) -> SalvageReport:
    """Copy every valid record of the store at source into a new store at target (a
    directory that does not exist or is empty); see the module docstring."""
    target = os.path.abspath(os.fspath(target))
    if os.path.exists(target) and os.listdir(target):
        raise FileExistsError(f"salvage needs a new or empty directory, {target} is not")
    with MessageStore.open(source, config, read_only=True) as src:
        report = SalvageReport(src.root, target)
        cfg = src.config
        writer = _SegmentWriter(os.path.join(target, COMMITLOG_DIR),
                                cfg.mapped_file_size_commit_log)
        renumber: dict[tuple[str, int], list[int]] = defaultdict(list)   # old offsets
        prepared: dict[int, int] = {}       # old phy of a prepared record -> new phy
        src.commit_log.damage.on_change = None
        total = max(1, src.get_max_phy_offset() - src.get_min_phy_offset())
        try:
            for batch in src.commit_log.batches(src.get_min_phy_offset(), check_crc=check_crc,
                                                tags_codes=False):
                mf = batch.mapped_file
                tran = (batch.sys_flags & TRANSACTION_TYPE_MASK).tolist()
                for i, pos in enumerate(batch.positions.tolist()):
                    size = int(batch.sizes[i])
                    rec = bytearray(mf.read(pos, size))
                    old_phy = int(batch.phy_offsets[i])
                    if tran[i] in (SysFlag.TRANSACTION_NOT_TYPE, SysFlag.TRANSACTION_COMMIT):
                        key = (batch.topics[int(batch.topic_ids[i])], int(batch.queue_ids[i]))
                        offsets = renumber[key]
                        struct.pack_into(">q", rec, QUEUEOFFSET_OFFSET, len(offsets))
                        offsets.append(int(batch.queue_offsets[i]))
                    if tran[i] in (SysFlag.TRANSACTION_COMMIT, SysFlag.TRANSACTION_ROLLBACK):
                        pto_at = _prepared_offset_at(rec)
                        (old,) = struct.unpack_from(">q", rec, pto_at)
                        if old in prepared:
                            struct.pack_into(">q", rec, pto_at, prepared[old])
                    at = writer.append(rec)
                    if tran[i] == SysFlag.TRANSACTION_PREPARED:
                        prepared[old_phy] = at
                    report.records += 1
                    report.bytes += size
                if progress is not None:
                    progress(min(total, int(batch.next_offset) - src.get_min_phy_offset()),
                             total)
        finally:
            writer.close()
        report.skipped = list(src.commit_log.damage)
        for key, offsets in renumber.items():
            if offsets and offsets[-1] - offsets[0] + 1 != len(offsets):
                report.queues_renumbered.append(f"{key[0]}:{key[1]}")
        _copy_config(src.paths.config, os.path.join(target, CONFIG_DIR), renumber, report)
    new_config = cfg.replace(store_path_root_dir=target, store_path_commit_log=None,
                             read_only=False)
    with MessageStore.open(target, new_config) as dst:      # builds ConsumeQueues and index
        dst.wait_dispatched()
    if progress is not None:
        progress(total, total)
    return report


def _prepared_offset_at(rec: bytes | bytearray) -> int:
    """Position of PREPAREDTRANSACTIONOFFSET in a (valid) record."""
    (sys_flag,) = struct.unpack_from(">i", rec, SYSFLAG_OFFSET)
    born = 16 if sys_flag & SysFlag.BORNHOST_V6 else 4
    store = 16 if sys_flag & SysFlag.STOREHOST_V6 else 4
    return BORNHOST_OFFSET + born + 4 + 8 + store + 4 + 4


def _moved(offsets: list[int], committed: int) -> int:
    """The renumbered offset of a consumer at old offset `committed`: how many copied records
    of the queue had an old offset below it."""
    return int(np.searchsorted(np.asarray(offsets, dtype=np.int64), committed, side="left"))


def _copy_config(src_dir: str, dst_dir: str, renumber: dict[tuple[str, int], list[int]],
                 report: SalvageReport) -> None:
    if not os.path.isdir(src_dir):
        return
    os.makedirs(dst_dir, exist_ok=True)
    for name in sorted(os.listdir(src_dir)):
        path = os.path.join(src_dir, name)
        if not os.path.isfile(path) or name.endswith((".lock", ".tmp")) or name in (
                "queueOffsets.json", "damagedRanges.json"):
            continue
        if name in ("consumerOffset.json", "delayOffset.json"):
            try:
                data = _read_json(path)
            except (OSError, ValueError) as exc:
                log.error("salvage: %s is unreadable (%s): not copied", path, exc)
                continue
            _move_offsets(name, data, renumber, report)
            with open(os.path.join(dst_dir, name), "w", encoding="utf-8") as f:
                json.dump(data, f, indent="\t")
        else:
            shutil.copy2(path, os.path.join(dst_dir, name))
        report.files_copied.append(name)


def _move_offsets(name: str, data: Any, renumber: dict[tuple[str, int], list[int]],
                  report: SalvageReport) -> None:
    table = data.get("offsetTable") if isinstance(data, dict) else None
    if not isinstance(table, dict):
        return
    if name == "delayOffset.json":      # {level: offset} of SCHEDULE_TOPIC_XXXX queue level-1
        for level, offset in list(table.items()):
            key = (SCHEDULE_TOPIC, int(level) - 1)
            if key in renumber and isinstance(offset, int):
                table[level] = _moved(renumber[key], offset)
                report.offsets_moved += 1
        return
    for topic_group, queues in table.items():
        topic = str(topic_group).partition("@")[0]
        if not isinstance(queues, dict):
            continue
        for qid, offset in list(queues.items()):
            key = (topic, int(qid))
            if key in renumber and isinstance(offset, int):
                queues[qid] = _moved(renumber[key], offset)
                report.offsets_moved += 1
