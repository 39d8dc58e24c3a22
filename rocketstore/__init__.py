"""rocketstore: a RocketMQ-compatible embedded message store (Cython over memory-mapped files)."""
import os as _os

try:
    from rocketstore.message import (
        CorruptRecordError,
        GetMessageStatus,
        Message,
        MessageExt,
        PutMessageResult,
        PutMessagesResult,
        PutMessageStatus,
    )
except ModuleNotFoundError as _exc:
    if not (_exc.name or "").startswith("rocketstore._native"):
        raise
    raise ModuleNotFoundError(
        f"rocketstore's compiled extensions ({_exc.name}) are not built in "
        f"{_os.path.dirname(__file__)}. Python found this source tree first (the current "
        "directory is the repository?): run from another directory after `pip install .`, "
        "or build the extensions in place with `python setup.py build_ext --inplace`.",
        name=_exc.name) from _exc
from rocketstore.config import BrokerRole, FlushDiskType, StoreConfig
from rocketstore.store.message_store import MessageStore
from rocketstore.store.recovery import RecoveryReport
from rocketstore.store.store_lock import StoreLockedError

__version__ = "0.1.0"

__all__ = [
    "BrokerRole", "CorruptRecordError", "FlushDiskType", "GetMessageStatus", "Message",
    "MessageExt", "MessageStore", "PutMessageResult", "PutMessageStatus", "PutMessagesResult",
    "RecoveryReport", "StoreConfig", "StoreLockedError", "__version__",
]
