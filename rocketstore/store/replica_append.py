"""ReplicaAppender: a slave's CommitLog appends of raw bytes from its master (RocketMQ's
CommitLog.appendData / MappedFile.appendMessage(byte[])).

The master streams its CommitLog as it is on disk, in frames that split records anywhere (and
cover each segment's END_FILE blank to the segment's end). The bytes go into the last segment
at once, but the segment's write position, which readers and dispatch follow, only moves over
whole records: the start of a record not complete yet waits past it (``pending``) for the rest.
So dispatch never meets half a record, and a slave killed mid-record restarts with a torn tail
that recovery trims, reporting the end of its last whole record to the master.
"""
from __future__ import annotations

import logging
import struct
from typing import TYPE_CHECKING

from rocketstore._native import record
from rocketstore.common.record import (
    BLANK_MAGIC_CODE,
    END_FILE_MIN_BLANK_LENGTH,
    MESSAGE_MAGIC_CODE,
    MIN_RECORD_SIZE,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    import numpy as np
    import numpy.typing as npt
    from typing_extensions import Buffer

    from rocketstore._native.mapped_file import MappedFile
    from rocketstore.store.commit_log import CommitLog

log = logging.getLogger(__name__)

_HEAD = struct.Struct(">iI")     # TOTALSIZE, MAGICCODE


class ReplicaAppender:
    """Appends a master's CommitLog bytes to ``commit_log`` (see the module docstring). Every
    call runs under the CommitLog's put lock."""

    def __init__(self, commit_log: CommitLog) -> None:
        self.log = commit_log
        #: bytes of the last segment past its write position: a record not complete yet
        self.pending = 0

    def end(self) -> int:
        """Where the next append must start: the readable end plus the pending bytes."""
        return self.log.queue.max_wrote_offset() + self.pending

    def drop_pending(self) -> None:
        """Zero the bytes of a record not complete yet (at shutdown: a clean store ends at
        its last whole record; the master sends that record again)."""
        mf = self.log.queue.last_file()
        if self.pending and mf is not None and not self.log.read_only:
            mf.zero_range(mf.wrote_position, self.pending)
        self.pending = 0

    def append(self, offset: int, data: Buffer | Sequence[Buffer]) -> int:
        """Write data (one buffer, or several that follow each other: the bodies of the
        frames one read brought) at offset, which must be end() (or, in an empty CommitLog,
        a segment start: where the master began to send). Returns the new end(). ValueError
        naming the offset when it is not where the log ends, or when the bytes are not
        CommitLog records (the records before them stay; the bad bytes are dropped)."""
        parts: Sequence[Buffer] = data if isinstance(data, (list, tuple)) \
            else [data]  # type: ignore[list-item]
        pieces = [memoryview(d).cast("B") for d in parts]
        segment = self.log.queue.mapped_file_size
        with self.log.put_lock:
            if self.log.closed:
                raise ValueError("the CommitLog is shut down")
            queue = self.log.queue
            end = self.end()
            if queue.last_file() is None:
                if offset % segment:
                    raise ValueError(f"offset {offset}: an empty CommitLog starts at a segment "
                                     f"start (a multiple of {segment})")
            elif offset != end:
                raise ValueError(f"offset {offset} is not where the CommitLog ends ({end})")
            written = 0
            dirty: MappedFile | None = None     # written to, its records not published yet
            for view in pieces:
                done = 0
                while done < len(view):
                    mf = queue.last_file()
                    if mf is None or mf.wrote_position + self.pending >= mf.file_size:
                        mf = queue.last_file_for_append(offset + written)
                    pos = mf.wrote_position + self.pending
                    n = min(mf.file_size - pos, len(view) - done)
                    mf.write_at(pos, view[done:done + n])
                    self.pending += n
                    done += n
                    written += n
                    dirty = mf
                    if pos + n == mf.file_size:     # the segment must be complete now
                        self._publish(mf)
                        dirty = None
            if dirty is not None:
                self._publish(dirty)
        return self.end()

    def _publish(self, mf: MappedFile) -> None:
        """Move mf's write position over the whole records among its pending bytes."""
        start = mf.wrote_position
        avail = self.pending
        window = mf.view(start, avail)
        try:
            found = record.scan_region(window, 0, avail, check_crc=False,
                                       base_offset=mf.file_from_offset + start)
            whole = found.stop_position
            waiting, problem = self._after_whole(window, whole, avail, mf.file_size - start,
                                                 found.reason)
        finally:
            window.release()
        if problem is not None:
            at = mf.file_from_offset + start + whole
            mf.zero_range(start + whole, avail - whole)
            self.pending = whole
            self._advance(mf, start, whole, found.store_timestamps)
            raise ValueError(f"bytes at CommitLog offset {at} are not a record: {problem}")
        if not waiting:         # a blank: the segment is complete
            whole = avail
        self._advance(mf, start, whole, found.store_timestamps)

    def _advance(self, mf: MappedFile, start: int, whole: int,
                 stamps: npt.NDArray[np.int64]) -> None:
        if whole <= 0:
            return
        if len(stamps):
            mf.store_timestamp = int(stamps[-1])
        mf.wrote_position = start + whole
        self.pending -= whole

    @staticmethod
    def _after_whole(window: memoryview, whole: int, avail: int, to_file_end: int,
                     reason: str | None) -> tuple[bool, str | None]:
        """What stands after the whole records: (wait for more bytes, problem). A blank that
        reaches the segment's end with every byte there completes the segment (False,
        None)."""
        rest = avail - whole
        if rest < END_FILE_MIN_BLANK_LENGTH:
            return True, None
        size, magic = _HEAD.unpack_from(window, whole)
        room = to_file_end - whole
        if magic == BLANK_MAGIC_CODE:
            if size != room:
                return True, f"END_FILE blank of {size} bytes where {room} are left"
            return rest < room, None
        if magic == MESSAGE_MAGIC_CODE and MIN_RECORD_SIZE <= size <= room and size > rest:
            return True, None       # the rest of this record is still to come
        return True, reason or "zeroed bytes"
