"""StoreCheckpoint: the 4096-byte `checkpoint` file with the store timestamps of the newest
data flushed in the CommitLog (@0), the ConsumeQueues (@8) and the IndexFiles (@16)."""
from __future__ import annotations

import logging
import os
import struct
import time

from rocketstore._native.mapped_file import MappedFile

CHECKPOINT_SIZE = 4096
_LAYOUT = struct.Struct(">qqq")
# Abnormal recovery starts this much before the checkpoint (RocketMQ getMinTimestamp).
RECOVERY_MARGIN_MS = 3000
# A stored time this far past the clock is damage, not a clock that was ahead.
_FUTURE_MARGIN_MS = 24 * 3600 * 1000

log = logging.getLogger(__name__)


class StoreCheckpoint:
    def __init__(self, path: str, *, read_only: bool = False) -> None:
        self.path = path
        self.read_only = read_only
        self.physic_msg_timestamp = 0
        self.logics_msg_timestamp = 0
        self.index_msg_timestamp = 0
        self.problem: str | None = None    # why the file was read as zeros (damage)
        self._file: MappedFile | None = None

    def load(self) -> None:
        """Open (writable: create) the file and read the three timestamps. A damaged file
        (another size, or times that are negative or in the future) is reported in
        ``problem`` and at ERROR and read as zeros: an abnormal recovery then replays the
        whole log, which only costs time. A writer rewrites it at its next flush."""
        self.problem = None
        exists = os.path.exists(self.path)
        if self.read_only and not exists:
            return
        size = os.path.getsize(self.path) if exists else CHECKPOINT_SIZE
        if size != CHECKPOINT_SIZE:
            self._damaged(f"{size} bytes, expected {CHECKPOINT_SIZE}")
            if self.read_only:
                return
            os.truncate(self.path, CHECKPOINT_SIZE)
        self._file = MappedFile(self.path, CHECKPOINT_SIZE, read_only=self.read_only,
                                file_from_offset=0)
        if self.problem is not None:
            return
        values = _LAYOUT.unpack(self._file.read(0, _LAYOUT.size))
        future = int(time.time() * 1000) + _FUTURE_MARGIN_MS
        if any(v < 0 or v > future for v in values):
            self._damaged(f"timestamps {values} are negative or in the future")
            return
        self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp = values

    def _damaged(self, why: str) -> None:
        self.problem = why
        log.error("checkpoint %s is damaged (%s): read as zeros (an abnormal recovery replays "
                  "the whole CommitLog)", self.path, why)

    def min_timestamp(self) -> int:
        """Where abnormal recovery starts: min(physic, logics) - 3 s (never negative)."""
        return max(0, min(self.physic_msg_timestamp, self.logics_msg_timestamp)
                   - RECOVERY_MARGIN_MS)

    def min_timestamp_index(self) -> int:
        return min(self.min_timestamp(), self.index_msg_timestamp)

    def flush(self) -> None:
        if self._file is None or self.read_only:
            return
        self._file.write_at(0, _LAYOUT.pack(self.physic_msg_timestamp,
                                            self.logics_msg_timestamp,
                                            self.index_msg_timestamp))
        self._file.wrote_position = _LAYOUT.size
        self._file.flushed_position = 0
        self._file.flush(0)

    def shutdown(self) -> None:
        if self._file is not None:
            self.flush()
            self._file.close()
            self._file = None

    def close(self) -> None:
        """Unmap without writing (a store that failed to open)."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def as_dict(self) -> dict[str, int]:
        return {"physicMsgTimestamp": self.physic_msg_timestamp,
                "logicsMsgTimestamp": self.logics_msg_timestamp,
                "indexMsgTimestamp": self.index_msg_timestamp}
