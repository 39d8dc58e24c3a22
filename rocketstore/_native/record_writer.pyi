"""Type stub of rocketstore/_native/record_writer.pyx: messages encoded into CommitLog files,
and the put results."""

import enum
from collections.abc import Iterator
from typing import final

import numpy as np
import numpy.typing as npt

from rocketstore._native.mapped_file import MappedFile
from rocketstore._native.message import Message
from rocketstore._native.topic_queue_table import TopicQueueTable

class PutMessageStatus(enum.IntEnum):
    """RocketMQ's PutMessageStatus, in its order (the results carry these ordinals)."""

    PUT_OK = 0
    FLUSH_DISK_TIMEOUT = 1
    FLUSH_SLAVE_TIMEOUT = 2
    SLAVE_NOT_AVAILABLE = 3
    SERVICE_NOT_AVAILABLE = 4
    CREATE_MAPPED_FILE_FAILED = 5
    MESSAGE_ILLEGAL = 6
    PROPERTIES_SIZE_EXCEEDED = 7
    OS_PAGE_CACHE_BUSY = 8
    UNKNOWN_ERROR = 9

@final
class PutMessageResult:
    """Outcome of one put."""

    @property
    def reason(self) -> str | None:
        """Why a put stored nothing (MESSAGE_ILLEGAL, PROPERTIES_SIZE_EXCEEDED,
        CREATE_MAPPED_FILE_FAILED on a full disk, SERVICE_NOT_AVAILABLE ...), else None."""

    @property
    def status_code(self) -> int: ...
    @property
    def commitlog_offset(self) -> int: ...
    @property
    def queue_offset(self) -> int: ...
    @property
    def wrote_bytes(self) -> int: ...
    @property
    def store_timestamp(self) -> int: ...
    @property
    def uniq_key(self) -> str | None: ...
    @property
    def status(self) -> PutMessageStatus: ...
    @property
    def ok(self) -> bool: ...
    @property
    def msg_id(self) -> str | None:
        """offsetMsgId; None when nothing was stored."""

@final
class PutMessagesResult:
    """Outcome of a batch put; a sequence of PutMessageResult built on demand. The arrays
    are None when the batch was rejected before anything was written."""

    @property
    def reason(self) -> str | None:
        """Why the batch (or its unstored rest) was refused, when known."""

    @property
    def status_code(self) -> int: ...
    @property
    def count(self) -> int:
        """Messages in the batch."""

    @property
    def stored(self) -> int:
        """Messages stored (== count when the status is PUT_OK)."""

    @property
    def commitlog_offsets(self) -> npt.NDArray[np.int64] | None: ...
    @property
    def queue_offsets(self) -> npt.NDArray[np.int64] | None: ...
    @property
    def sizes(self) -> npt.NDArray[np.int32] | None: ...
    @property
    def store_timestamp(self) -> int: ...
    @property
    def status(self) -> PutMessageStatus: ...
    @property
    def ok(self) -> bool: ...
    @property
    def wrote_bytes(self) -> int: ...
    @property
    def msg_ids(self) -> list[str | None]: ...
    def __len__(self) -> int: ...
    def __getitem__(self, i: int, /) -> PutMessageResult: ...
    def __iter__(self) -> Iterator[PutMessageResult]: ...

def put_result(status_code: int, reason: str | None = None) -> PutMessageResult:
    """A result carrying only a status (nothing stored), and why."""

def with_status(res: PutMessageResult, status_code: int) -> PutMessageResult:
    """The same stored message reported with another status (FLUSH_DISK_TIMEOUT ...)."""

def fail_batch(
    res: PutMessagesResult, status_code: int, reason: str | None = None
) -> PutMessagesResult:
    """Mark a batch cut short: res.stored went in, the rest get status_code."""

def rejected_batch(count: int, status_code: int, reason: str | None = None) -> PutMessagesResult:
    """A batch of count messages of which none was stored, and why."""

@final
class RecordWriter:
    """Encodes messages into CommitLog MappedFiles (under the caller's put lock) and owns
    the topic queue table. Never rolls files: it writes the END_FILE blank and says so."""

    @property
    def queue_table(self) -> TopicQueueTable: ...
    @property
    def file_size(self) -> int: ...
    @property
    def max_message_size(self) -> int: ...
    @property
    def store_host(self) -> str: ...
    def __init__(
        self,
        file_size: int,
        max_message_size: int,
        store_host: str,
        queue_table: TopicQueueTable | None = None,
    ) -> None: ...
    def append(
        self, mf: MappedFile, message: Message, queue_id: int
    ) -> PutMessageResult | None:
        """Encode message at mf's write position; None when it did not fit (blank written).
        CREATE_MAPPED_FILE_FAILED (nothing written) when mf's blocks cannot be allocated."""

    def prepare_batch(
        self, messages: list[Message], queue_ids: int | list[int] | tuple[int, ...]
    ) -> PutMessagesResult:
        """Validate a whole batch; nothing is written."""

    def write_batch(self, mf: MappedFile, res: PutMessagesResult) -> bool:
        """Write the prepared batch from res.stored on; False when mf filled up (blank
        written), True when done: complete, or cut short by a full disk (res.status_code
        CREATE_MAPPED_FILE_FAILED)."""

    def write_blank(self, mf: MappedFile) -> None:
        """Close mf with an END_FILE blank at its write position."""
