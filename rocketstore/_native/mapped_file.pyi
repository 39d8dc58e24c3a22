"""Type stub of rocketstore/_native/mapped_file.pyx: one fixed-size memory-mapped file."""

import os

from typing_extensions import Buffer, disjoint_base

from rocketstore._native.stop_flag import StopFlag

@disjoint_base
class MappedFile:
    """One fixed-size file mapped into memory (RocketMQ's MappedFile), with hold/release
    counting so it is never unmapped under a live view. A new file is sparse; blocks are
    allocated from the start as writes need them, and no write goes past them."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        file_size: int,
        *,
        create: bool = True,
        read_only: bool = False,
        file_from_offset: int | None = None,
        preallocate: bool = False,
        allocation_chunk: int = ...,
    ) -> None:
        """Open (or create, sparse) path and map file_size bytes; file_from_offset defaults
        to the file's name when it is all digits. preallocate: a new file gets blocks for
        its first allocation_chunk bytes at once (OSError and no file when the disk has no
        room)."""

    @property
    def file_name(self) -> str:
        """The file's path."""

    @property
    def file_from_offset(self) -> int:
        """Offset of the file's first byte in its log."""

    @property
    def file_size(self) -> int: ...
    @property
    def read_only(self) -> bool: ...
    @property
    def write_through(self) -> bool:
        """Appends go to an own buffer, committed by pwrite and made durable by fdatasync
        (enable_write_through)."""

    # ---- positions ----
    @property
    def wrote_position(self) -> int:
        """Bytes appended."""

    @wrote_position.setter
    def wrote_position(self, pos: int) -> None: ...
    @property
    def committed_position(self) -> int:
        """Bytes in the file (== wrote_position without a write buffer)."""

    @committed_position.setter
    def committed_position(self, pos: int) -> None: ...
    @property
    def flushed_position(self) -> int:
        """Bytes made durable (msync, or fdatasync of a write-through file)."""

    @flushed_position.setter
    def flushed_position(self, pos: int) -> None: ...
    @property
    def read_position(self) -> int:
        """Bytes a reader may see (committed ones when appends go to a buffer)."""

    @property
    def store_timestamp(self) -> int:
        """Store timestamp (ms) of the newest record written here."""

    @store_timestamp.setter
    def store_timestamp(self, ts: int) -> None: ...
    @property
    def is_full(self) -> bool: ...
    @property
    def is_available(self) -> bool:
        """False once shut down (no new holders)."""

    @property
    def ref_count(self) -> int: ...
    @property
    def is_cleanup_over(self) -> bool:
        """True once unmapped and closed."""

    @property
    def allocated_position(self) -> int:
        """[0, allocated_position) has blocks on disk; writes never go past it."""

    @property
    def allocation_chunk(self) -> int:
        """How far beyond what a write needs an allocation goes, bytes."""

    @allocation_chunk.setter
    def allocation_chunk(self, chunk: int) -> None: ...
    @property
    def reads_allocate(self) -> bool:
        """True when reading a hole of the file takes space (tmpfs)."""

    @property
    def allocation_error(self) -> int:
        """errno of the last failed allocation (0: none)."""

    # ---- blocks on disk ----
    def allocate_to(self, end: int) -> int:
        """Give [0, end) blocks on disk, a chunk at a time; returns the allocated position.
        Raises OSError (ENOSPC ...) when the disk has no room, with nothing changed."""

    # ---- writes ----
    def append(self, data: Buffer) -> bool:
        """Copy data at the write position; False (nothing written) when it does not fit.
        OSError (nothing written) when its blocks cannot be allocated."""

    def write_at(self, pos: int, data: Buffer) -> None:
        """Copy data at pos without moving a position (OSError when no blocks can be had)."""

    def zero_range(self, pos: int, size: int) -> None:
        """Zero [pos, pos+size); a range to the end of the file gives its whole pages'
        blocks back."""

    # ---- reads ----
    def view(self, pos: int, size: int) -> memoryview:
        """Zero-copy read-only view of [pos, pos+size) that pins the file."""

    def read(self, pos: int, size: int) -> bytes:
        """A copy of [pos, pos+size)."""

    # ---- reference counting ----
    def hold(self) -> bool:
        """Take a reference; False when the file is shutting down."""

    def release(self) -> None:
        """Drop a reference; the last one after shutdown unmaps the file."""

    def shutdown(self, interval_forcibly_ms: float = 0.0, now_ms: float = -1.0) -> None:
        """Refuse new holders; after the interval, detach from old ones. now_ms: the
        caller's monotonic clock (default time.monotonic)."""

    def destroy(self, interval_forcibly_ms: float = 0.0, now_ms: float = -1.0) -> bool:
        """Shut down and delete the file; True once it is gone."""

    def close(self) -> None:
        """Flush and let go of the mapping (live views keep it mapped)."""

    # ---- flush and commit ----
    def dirty_range(self, least_pages: int = 0) -> tuple[int, int]:
        """(start, end) that flush(least_pages) would make durable now; end == start when
        nothing (or fewer than least_pages pages, the file not full) is dirty."""

    def flush(self, least_pages: int = 0) -> int:
        """Make [flushed, committed) durable (a write-through file commits first); returns
        the flushed position."""

    def sync(self, start: int, end: int) -> None:
        """Make [start, end) durable now (fdatasync of a write-through file, else msync of
        the range) without moving a position; OSError on failure."""

    def enable_write_through(self) -> None:
        """Appends go to an own anonymous buffer from now on; commit() writes them to the
        file with pwrite, flush() then fdatasyncs. Readers see committed bytes only."""

    def set_write_buffer(self, buffer: Buffer) -> None:
        """Lend a writable buffer of file_size bytes (TransientStorePool) for appends."""

    def commit(self, least_pages: int = 0) -> tuple[int, Buffer | None]:
        """Hand the write buffer's new bytes to the file (pwrite for a write-through file,
        a copy into the mapping for a pool buffer); (committed position, the pool buffer
        given back once the file is full, else None)."""

    # ---- page cache hints ----
    def prefault(self, start: int, length: int) -> int:
        """Fault [start, start+length) in for writing ahead of the writer, bytes unchanged
        (MADV_POPULATE_WRITE, else an atomic touch per page); safe beside appends. Returns
        the end position reached (start when closing or writing to a pool buffer)."""

    def prefault_follow(
        self, ahead: int, start: int, interval_s: float, stop: StopFlag, chunk: int = 1 << 20
    ) -> int:
        """Without the GIL, keep [wrote, wrote+ahead) faulted in as the writer advances,
        checking every interval_s, until the file is full, shut down or stop is set; start
        is how far an earlier call got. Returns how far this one got."""

    def warm(self, flush_disk_type: str = "ASYNC_FLUSH", pages: int = 4096) -> None:
        """Touch every page, then madvise(WILLNEED) and mlock (soft failures)."""

    def madvise_willneed(self) -> bool: ...
    def mlock(self) -> bool: ...
    def munlock(self) -> bool: ...
