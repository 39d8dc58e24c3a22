"""MappedFileQueue: a directory of equal-size segment files named by their start offset.

Readers find files lock-free: the file list is replaced, never mutated in place, so a reader
holding the old list still sees a consistent sequence. Writers of the list (a roll appending a
file, retention deleting the oldest, recovery truncating) take a small lock so that neither
undoes the other's change.
"""
from __future__ import annotations

import bisect
import logging
import os
import threading
from collections.abc import Callable

from rocketstore._native.file_blocks import DEFAULT_ALLOCATION_CHUNK
from rocketstore._native.mapped_file import MappedFile
from rocketstore.store.layout import (
    SEGMENT_NAME_DIGITS,
    StoreFormatError,
    is_segment_name,
    segment_name,
)

log = logging.getLogger(__name__)

#: How the flush services make bytes durable: sync(file, start, end) returns once bytes
#: [start, end) of that file (positions in the file) are durable, and raises when they could
#: not be made so. MappedFile.sync (fdatasync of a write-through file, else msync of the
#: range) unless a test injects another (see MessageStore.open).
FlushFunction = Callable[[MappedFile, int, int], None]


def last_modified_ms(mf: MappedFile) -> int:
    """The file's last modification time in ms (RocketMQ getLastModifiedTimestamp); 0 when
    it is gone."""
    try:
        return os.stat(mf.file_name).st_mtime_ns // 1_000_000
    except OSError:
        return 0


def remove_creating_leftovers(directory: str) -> int:
    """Delete '.<name>.creating' files a process killed while creating a file left behind
    (MappedFile creates under that name and renames it in); returns how many."""
    removed = 0
    for name in os.listdir(directory):
        if name.startswith(".") and name.endswith(".creating"):
            path = os.path.join(directory, name)
            log.warning("removing %s, left by a process killed while creating it", path)
            os.remove(path)
            removed += 1
    return removed


def _start_of(mf: MappedFile) -> int:
    return mf.file_from_offset


class MappedFileQueue:
    def __init__(
        self,
        store_path: str | os.PathLike[str],
        mapped_file_size: int,
        *,
        read_only: bool = False,
        preallocate: bool = False,
        allocation_chunk: int = DEFAULT_ALLOCATION_CHUNK,
        allocate: Callable[[str, str | None, int], MappedFile] | None = None,
        prepare: Callable[[MappedFile], None] | None = None,
    ) -> None:
        if mapped_file_size <= 0:
            raise ValueError(f"mapped_file_size must be positive, got {mapped_file_size}")
        self.store_path = os.fspath(store_path)
        self.mapped_file_size = mapped_file_size
        self.read_only = read_only
        self.preallocate = preallocate
        # files are sparse; blocks on disk come allocation_chunk at a time (MappedFile)
        self.allocation_chunk = allocation_chunk
        # allocate(path, next_path, size): the AllocateMappedFileService hook; None = direct.
        self._allocate = allocate
        # prepare(file): run on a new file before anyone else sees it (write-through mode)
        self._prepare = prepare
        self._files: list[MappedFile] = []
        self.problems: list[str] = []      # short or missing segments found by load()
        self.missing_from: list[int] = []  # where each such hole begins (queue offsets)
        self._files_lock = threading.Lock()     # replacing _files (see the module docstring)
        self.flushed_where = 0
        self.committed_where = 0
        self.store_timestamp = 0    # newest store time made durable by a thorough flush

    # ---- loading ---------------------------------------------------------------------------
    def load(self) -> None:
        """Open every segment in order. Foreign names, files of another size than a segment
        (longer) and misaligned names are refused (StoreFormatError). A segment cut short is
        damage, not a reason to refuse the store: a writer extends it to its size with zeros,
        a reader maps what is there (an empty one not at all); a missing segment leaves a
        gap. Both are logged at ERROR and listed in ``problems``; the CommitLog's recovery
        reports the bytes as damaged (or as a torn tail at the end)."""
        self.problems = []
        self.missing_from = []
        if not os.path.isdir(self.store_path):
            if self.read_only:
                self._files = []
                return
            os.makedirs(self.store_path, exist_ok=True)
        if not self.read_only:
            remove_creating_leftovers(self.store_path)
        names = sorted(os.listdir(self.store_path))
        files: list[MappedFile] = []
        expected: int | None = None
        try:
            for name in names:
                path = os.path.join(self.store_path, name)
                if not os.path.isfile(path) or name.startswith("."):
                    continue
                if not is_segment_name(name):
                    raise StoreFormatError(f"unexpected file {path}: segment names are "
                                           f"{SEGMENT_NAME_DIGITS}-digit start offsets")
                start = int(name)
                size = os.path.getsize(path)
                if size > self.mapped_file_size:
                    raise StoreFormatError(
                        f"segment {path} is {size} bytes; every segment here must be "
                        f"{self.mapped_file_size} bytes (check mapped_file_size_* in the "
                        "config)")
                if start % self.mapped_file_size:
                    raise StoreFormatError(f"segment {path} starts at {start}, not a multiple "
                                           f"of the segment size {self.mapped_file_size}")
                if expected is not None and start != expected:
                    self._problem(f"segments missing in {self.store_path}: [{expected}, "
                                  f"{start}) has no file")
                    self.missing_from.append(expected)
                mapped = self.mapped_file_size
                if size < self.mapped_file_size:
                    self.missing_from.append(start + size)
                    if self.read_only:
                        self._problem(f"segment {path} is {size:,} bytes, not "
                                      f"{self.mapped_file_size:,}: read up to its end")
                        mapped = size
                    else:
                        self._problem(f"segment {path} is {size:,} bytes, not "
                                      f"{self.mapped_file_size:,}: extended with zeros")
                        os.truncate(path, self.mapped_file_size)
                expected = start + self.mapped_file_size
                if mapped == 0:
                    continue
                mf = MappedFile(path, mapped, create=False, read_only=self.read_only,
                                allocation_chunk=self.allocation_chunk)
                mf.wrote_position = mapped
                mf.flushed_position = mapped
                mf.committed_position = mapped
                files.append(mf)
        except BaseException:
            for mf in files:
                mf.close()
            raise
        self._files = files

    def _problem(self, text: str) -> None:
        log.error("%s", text)
        self.problems.append(text)

    # ---- lookup ----------------------------------------------------------------------------
    @property
    def files(self) -> list[MappedFile]:
        return self._files

    def __len__(self) -> int:
        return len(self._files)

    def first_file(self) -> MappedFile | None:
        files = self._files
        return files[0] if files else None

    def last_file(self) -> MappedFile | None:
        files = self._files
        return files[-1] if files else None

    def min_offset(self) -> int:
        """Offset of the first file's first byte; past it when that file is being deleted
        (shut down, waiting for its readers: RocketMQ getMinOffset)."""
        files = self._files
        if not files:
            return 0
        first = files[0]
        if first.is_available or len(files) == 1:
            return first.file_from_offset
        return first.file_from_offset + self.mapped_file_size

    def max_offset(self) -> int:
        """End of what readers may see (the last file's read position)."""
        files = self._files
        if not files:
            return 0
        last = files[-1]
        return last.file_from_offset + last.read_position

    def max_wrote_offset(self) -> int:
        files = self._files
        if not files:
            return 0
        last = files[-1]
        return last.file_from_offset + last.wrote_position

    def find_by_offset(self, offset: int, return_first_on_not_found: bool = False
                       ) -> MappedFile | None:
        files = self._files
        if not files:
            return None
        first = files[0].file_from_offset
        index = (offset - first) // self.mapped_file_size
        if offset >= first:
            if index < len(files):
                mf = files[index]
                if mf.file_from_offset <= offset < mf.file_from_offset + mf.file_size:
                    return mf
            last = files[-1]
            if last.file_from_offset - first != (len(files) - 1) * self.mapped_file_size:
                # a gap (a missing segment): the arithmetic does not hold, search
                i = bisect.bisect_right(files, offset, key=_start_of) - 1
                if i >= 0 and files[i].file_from_offset <= offset < \
                        files[i].file_from_offset + files[i].file_size:
                    return files[i]
        return files[0] if return_first_on_not_found else None

    def read_view(self, offset: int, max_bytes: int | None = None) -> memoryview | None:
        """The readable bytes from offset to its file's read position (at most max_bytes), as
        a view that pins the file; None when nothing is readable there."""
        mf = self.find_by_offset(offset)
        if mf is None:
            return None
        pos = offset - mf.file_from_offset
        limit = mf.read_position
        if pos >= limit:
            return None
        return mf.view(pos, limit - pos if max_bytes is None else min(max_bytes, limit - pos))

    # ---- growth ----------------------------------------------------------------------------
    def _next_file_offset(self, last: MappedFile | None, start_offset: int) -> int:
        if last is None:
            return start_offset - start_offset % self.mapped_file_size
        return int(last.file_from_offset + self.mapped_file_size)

    def next_file_path(self, start_offset: int = 0) -> str:
        """The path of the file last_file_for_append would create next."""
        files = self._files
        return os.path.join(self.store_path, segment_name(
            self._next_file_offset(files[-1] if files else None, start_offset)))

    def last_file_for_append(self, start_offset: int = 0) -> MappedFile:
        """The file to append to, creating the next one when the last is full (or none)."""
        files = self._files
        last = files[-1] if files else None
        if last is not None and not last.is_full:
            return last
        if self.read_only:
            raise PermissionError(f"{self.store_path} is opened read-only")
        create_offset = self._next_file_offset(last, start_offset)
        path = os.path.join(self.store_path, segment_name(create_offset))
        next_path = os.path.join(self.store_path,
                                 segment_name(create_offset + self.mapped_file_size))
        if self._allocate is not None:
            mf = self._allocate(path, next_path, self.mapped_file_size)
        else:
            os.makedirs(self.store_path, exist_ok=True)
            mf = MappedFile(path, self.mapped_file_size, preallocate=self.preallocate,
                            allocation_chunk=self.allocation_chunk)
        if self._prepare is not None:
            self._prepare(mf)
        with self._files_lock:
            if not self._files:
                self.flushed_where = self.committed_where = create_offset
            self._files = [*self._files, mf]
        return mf

    # ---- flushing --------------------------------------------------------------------------
    def flush(self, least_pages: int = 0, sync: FlushFunction | None = None) -> bool:
        """Flush the file holding flushed_where (a write-through file commits its new bytes
        first); True when nothing was left to flush. sync(file, start, end) replaces the
        file's own fdatasync / msync of the range."""
        mf = self.find_by_offset(self.flushed_where, self.flushed_where == 0)
        if mf is None:
            return True
        newest = mf.store_timestamp     # read first: the flush covers at least this record
        if sync is None:
            where = mf.file_from_offset + mf.flush(least_pages)
        else:
            if mf.write_through:
                mf.commit(0)
            start, end = mf.dirty_range(least_pages)
            if end > start:
                sync(mf, start, end)
                mf.flushed_position = end
            where = mf.file_from_offset + mf.flushed_position
        done = where == self.flushed_where
        self.flushed_where = where
        if least_pages == 0:
            self.store_timestamp = newest
        return done

    def commit(self, least_pages: int = 0) -> tuple[bool, list]:
        """Commit the file holding committed_where from its transient buffer (RocketMQ
        commit); returns (nothing was left, buffers handed back by full files)."""
        mf = self.find_by_offset(self.committed_where, self.committed_where == 0)
        if mf is None:
            return True, []
        committed, returned = mf.commit(least_pages)
        where = mf.file_from_offset + committed
        done = where == self.committed_where
        self.committed_where = where
        return done, [returned] if returned is not None else []

    def flush_all(self) -> None:
        files = self._files
        newest = files[-1].store_timestamp if files else 0
        for mf in files:
            mf.flush(0)
        self.flushed_where = self.max_offset()
        if newest > 0:
            self.store_timestamp = newest

    # ---- trimming --------------------------------------------------------------------------
    def truncate_dirty(self, offset: int, *, zero_tail: bool = True) -> int:
        """Make offset the end: positions set there, later files deleted, and with zero_tail
        the rest of its file zeroed so stale bytes can never be read back as records.

        Returns the number of bytes given up (rest of the end file plus later files)."""
        dropped = 0
        keep: list[MappedFile] = []
        for mf in self._files:
            end = mf.file_from_offset + self.mapped_file_size
            if end <= offset:
                keep.append(mf)
                continue
            if mf.file_from_offset <= offset:
                pos = offset - mf.file_from_offset
                if zero_tail and not self.read_only:
                    dropped += self.mapped_file_size - pos
                    mf.zero_range(pos, self.mapped_file_size - pos)
                mf.wrote_position = pos
                mf.committed_position = pos
                mf.flushed_position = min(mf.flushed_position, pos)
                keep.append(mf)
            else:
                dropped += self.mapped_file_size
                if self.read_only:
                    mf.close()
                elif not mf.destroy(1000):
                    # still held (a reader, the dispatcher): detach it now, so the file is
                    # gone and cannot come back at the next open
                    mf.destroy(0)
        with self._files_lock:
            self._files = keep
        self.flushed_where = min(self.flushed_where, offset)
        self.committed_where = min(self.committed_where, offset)
        return dropped

    def delete_before(self, offset: int, interval_forcibly_ms: float = 1000,
                      now_ms: float = -1) -> int:
        """Delete whole files that end at or before offset (never the last one), oldest
        first, stopping at one still held by a reader (it is shut down: no new holders; a
        later call deletes it, forcibly after interval_forcibly_ms). Returns the count."""
        gone: list[MappedFile] = []
        for mf in self._files[:-1]:
            if mf.file_from_offset + self.mapped_file_size > offset:
                break
            if not mf.destroy(interval_forcibly_ms, now_ms):
                break
            gone.append(mf)
        self._forget(gone)
        return len(gone)

    def expired_by_time(self, expired_ms: int, now_ms: int, clean_immediately: bool,
                        limit: int = 10) -> list[MappedFile]:
        """The files deleteExpiredFileByTime would take, oldest first: up to limit files
        (never the last one) last modified expired_ms or more before now_ms, or any when
        clean_immediately; it stops at the first one that is not, so files are never
        deleted from the middle."""
        out: list[MappedFile] = []
        for mf in self._files[:-1]:
            if len(out) >= limit:
                break
            if not clean_immediately and now_ms < last_modified_ms(mf) + expired_ms:
                break
            out.append(mf)
        return out

    def delete_expired_by_time(self, expired_ms: int, now_ms: int, clean_immediately: bool, *,
                               delete_interval_s: float = 0.0,
                               interval_forcibly_ms: float = 0.0, now_mono_ms: float = -1,
                               pause: Callable[[float], None] | None = None,
                               limit: int = 10) -> list[MappedFile]:
        """RocketMQ deleteExpiredFileByTime: delete the files expired_by_time names, oldest
        first, pausing delete_interval_s between two (pause(seconds)); a file still held by
        a reader stops the run (it is shut down and deleted later, forcibly after
        interval_forcibly_ms). Returns the files deleted."""
        candidates = self.expired_by_time(expired_ms, now_ms, clean_immediately, limit)
        gone: list[MappedFile] = []
        for i, mf in enumerate(candidates):
            if not mf.destroy(interval_forcibly_ms, now_mono_ms):
                break
            gone.append(mf)
            self._forget([mf])
            if delete_interval_s > 0 and i + 1 < len(candidates) and pause is not None:
                pause(delete_interval_s)
        return gone

    def retry_delete_first_file(self, interval_forcibly_ms: float,
                                now_ms: float = -1) -> bool:
        """RocketMQ retryDeleteFirstFile: a first file left shut down by a deletion that
        waited for its readers is destroyed now if it can be (forcibly after the interval).
        True when one was deleted."""
        files = self._files
        if len(files) < 2 or files[0].is_available:
            return False
        mf = files[0]
        if not mf.destroy(interval_forcibly_ms, now_ms):
            return False
        self._forget([mf])
        return True

    def _forget(self, gone: list[MappedFile]) -> None:
        if gone:
            gone_ids = {id(mf) for mf in gone}
            with self._files_lock:
                self._files = [mf for mf in self._files if id(mf) not in gone_ids]

    def close(self) -> None:
        for mf in self._files:
            mf.close()

    def total_bytes(self) -> int:
        return len(self._files) * self.mapped_file_size
