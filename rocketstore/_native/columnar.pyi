"""Type stub of rocketstore/_native/columnar.pyx: CommitLog records -> pyarrow RecordBatches,
decoded natively with no Python object per message (see the module docstring for the column
semantics and the 2 GiB-per-column contract)."""

from typing import Final, Literal, TypeAlias

import numpy.typing as npt
import pyarrow as pa
from typing_extensions import Buffer, disjoint_base

from rocketstore._native.mapped_file import MappedFile

_DecodeSource: TypeAlias = MappedFile | Buffer
_StopStatus: TypeAlias = Literal["end", "blank", "corrupt", "limit"]

MAX_BATCH_BYTES: Final[int]
"""2**31 - 1: the most data one string/binary column (32-bit offsets) can hold."""

SCHEMA: Final[pa.Schema]
"""topic string not null, queue_id int32, queue_offset int64, commitlog_offset int64,
store_size int32, sys_flag int32, flag int32, born_timestamp timestamp[ms],
store_timestamp timestamp[ms], born_host string, store_host string, reconsume_times int32,
msg_id string, tags string, keys list<string>, properties map<string, string>, body binary."""

def schema(
    include_body: bool = True, *, spark: bool = False, body_view: bool = False
) -> pa.Schema:
    """SCHEMA, without body when include_body is False; spark=True: timestamps are
    timestamp[us, tz=UTC] (what PySpark's data source reader checks a batch against);
    body_view=True: body is binary_view (not with spark=True: ValueError)."""

class BatchTooLargeError(ValueError):
    """decode_positions would put more than max_batch_bytes in one column."""

    fits: int
    """How many leading positions fit in one batch."""

    def __init__(self, message: str, fits: int) -> None: ...

@disjoint_base
class RegionResult(tuple[pa.RecordBatch, int, _StopStatus]):
    """(batch, next_position, stop_status); unpacks as a 3-tuple."""

    reason: str | None
    """Why the record at next_position is corrupt (stop_status 'corrupt'), else None."""

    def __new__(
        cls,
        batch: pa.RecordBatch,
        next_position: int,
        stop_status: _StopStatus,
        reason: str | None = None,
    ) -> RegionResult: ...
    @property
    def batch(self) -> pa.RecordBatch: ...
    @property
    def next_position(self) -> int: ...
    @property
    def stop_status(self) -> _StopStatus: ...

def decode_region(
    source: _DecodeSource,
    start: int,
    end: int = -1,
    *,
    base_offset: int | None,
    include_body: bool = True,
    check_crc: bool = False,
    max_records: int = -1,
    max_batch_bytes: int = ...,
    spark: bool = False,
    body_view: bool = False,
) -> RegionResult:
    """Decode the records that START in [start, end) of source (a MappedFile up to its read
    position, or a bytes-like buffer); a record may extend past end. base_offset: CommitLog
    offset of position 0 (PHYSICALOFFSET checked against it), or None to take PHYSICALOFFSET
    as stored. stop_status: 'end' (range or data exhausted), 'blank' (END_FILE at
    next_position), 'corrupt' (bad record at next_position, .reason says why) or 'limit'
    (max_records / max_batch_bytes reached: continue from next_position). Never raises for
    bad data; GIL released while parsing. body_view=True: body as zero-copy binary_view
    values into source (the batch keeps source alive; a MappedFile stays held)."""

def decode_positions(
    source: _DecodeSource,
    positions: npt.ArrayLike,
    *,
    base_offset: int | None,
    include_body: bool = True,
    check_crc: bool = False,
    max_batch_bytes: int = ...,
    spark: bool = False,
    body_view: bool = False,
) -> pa.RecordBatch:
    """Decode the records at the given positions (int64, any order) into one batch, a row per
    position. CorruptRecordError (naming the CommitLog offset) if a position is not a valid
    record; BatchTooLargeError (.fits) if a column would pass max_batch_bytes."""

def empty_batch(
    include_body: bool = True, *, spark: bool = False, body_view: bool = False
) -> pa.RecordBatch:
    """A batch with no rows and the decoded batches' schema."""
