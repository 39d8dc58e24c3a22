"""Type stub of rocketstore/_native/put_path.pyx: the put lock and the put path."""

from collections.abc import Callable
from typing import final

from rocketstore._native.group_commit import GroupCommit
from rocketstore._native.mapped_file import MappedFile
from rocketstore._native.message import Message
from rocketstore._native.record_writer import PutMessageResult, RecordWriter

HOLD_RANGE_BOUNDS: tuple[int, ...]
HOLD_BUCKET_CEILINGS: tuple[int | None, ...]

@final
class PutLock:
    """The CommitLog's put lock; blocking waits release the GIL. A context manager."""

    def acquire(self) -> bool: ...
    def release(self) -> None: ...
    @property
    def held_ns(self) -> int:
        """Nanoseconds the current holder has held the lock (0 while it is free), to a few ms."""
    def note_put(self) -> None:
        """Count the current hold as one put's time."""
    def hold_times(self) -> tuple[list[int], list[int], int]:
        """(puts per putMessageDistributeTime range, per percentile bucket, longest hold ms)."""
    def __enter__(self) -> PutLock: ...
    def __exit__(self, *exc: object) -> bool: ...

@final
class PutPath:
    """CommitLog.put_message's fast path: lock, append to `file`, result, in one native call.
    `slow(message, queue_id)` runs under the lock when `file` is None or full; `after(result,
    message)`, when set, runs after the lock; with wait_for_flush (SYNC_FLUSH) a put waits
    natively, after the lock, until its bytes are durable. While `accepting` is False every
    put is SERVICE_NOT_AVAILABLE with `refusal` as its reason."""

    file: MappedFile | None
    slow: Callable[[Message, int], PutMessageResult]
    after: Callable[[PutMessageResult, Message], PutMessageResult] | None
    accepting: bool
    refusal: str | None
    @property
    def lock(self) -> PutLock: ...
    @property
    def writer(self) -> RecordWriter: ...
    @property
    def sync_group(self) -> GroupCommit | None:
        """The group commit puts wait on (SYNC_FLUSH), or None."""
    def wait_for_flush(self, group: GroupCommit | None, timeout_s: float) -> None:
        """A stored put (WAIT not "false") returns once group made its bytes durable, or
        FLUSH_DISK_TIMEOUT after timeout_s; others kick the flusher. None: no waiting."""
    def __init__(
        self, writer: RecordWriter, slow: Callable[[Message, int], PutMessageResult]
    ) -> None: ...
    def __call__(self, message: Message, queue_id: int = 0) -> PutMessageResult: ...
    def put(self, message: Message, queue_id: int = 0) -> PutMessageResult:
        """The same as calling the put path, called without an argument tuple (a bound
        method is a vectorcall): MessageStore.put_message."""
    def append(self, message: Message, queue_id: int = 0) -> PutMessageResult:
        """The put without the after hook: appended, not waited for."""
    def append_hooked(self, message: Message, queue_id: int = 0) -> PutMessageResult:
        """append, then the after hook (no SYNC_FLUSH wait): CommitLog.append_message."""
