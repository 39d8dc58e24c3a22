"""Type stub of rocketstore/_native/codec.pyx: the CommitLog record codec (FORMAT.md)."""

from collections.abc import Callable, Iterator, Sequence
from typing import Any, Final, Literal, TypeAlias, final

import numpy as np
import numpy.typing as npt
from typing_extensions import Buffer

from rocketstore._native.mapped_file import MappedFile
from rocketstore.message import PutMessageStatus

_Host: TypeAlias = str | tuple[str, int]
"""'a.b.c.d:port', '[v6]:port', or an (address, port) tuple."""

_RecordStatus: TypeAlias = Literal["ok", "blank", "end", "corrupt"]
_StopStatus: TypeAlias = Literal["end", "blank", "corrupt", "limit"]

CRC32_IMPL: Final[str]
"""Which CRC-32 implementation the C helper selected at import (e.g. a SIMD one)."""
PROPERTY_TAGS: Final[str]
PROPERTY_KEYS: Final[str]
PROPERTY_UNIQ_KEY: Final[str]

# ---- checksums and hashes --------------------------------------------------------------------

def crc32(data: Buffer, value: int = 0) -> int:
    """CRC-32 (zlib's) of a contiguous buffer, continuing from value."""

def body_crc(data: Buffer) -> int:
    """BODYCRC as RocketMQ stores it: CRC-32 & 0x7FFFFFFF."""

def java_hash(s: str) -> int:
    """Java String.hashCode of s (int32, over UTF-16 code units)."""

# ---- hosts and ids -----------------------------------------------------------------------------

def parse_host(host: _Host) -> tuple[bytes, int]:
    """_Host -> (4- or 16-byte raw address, port). ValueError naming the text if invalid."""

def format_host(raw: Buffer, port: int) -> str:
    """Raw address and port -> 'a.b.c.d:port' or '[v6]:port' (RFC 5952)."""

def make_msg_id(store_host: _Host, offset: int) -> str:
    """offsetMsgId (store address + port + CommitLog offset, uppercase hex)."""

def parse_msg_id(msg_id: str) -> tuple[str, int]:
    """offsetMsgId -> (store host 'ip:port', CommitLog offset)."""

def new_uniq_key() -> str:
    """A fresh UNIQ_KEY as RocketMQ's client builds it."""

def validate_topic(topic: str) -> None:
    """RocketMQ's topic rule (1..127 of [%|a-zA-Z0-9_-]); ValueError/TypeError otherwise."""

# ---- messages ----------------------------------------------------------------------------------

class Message:
    """A message to put; ``properties`` holds user and system properties."""

    topic: str
    body: bytes
    flag: int
    born_timestamp: int | None
    born_host: _Host | None
    store_host: _Host | None
    sys_flag: int
    reconsume_times: int
    prepared_transaction_offset: int

    def __init__(
        self,
        topic: str,
        body: bytes | bytearray | memoryview = b"",
        tags: str | None = None,
        keys: str | Sequence[str] | None = None,
        properties: dict[str, str] | None = None,
        flag: int = 0,
        born_timestamp: int | None = None,
        born_host: _Host | None = None,
        *,
        store_host: _Host | None = None,
        sys_flag: int = 0,
        reconsume_times: int = 0,
        prepared_transaction_offset: int = 0,
        delay_level: int | None = None,
        uniq_key: str | None = None,
    ) -> None: ...
    @property
    def tags(self) -> str | None:
        """The TAGS property."""

    @tags.setter
    def tags(self, value: str | None) -> None: ...
    @property
    def keys(self) -> list[str]:
        """The KEYS tokens (the property is space-separated)."""

    @keys.setter
    def keys(self, value: str | Sequence[str] | None) -> None: ...
    @property
    def properties(self) -> dict[str, str]:
        """Every property. A UNIQ_KEY the put generated joins the dict on its first read
        after the put (the put path keeps it as text in the message until then)."""

    @properties.setter
    def properties(self, value: dict[str, str] | None) -> None: ...
    @property
    def uniq_key(self) -> str | None:
        """The UNIQ_KEY property (generated at put time when absent)."""

    @uniq_key.setter
    def uniq_key(self, value: str | None) -> None: ...
    @property
    def delay_level(self) -> int:
        """The DELAY property as an int (0: not delayed)."""

    def __reduce__(self) -> tuple[Any, ...]: ...

class CorruptRecordError(ValueError):
    """A record that fails validation; ``offset`` says where."""

    offset: int | None
    def __init__(self, message: str, offset: int | None = None) -> None: ...

@final
class MessageExt:
    """A stored message decoded from its record; body and record are zero-copy views that
    pin their mapped file."""

    @property
    def record(self) -> memoryview:
        """The whole record."""

    @property
    def topic(self) -> str: ...
    @property
    def queue_id(self) -> int: ...
    @property
    def queue_offset(self) -> int: ...
    @property
    def commitlog_offset(self) -> int: ...
    @property
    def store_size(self) -> int: ...
    @property
    def body_crc(self) -> int: ...
    @property
    def flag(self) -> int: ...
    @property
    def sys_flag(self) -> int: ...
    @property
    def born_timestamp(self) -> int: ...
    @property
    def store_timestamp(self) -> int: ...
    @property
    def reconsume_times(self) -> int: ...
    @property
    def prepared_transaction_offset(self) -> int: ...
    @property
    def body(self) -> memoryview: ...
    @property
    def properties_string(self) -> str:
        """The stored properties text (name\\x01value pairs joined by \\x02)."""

    @property
    def properties(self) -> dict[str, str]:
        """Parsed as RocketMQ's string2messageProperties (empty values dropped)."""

    @property
    def tags(self) -> str | None: ...
    @property
    def keys(self) -> list[str]: ...
    @property
    def uniq_key(self) -> str | None: ...
    @property
    def tags_code(self) -> int:
        """Java hashCode of TAGS, 0 when absent."""

    @property
    def born_host(self) -> str: ...
    @property
    def store_host(self) -> str: ...
    @property
    def msg_id(self) -> str:
        """offsetMsgId of the record."""

    @property
    def transaction_type(self) -> int:
        """sys_flag & 0xC."""

    def to_dict(self, body_b64: bool = True) -> dict[str, Any]:
        """The fields named as in the RocketMQ fixture's messages.jsonl (body_b64, or body
        as bytes when body_b64 is False)."""

# ---- queue offsets -----------------------------------------------------------------------------

class TopicQueueTable:
    """Next logical offset of every (topic, queue id)."""

    def get(self, topic: str, queue_id: int) -> int:
        """Next queue offset (0 for a queue not seen)."""

    def set(self, topic: str, queue_id: int, next_offset: int) -> None: ...
    def remove(self, topic: str) -> None: ...
    def clear(self) -> None: ...
    def items(self) -> list[tuple[str, int, int]]:
        """(topic, queue_id, next_offset) of every queue seen, sorted."""

    def __len__(self) -> int: ...

# ---- results -----------------------------------------------------------------------------------

@final
class PutMessageResult:
    """Outcome of one put."""

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

def put_result(status_code: int) -> PutMessageResult:
    """A result carrying only a status (nothing stored)."""

def with_status(res: PutMessageResult, status_code: int) -> PutMessageResult:
    """The same stored message reported with another status (FLUSH_DISK_TIMEOUT ...)."""

def fail_batch(res: PutMessagesResult, status_code: int) -> PutMessagesResult:
    """Mark a batch cut short: res.stored went in, the rest get status_code."""

# ---- encoding ----------------------------------------------------------------------------------

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
    def append(self, mf: MappedFile, msg: Message, queue_id: int) -> PutMessageResult | None:
        """Encode msg at mf's write position; None when it did not fit (blank written)."""

    def prepare_batch(
        self, messages: list[Message], queue_ids: int | list[int] | tuple[int, ...]
    ) -> PutMessagesResult:
        """Validate a whole batch; nothing is written."""

    def write_batch(self, mf: MappedFile, res: PutMessagesResult) -> bool:
        """Write the prepared batch from res.stored on; False when mf filled up."""

    def write_blank(self, mf: MappedFile) -> None:
        """Close mf with an END_FILE blank at its write position."""

# ---- the put path ------------------------------------------------------------------------------

class PutLock:
    """The CommitLog's put lock; blocking waits release the GIL. A context manager."""

    def acquire(self) -> bool: ...
    def release(self) -> None: ...
    def __enter__(self) -> PutLock: ...
    def __exit__(self, *exc: object) -> bool: ...

class PutPath:
    """CommitLog.put_message's fast path: lock, append to `file`, result, in one native call.
    `slow(message, queue_id)` runs under the lock when `file` is None or full; `after(result,
    message)`, when set, runs after the lock (SYNC_FLUSH's wait)."""

    file: MappedFile | None
    slow: Callable[[Message, int], PutMessageResult]
    after: Callable[[PutMessageResult, Message], PutMessageResult] | None
    @property
    def lock(self) -> PutLock: ...
    @property
    def writer(self) -> RecordWriter: ...
    def __init__(
        self, writer: RecordWriter, slow: Callable[[Message, int], PutMessageResult]
    ) -> None: ...
    def __call__(self, message: Message, queue_id: int = 0) -> PutMessageResult: ...

# ---- decoding ----------------------------------------------------------------------------------

def decode_message(buffer: Buffer, pos: int = 0, *, check_crc: bool = False) -> MessageExt:
    """Decode the record at pos of a buffer; CorruptRecordError if it is not a message."""

def decode_at(mf: MappedFile, pos: int, *, check_crc: bool = False) -> MessageExt:
    """Decode the record at pos of a MappedFile (views pin the file)."""

def record_status(
    buffer: Buffer, pos: int = 0, *, check_crc: bool = True, expected_phy: int = -1
) -> tuple[_RecordStatus, int, str | None]:
    """(status, size, reason) of the record at pos."""

@final
class ScanResult:
    """Records found by scan_region (file-relative offsets) and why the scan stopped."""

    @property
    def offsets(self) -> npt.NDArray[np.int64]: ...
    @property
    def sizes(self) -> npt.NDArray[np.int32]: ...
    @property
    def store_timestamps(self) -> npt.NDArray[np.int64]: ...
    @property
    def stop_status(self) -> _StopStatus: ...
    @property
    def stop_position(self) -> int: ...
    @property
    def reason(self) -> str | None: ...
    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[tuple[int, int, Literal["ok"]]]: ...

def scan_region(
    buffer: Buffer | MappedFile,
    start: int = 0,
    end: int = -1,
    *,
    check_crc: bool = True,
    base_offset: int = -1,
    max_records: int = -1,
) -> ScanResult:
    """Walk records from start to end, a blank, the end of data, a corrupt record or
    max_records; never reads outside the buffer."""

# ---- dispatch (ReputMessageService) ----------------------------------------------------------

@final
class DispatchBatch:
    """Records decoded for dispatch, as columns (positions relative to mapped_file);
    topics[topic_ids[i]] is record i's topic."""

    @property
    def mapped_file(self) -> MappedFile: ...
    @property
    def positions(self) -> npt.NDArray[np.int64]: ...
    @property
    def phy_offsets(self) -> npt.NDArray[np.int64]: ...
    @property
    def sizes(self) -> npt.NDArray[np.int32]: ...
    @property
    def queue_ids(self) -> npt.NDArray[np.int32]: ...
    @property
    def queue_offsets(self) -> npt.NDArray[np.int64]: ...
    @property
    def tags_codes(self) -> npt.NDArray[np.int64]: ...
    @property
    def store_timestamps(self) -> npt.NDArray[np.int64]: ...
    @property
    def sys_flags(self) -> npt.NDArray[np.int32]: ...
    @property
    def topic_ids(self) -> npt.NDArray[np.int32]: ...
    @property
    def topics(self) -> list[str]: ...
    @property
    def stop_status(self) -> _StopStatus: ...
    @property
    def stop_position(self) -> int: ...
    @property
    def reason(self) -> str | None: ...
    @property
    def next_offset(self) -> int:
        """CommitLog offset where the next dispatch round starts."""

    def __len__(self) -> int: ...

def dispatch_region(
    mf: MappedFile,
    start: int,
    end: int = -1,
    *,
    max_records: int = 4096,
    check_crc: bool = False,
    tags_codes: bool = True,
) -> DispatchBatch:
    """Decode the records of mf from start (up to end / the readable limit) for dispatch;
    tags_codes=False leaves the tags codes 0 (the properties are not read)."""
