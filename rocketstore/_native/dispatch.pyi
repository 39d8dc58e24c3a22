from collections.abc import Callable, Iterable
from typing import Literal, TypeAlias, final

import numpy as np
import numpy.typing as npt
from typing_extensions import disjoint_base

from rocketstore._native.index_file import IndexFile
from rocketstore._native.mapped_file import MappedFile
from rocketstore._native.stop_flag import StopFlag

CAUGHT_UP: int
LIMIT: int
NO_FILE: int
NEED_QUEUE: int
NEED_INDEX: int
CORRUPT: int
STOP_NAMES: tuple[str, ...]

_StopStatus: TypeAlias = Literal["end", "blank", "corrupt", "limit"]

@disjoint_base
class Dispatcher:
    """The ReputMessageService's dispatch state and its native, GIL-free passes: each
    record's ConsumeQueue unit and IndexFile keys. A pass stops where Python is needed
    (NEED_QUEUE, NEED_INDEX, NO_FILE, CORRUPT) or when it is done (CAUGHT_UP, LIMIT)."""

    index_enabled: bool
    file: MappedFile | None
    index_file: IndexFile | None
    key_start: int
    key_start_phy: int
    records: int
    last_store_timestamp: int
    last_stop: int
    pass_start: int

    def __init__(self, index_enabled: bool = True) -> None: ...
    @property
    def offset(self) -> int:
        """CommitLog offset of the next record to dispatch."""

    def set_offset(self, offset: int) -> None: ...
    def request_offset(self, offset: int) -> None:
        """Ask the thread running passes to move to offset before its next pass."""

    def take_request(self) -> bool: ...
    def set_file(self, mf: MappedFile, pos: int) -> None: ...
    def add_queue(
        self, topic: bytes, queue_id: int, cq: object | None, last_file: MappedFile | None,
        max_phy: int, slow: bool = False
    ) -> None: ...
    def queue_max_phy(self, topic: bytes, queue_id: int, default: int) -> int: ...
    @property
    def queue_count(self) -> int: ...
    def touched(self) -> list[tuple[bytes, int, int]]: ...
    def set_index(
        self, f: IndexFile | None, key_start: int = 0, key_start_phy: int = -1
    ) -> None: ...
    def clear(self) -> None: ...
    def set_delay_levels(self, levels_ms: Iterable[int]) -> None:
        """messageDelayLevel in ms: SCHEDULE_TOPIC_XXXX units get their delivery time as tags
        code (store time + the DELAY level's delay), as RocketMQ writes them."""
    @property
    def stop_reason(self) -> str | None: ...
    def stop_record(self) -> tuple[bytes, int, int, int, int, int]: ...
    def run(self, max_records: int = ...) -> int: ...
    def follow(
        self, interval_s: float, stop: StopFlag, handler: Callable[[int], bool],
        max_records: int = ..., call_after_pass: bool | None = None
    ) -> int: ...
    call_after_pass: int

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
    starts_before: int = -1,
) -> DispatchBatch:
    """Decode the records of mf from start (up to end / the readable limit) for dispatch;
    tags_codes=False leaves the tags codes 0 (the properties are not read); starts_before
    >= 0 takes only the records that start before it."""
