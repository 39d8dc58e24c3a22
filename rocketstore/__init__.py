"""rocketstore: a RocketMQ-compatible embedded message store (Cython over memory-mapped files)."""
from rocketstore.config import BrokerRole, FlushDiskType, StoreConfig
from rocketstore.message import (
    CorruptRecordError,
    GetMessageStatus,
    Message,
    MessageExt,
    PutMessageResult,
    PutMessagesResult,
    PutMessageStatus,
)
from rocketstore.store.message_store import MessageStore
from rocketstore.store.recovery import RecoveryReport
from rocketstore.store.store_lock import StoreLockedError

__version__ = "0.1.0"

__all__ = [
    "BrokerRole", "CorruptRecordError", "FlushDiskType", "GetMessageStatus", "Message",
    "MessageExt", "MessageStore", "PutMessageResult", "PutMessageStatus", "PutMessagesResult",
    "RecoveryReport", "StoreConfig", "StoreLockedError", "__version__",
]
