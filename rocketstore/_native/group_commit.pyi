"""Type stub of rocketstore/_native/group_commit.pyx: the SYNC_FLUSH producer / flush-thread
hand-off, waiting and flushing with the GIL released."""

from collections.abc import Callable
from typing import final

from typing_extensions import Self

from rocketstore._native.mapped_file import MappedFile

RUN_FULL: int
"""run(): the file is durable to its end (the next round starts on the next file)."""
RUN_IDLE: int
"""run(): no producer waited for idle_s."""
RUN_BUSY: int
"""run(): max_busy_s passed."""
RUN_INTERRUPTED: int
"""run(): interrupt() or close() was called."""
RUN_UNAVAILABLE: int
"""run(): the file cannot be flushed natively (closed, read-only, transient pool buffer)."""
FILL_MAX_S: float
"""Default of GroupCommit.fill_max_s."""
FILL_GAP_S: float
"""Default of GroupCommit.fill_gap_s."""

@final
class GroupCommit:
    """Durable-offset board of SYNC_FLUSH: producers wait on it, the flush thread publishes."""

    wake_chains: int
    """A finished flush wakes this many of the producers it covers, and each woken one wakes
    the next (0: all at once). Default 1."""

    fill_max_s: float
    """The longest a round waits for the producers the round before it woke to ask again
    (0: never waits). Default 0.002."""
    fill_gap_s: float
    """A round stops waiting for them when none has asked for this long (they stopped
    producing). Default 0.0005."""

    fill_async: bool
    """request()s count as riders: a round waits for as many as the round before it made
    durable, as it does for waiting producers (default False: the rounds run back to back)."""

    def __new__(cls, flushed_where: int = 0) -> Self: ...
    @property
    def flushed_where(self) -> int:
        """Durable up to this CommitLog offset."""
    @property
    def flushes(self) -> int:
        """Flushes that made data durable so far."""
    @property
    def write_seconds(self) -> float:
        """Time the native rounds spent writing bytes to the file (pwrite) so far."""
    @property
    def sync_seconds(self) -> float:
        """Time the native rounds spent making bytes durable (fdatasync or msync) so far."""
    @property
    def fill_waits(self) -> int:
        """Rounds that waited for the producers the round before woke."""
    @property
    def fill_seconds(self) -> float:
        """Time rounds spent waiting for those producers so far."""
    @property
    def sync(self) -> Callable[[MappedFile, int, int], object] | None:
        """None (fdatasync, or msync of the range for a file written through its mapping),
        or sync(file, start, end), called by the rounds instead, with the GIL; what it
        raises fails the round."""
    @sync.setter
    def sync(self, fn: Callable[[MappedFile, int, int], object] | None) -> None: ...
    @property
    def pending(self) -> int:
        """Producers that asked for a flush since the last one started."""
    @property
    def store_timestamp(self) -> int:
        """Store timestamp of the newest record a native round made durable (0: none)."""
    @property
    def closed(self) -> bool: ...
    def reset(self, flushed_where: int) -> None:
        """Set the durable offset exactly (after recovery) and reopen."""
    def wait_flushed(self, offset: int, timeout_s: float) -> bool:
        """Wait (GIL released) until everything below offset is durable: True, or False on
        timeout or close()."""
    def request(self, offset: int) -> bool:
        """An asynchronous waiter (an event loop's send): the next round makes everything
        below offset durable; returns at once. True when it already is; else notify_fd is
        written once a round made it durable."""
    @property
    def notify_fd(self) -> int:
        """The eventfd a round writes when it made an asynchronous request durable, and
        close() writes (-1: none). Once the setter returns, the old one is never written."""
    @notify_fd.setter
    def notify_fd(self, fd: int) -> None: ...
    def publish(self, flushed_where: int, flushes: int = 0) -> None:
        """A flush done in Python made everything below flushed_where durable."""
    def wait_requests(self, timeout_s: float) -> bool:
        """Wait (GIL released) for a waiting producer, kick(), interrupt() or the timeout;
        True when there is something to flush."""
    def run(self, mf: MappedFile, idle_s: float, max_busy_s: float) -> int:
        """Flush rounds on mf with the GIL released (pwrite of a write-through file's new
        bytes, then fdatasync; msync of the range for a file written through its mapping);
        returns one of the RUN_* codes, raises OSError when the write or the sync fails."""
    def kick(self) -> None:
        """Flush what is written at the next round even with nobody waiting."""
    def interrupt(self) -> None:
        """Make run()/wait_requests() return to Python now (sticky until they do)."""
    def close(self) -> None:
        """Every producer waiting now or later gets its answer at once."""
