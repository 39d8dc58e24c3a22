"""Where a consumer keeps its progress (RocketMQ's OffsetStore).

- :class:`RemoteBrokerOffsetStore` (clustering): offsets live on the broker of each queue.
  Consumption moves them in memory; ``persist_all`` (every ``persist_consumer_offset_interval``,
  5 s, and at shutdown) sends UPDATE_CONSUMER_OFFSET for each; ``read_offset`` from the store
  asks QUERY_CONSUMER_OFFSET.
- :class:`LocalFileOffsetStore` (broadcasting): every member has its own offsets, in
  ``<local_offset_store_dir>/<client ip>@<instance name>/<group>/offsets.json``, written
  atomically (a temporary file renamed over the old one, which is kept as ``offsets.json.bak``).

An offset is the queue offset of the next message to consume. -1 means "none known".
"""

from __future__ import annotations

import asyncio
import enum
import logging
import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

import orjson

from rocketstore.client.errors import MQBrokerError
from rocketstore.client.message import MessageQueue
from rocketstore.common.atomic_file import write_atomically

log = logging.getLogger(__name__)


class ReadOffsetType(enum.Enum):
    READ_FROM_MEMORY = "READ_FROM_MEMORY"
    READ_FROM_STORE = "READ_FROM_STORE"
    MEMORY_FIRST_THEN_STORE = "MEMORY_FIRST_THEN_STORE"


class OffsetStore(Protocol):
    async def load(self) -> None: ...
    def update_offset(self, mq: MessageQueue, offset: int, increase_only: bool) -> None: ...
    async def read_offset(self, mq: MessageQueue, read_type: ReadOffsetType) -> int: ...
    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None: ...
    async def persist(self, mq: MessageQueue) -> None: ...
    def remove_offset(self, mq: MessageQueue) -> None: ...


class _MemoryTable:
    def __init__(self) -> None:
        self.offsets: dict[MessageQueue, int] = {}

    def update_offset(self, mq: MessageQueue, offset: int, increase_only: bool) -> None:
        old = self.offsets.get(mq)
        if old is None or not increase_only or offset > old:
            self.offsets[mq] = offset

    def remove_offset(self, mq: MessageQueue) -> None:
        self.offsets.pop(mq, None)


class BrokerAccess(Protocol):
    """What the remote store needs of the client: addresses and two requests."""

    def broker_address(self, broker_name: str) -> str | None: ...
    async def update_route(self, topic: str) -> bool: ...
    async def query_consumer_offset(self, address: str, group: str, mq: MessageQueue) -> int | None: ...
    async def update_consumer_offset(self, address: str, group: str, mq: MessageQueue, offset: int) -> None: ...


class RemoteBrokerOffsetStore(_MemoryTable):
    def __init__(self, access: BrokerAccess, group: str) -> None:
        super().__init__()
        self._access = access
        self.group = group

    async def load(self) -> None:
        return None

    async def _address(self, mq: MessageQueue) -> str:
        address = self._access.broker_address(mq.broker_name)
        if address is None:
            await self._access.update_route(mq.topic)
            address = self._access.broker_address(mq.broker_name)
        if address is None:
            raise LookupError(f"the broker {mq.broker_name} is not in any route")
        return address

    async def read_offset(self, mq: MessageQueue, read_type: ReadOffsetType) -> int:
        """The offset; from the broker: -1 when it has none, -2 when it could not be asked."""
        if read_type is not ReadOffsetType.READ_FROM_STORE:
            offset = self.offsets.get(mq)
            if offset is not None or read_type is ReadOffsetType.READ_FROM_MEMORY:
                return -1 if offset is None else offset
        try:
            found = await self._access.query_consumer_offset(await self._address(mq), self.group, mq)
        except MQBrokerError as exc:
            log.info("no offset of %s for %s on the broker: %s", self.group, mq, exc)
            return -1
        except Exception as exc:  # noqa: BLE001 - the caller retries later
            log.warning("reading the offset of %s for %s failed: %s", self.group, mq, exc)
            return -2
        if found is None:
            return -1
        self.update_offset(mq, found, False)
        return found

    async def persist(self, mq: MessageQueue) -> None:
        offset = self.offsets.get(mq)
        if offset is not None and offset >= 0:
            await self._access.update_consumer_offset(await self._address(mq), self.group, mq, offset)

    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        wanted = set(mqs)
        queues = [mq for mq in self.offsets if mq in wanted]
        results = await asyncio.gather(*(self.persist(mq) for mq in queues), return_exceptions=True)
        for mq, result in zip(queues, results, strict=True):
            if isinstance(result, Exception):
                log.info("committing the offset of %s for %s failed: %s", self.group, mq, result)
        # queues no longer ours are forgotten (RocketMQ's persistAll removes unused ones)
        for mq in list(self.offsets):
            if mq not in wanted:
                del self.offsets[mq]


class LocalFileOffsetStore(_MemoryTable):
    def __init__(self, directory: str | os.PathLike[str], client_key: str, group: str) -> None:
        super().__init__()
        self.group = group
        self.path = Path(directory) / client_key / group / "offsets.json"
        self._write_lock = threading.Lock()

    async def load(self) -> None:
        self.offsets = self._read(self.path) or self._read(self.path.with_name("offsets.json.bak")) or {}

    @staticmethod
    def _read(path: Path) -> dict[MessageQueue, int] | None:
        try:
            data = orjson.loads(path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, orjson.JSONDecodeError) as exc:
            log.warning("offset file %s is unreadable (%s): ignored", path, exc)
            return None
        offsets: dict[MessageQueue, int] = {}
        try:
            for entry in data["offsetTable"]:
                mq = MessageQueue(str(entry["topic"]), str(entry["brokerName"]), int(entry["queueId"]))
                offsets[mq] = int(entry["offset"])
        except (KeyError, TypeError, ValueError) as exc:
            log.warning("offset file %s is malformed (%r): ignored", path, exc)
            return None
        return offsets

    async def read_offset(self, mq: MessageQueue, read_type: ReadOffsetType) -> int:
        if read_type is ReadOffsetType.READ_FROM_STORE:
            stored = self._read(self.path) or {}
            offset = stored.get(mq)
            if offset is not None:
                self.update_offset(mq, offset, False)
            return -1 if offset is None else offset
        return self.offsets.get(mq, -1)

    def _write(self, data: bytes) -> None:
        with self._write_lock:
            self._write_locked(data)

    def _write_locked(self, data: bytes) -> None:
        write_atomically(self.path, data, backup="move")

    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        if self.offsets:
            entries = [{"brokerName": mq.broker_name, "offset": off, "queueId": mq.queue_id, "topic": mq.topic}
                       for mq, off in sorted(self.offsets.items())]
            data = orjson.dumps({"offsetTable": entries}, option=orjson.OPT_INDENT_2)
            await asyncio.get_running_loop().run_in_executor(None, self._write, data)

    async def persist(self, mq: MessageQueue) -> None:
        await self.persist_all([mq])
