"""Replication (RocketMQ 4.x master/slave HA, wire-compatible with RocketMQ 4.9).

The master's :class:`HAService` listens on ``haListenPort`` and streams its CommitLog to each
slave from the offset the slave reports; the slave's :class:`HAClient` connects to the master's
HA address, appends what arrives (``MessageStore.append_commit_log``: its own dispatch builds
its ConsumeQueues and IndexFiles) and reports how far it got. The bytes on the wire:
:mod:`rocketstore.ha.protocol` and docs/format.md ("HA"). Both run on the broker's event loop
and use the store only through ``rocketstore.store``.
"""

from rocketstore.ha.client import HAClient
from rocketstore.ha.protocol import (
    HEADER_SIZE,
    MAX_FRAME_BODY,
    REPORT_SIZE,
    HAFrameError,
)
from rocketstore.ha.service import HAConnection, HAService
from rocketstore.ha.status import ha_runtime_info, replication_status
from rocketstore.ha.sync_state import SyncStateSet

__all__ = [
    "HEADER_SIZE",
    "MAX_FRAME_BODY",
    "REPORT_SIZE",
    "HAClient",
    "HAConnection",
    "HAFrameError",
    "HAService",
    "ha_runtime_info",
    "replication_status",
    "SyncStateSet",
]
