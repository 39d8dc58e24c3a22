"""The store: the mapped file queue, the CommitLog, the indexes, their services and
MessageStore, which wires them.

This package's namespace is the store's public face: other layers (the broker, Spark, the
export, the CLI) import these names from ``rocketstore.store`` and never a module inside it
(an import contract in pyproject.toml keeps it so). No name here is also the name of a
module inside it: ``from rocketstore.store import x`` always means this face.
"""

from rocketstore._native.put_path import HOLD_BUCKET_CEILINGS, HOLD_RANGE_BOUNDS
from rocketstore.message import (
    GetMessageStatus,
    PutMessageResult,
    PutMessagesResult,
    PutMessageStatus,
)
from rocketstore.store.consume_queue_ext import CqExtUnit, is_ext_addr
from rocketstore.store.consumer_offset_file import (
    CONSUMER_OFFSET_FILE,
    all_group_offsets,
    commit_group_offsets,
    consumer_offset_path,
    export_offsets,
    group_offsets,
    load_offset_table,
    offsets_lock,
    write_offset_table,
)
from rocketstore.store.damage import DamagedRange
from rocketstore.store.epoch_file import EPOCH_FILE, EpochFile, last_consistent_offset
from rocketstore.store.filter_bitmap import FilterBitmaps
from rocketstore.store.get_message import GetMessageResult
from rocketstore.store.layout import (
    CONFIG_DIR,
    SEGMENT_NAME_DIGITS,
    IndexGeometryError,
    StoreFormatError,
    StorePaths,
    consume_queue_files,
    detect_geometry,
    index_file_size,
    index_files,
    index_geometry,
    read_index_geometry,
    segment_files,
)
from rocketstore.store.memory_topics import (
    MEMORY_OFFSET_BASE,
    MemoryMessageStore,
    available_memory,
    default_max_bytes,
)
from rocketstore.store.message_store import MessageStore, QueryMessageResult
from rocketstore.store.reader import ColumnarReads, Segment, StoreReader
from rocketstore.store.recovery import Progress, RecoveryReport
from rocketstore.store.salvage import SalvageReport
from rocketstore.store.salvage import salvage as salvage_store
from rocketstore.store.services.reput import ArrivalListener
from rocketstore.store.store_lock import StoreLockedError
from rocketstore.store.subscription import Subscription, parse_subscription
from rocketstore.store.truncate import SIDE_FILE_PREFIX, truncate_commit_log
from rocketstore.store.verify import VerifyReport
from rocketstore.store.verify import verify as verify_store

#: Names of the columnar reads, imported on first use: they need pyarrow (the ``arrow`` extra).
_COLUMNAR_NAMES = {"read_range": "read_range", "read_range_table": "read_range_table",
                   "columnar_schema": "schema"}


def __getattr__(name: str) -> object:
    if name in _COLUMNAR_NAMES:
        from rocketstore.store import columnar
        return getattr(columnar, _COLUMNAR_NAMES[name])
    raise AttributeError(f"module 'rocketstore.store' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_COLUMNAR_NAMES})

__all__ = [
    "MEMORY_OFFSET_BASE",
    "MemoryMessageStore",
    "available_memory",
    "default_max_bytes",
    "EPOCH_FILE",
    "SIDE_FILE_PREFIX",
    "EpochFile",
    "last_consistent_offset",
    "truncate_commit_log",
    "CONFIG_DIR",
    "CONSUMER_OFFSET_FILE",
    "HOLD_BUCKET_CEILINGS",
    "HOLD_RANGE_BOUNDS",
    "SEGMENT_NAME_DIGITS",
    "ArrivalListener",
    "ColumnarReads",
    "DamagedRange",
    "GetMessageResult",
    "GetMessageStatus",
    "MessageStore",
    "Progress",
    "PutMessageResult",
    "PutMessageStatus",
    "PutMessagesResult",
    "QueryMessageResult",
    "RecoveryReport",
    "SalvageReport",
    "Segment",
    "IndexGeometryError",
    "StoreFormatError",
    "StoreLockedError",
    "StorePaths",
    "StoreReader",
    "Subscription",
    "VerifyReport",
    "all_group_offsets",
    "columnar_schema",
    "commit_group_offsets",
    "consume_queue_files",
    "consumer_offset_path",
    "detect_geometry",
    "export_offsets",
    "group_offsets",
    "index_file_size",
    "index_files",
    "index_geometry",
    "read_index_geometry",
    "load_offset_table",
    "offsets_lock",
    "parse_subscription",
    "FilterBitmaps",
    "CqExtUnit",
    "is_ext_addr",
    "read_range",
    "read_range_table",
    "salvage_store",
    "segment_files",
    "verify_store",
    "write_offset_table",
]
