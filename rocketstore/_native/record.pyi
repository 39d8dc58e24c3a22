"""Type stub of rocketstore/_native/record.pyx: CommitLog records read back."""

from collections.abc import Iterator
from typing import Any, Final, Literal, TypeAlias, final

import numpy as np
import numpy.typing as npt
from typing_extensions import Buffer

from rocketstore._native.mapped_file import MappedFile

_RecordStatus: TypeAlias = Literal["ok", "blank", "end", "corrupt"]
_StopStatus: TypeAlias = Literal["end", "blank", "corrupt", "limit"]

STATUS_NAMES: Final[tuple[_RecordStatus, _RecordStatus, _RecordStatus, _RecordStatus]]
"""The names of the record statuses, by their native value."""

class CorruptRecordError(ValueError):
    """A record that fails validation; ``offset`` says where."""

    offset: int | None
    def __init__(self, message: str, offset: int | None = None) -> None: ...

@final
class MessageExt:
    """A message read back from the embedded store (``rocketstore.MessageExt``); a consumer of
    a broker gets ``rocketstore.client.MessageExt`` instead.

    Decoded from its record; body and record are zero-copy views that pin their mapped file."""

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

def find_record(
    buffer: Buffer | MappedFile,
    start: int = 0,
    end: int = -1,
    *,
    check_crc: bool = True,
    base_offset: int = 0,
    segment_end: int = -1,
) -> int:
    """The first position >= start where a valid record (PHYSICALOFFSET base_offset + its
    position) or a blank filling the segment exactly starts; -1 when none."""
