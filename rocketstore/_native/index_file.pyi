from collections.abc import Sequence
from os import PathLike

import numpy as np
import numpy.typing as npt
from typing_extensions import disjoint_base

from rocketstore._native.mapped_file import MappedFile

INDEX_HEADER_SIZE: int
INDEX_SLOT_SIZE: int
INDEX_ITEM_SIZE: int
INDEX_ALLOCATION_CHUNK: int
"""Items get their blocks on disk at least this many bytes at a time ..."""
INDEX_ALLOCATION_CHUNK_MAX: int
"""... and at most this many (each step the size allocated so far)."""

class IndexFileCorruptError(ValueError):
    path: str
    reason: str
    def __init__(self, path: str, reason: str) -> None: ...

def index_file_size(hash_slot_num: int, index_num: int) -> int: ...
def index_key_hash(key: str) -> int: ...
def utf8_java_hash(data: bytes | bytearray | memoryview, hash_from: int = 0) -> int: ...
def record_index_key_hashes(mf: MappedFile, pos: int) -> list[int]: ...

@disjoint_base
class IndexFile:
    def __init__(self, *args: object, **kwargs: object) -> None:
        """Raises TypeError: use IndexFile.create(...) or IndexFile.load(...)."""

    @property
    def mapped_file(self) -> MappedFile: ...
    @property
    def hash_slot_num(self) -> int: ...
    @property
    def index_num(self) -> int: ...
    @property
    def writable(self) -> bool: ...
    @staticmethod
    def create(
        path: str | PathLike[str],
        hash_slot_num: int,
        index_num: int,
        end_phy_offset: int = 0,
        end_timestamp: int = 0,
    ) -> IndexFile: ...
    @staticmethod
    def load(
        path: str | PathLike[str], hash_slot_num: int, index_num: int, *, read_only: bool = False
    ) -> IndexFile: ...
    @property
    def file_name(self) -> str: ...
    @property
    def begin_timestamp(self) -> int: ...
    @property
    def end_timestamp(self) -> int: ...
    @property
    def begin_phy_offset(self) -> int: ...
    @property
    def end_phy_offset(self) -> int: ...
    @property
    def hash_slot_count(self) -> int: ...
    @property
    def index_count(self) -> int: ...
    @property
    def is_write_full(self) -> bool: ...
    @property
    def needs_room(self) -> bool:
        """A put was refused for want of blocks on disk (make_room), not a full file."""

    def make_room(self) -> None:
        """Allocate blocks for the header page, a slot page a put could not allocate and the
        next items (OSError when the disk has no room)."""

    def header(self) -> dict[str, int]: ...
    def is_time_matched(self, begin: int, end: int) -> bool: ...
    def put_key(self, key: str, phy_offset: int, store_timestamp: int) -> bool: ...
    def select_phy_offsets(self, key: str, max_num: int, begin: int, end: int) -> list[int]: ...
    def walk(
        self, key_hash: int, start_item: int, max_num: int, begin: int, end: int
    ) -> tuple[list[int], int]: ...
    def read_item(self, n: int) -> tuple[int, int, int, int]: ...
    def read_slot(self, slot: int) -> int: ...
    def trailing_items(self, phy_offset: int) -> int: ...
    def put_hash(self, key_hash: int, phy_offset: int, store_timestamp: int) -> bool:
        """Put one item of a precomputed keyHash; False when the file is full."""
    def check(self) -> str | None:
        """Why the slots and items are not what the file's puts made; None when they are."""
    def truncate(self, phy_offset: int) -> int: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...
    def destroy(self, interval_forcibly_ms: float = 0.0) -> bool: ...

def build_index(
    f: IndexFile,
    commitlog_file: MappedFile,
    positions: npt.NDArray[np.int64] | Sequence[int],
    start: int = 0,
    key_start: int = 0,
) -> tuple[int, int]:
    """Index the records at positions into f; (len(positions), 0) when done, else where f
    stopped: full (roll), or needing blocks on disk (f.needs_room: make_room, call again)."""
def query_files(
    files: Sequence[IndexFile], index_key: str, max_num: int, begin: int, end: int
) -> list[int]: ...
