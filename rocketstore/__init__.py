"""rocketstore: a RocketMQ-compatible embedded message store (Cython over memory-mapped files).

The store's names are imported on first use, so the network peers (``rocketstore.namesrv``,
``rocketstore.remoting``, the clients) start without loading the store or its extensions.
"""
from __future__ import annotations

import importlib
import logging
import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
    from rocketstore.store import MessageStore, RecoveryReport, StoreLockedError

__version__ = "0.1.0"

#: public name -> the module (or package) it is imported from
_EXPORTS = {
    **dict.fromkeys(("CorruptRecordError", "GetMessageStatus", "Message", "MessageExt",
                     "PutMessageResult", "PutMessagesResult", "PutMessageStatus"),
                    "rocketstore.message"),
    **dict.fromkeys(("BrokerRole", "FlushDiskType", "StoreConfig"), "rocketstore.config"),
    **dict.fromkeys(("MessageStore", "RecoveryReport", "StoreLockedError"), "rocketstore.store"),
}

__all__ = [
    "BrokerRole", "CorruptRecordError", "FlushDiskType", "GetMessageStatus", "Message",
    "MessageExt", "MessageStore", "PutMessageResult", "PutMessageStatus", "PutMessagesResult",
    "RecoveryReport", "StoreConfig", "StoreLockedError", "__version__",
]


def __getattr__(name: str) -> Any:
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'rocketstore' has no attribute {name!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        if not (exc.name or "").startswith("rocketstore._native"):
            raise
        raise ModuleNotFoundError(
            f"rocketstore's compiled extensions ({exc.name}) are not built in "
            f"{os.path.dirname(__file__)}. Python found this source tree first (the current "
            "directory is the repository?): run from another directory after `pip install .`, "
            "or build the extensions in place with `python setup.py build_ext --inplace`.",
            name=exc.name) from exc
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})

# A library stays silent unless the program configures logging (the rocketstore command and
# the servers do: rocketstore.common.logs).
logging.getLogger(__name__).addHandler(logging.NullHandler())
