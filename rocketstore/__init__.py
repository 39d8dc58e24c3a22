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
from rocketstore.store.message_store import MessageStore, StoreLockedError
from rocketstore.store.recovery import RecoveryReport

__version__ = "0.1.0"

__all__ = [
    "BrokerRole", "CorruptRecordError", "FlushDiskType", "GetMessageStatus", "Message",
    "MessageExt", "MessageStore", "PutMessageResult", "PutMessageStatus", "PutMessagesResult",
    "RecoveryReport", "StoreConfig", "StoreLockedError", "__version__",
]
