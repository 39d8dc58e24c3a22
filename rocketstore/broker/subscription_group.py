"""SubscriptionGroupManager: consumer groups' settings, persisted as RocketMQ's
``config/subscriptionGroup.json``::

    {"dataVersion": {...}, "subscriptionGroupTable": {"billing": {"groupName": "billing",
        "consumeEnable": true, "retryMaxTimes": 16, "retryQueueNums": 1, ...}}}

A group is created with RocketMQ's defaults the first time it is used when
``autoCreateSubscriptionGroup`` is on (and always for RocketMQ's system groups).
``retryMaxTimes`` is how often a message is retried before it goes to ``%DLQ%<group>``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from rocketstore.broker.config import BrokerConfig
from rocketstore.broker.json_table import JsonTableFile, dumps_pretty
from rocketstore.common.java_properties import camel_case
from rocketstore.common.text import is_ascii_int, quote
from rocketstore.common.topics import SYSTEM_GROUPS
from rocketstore.remoting.route_bodies import DataVersion

log = logging.getLogger(__name__)



@dataclass(frozen=True)
class SubscriptionGroupConfig:
    """RocketMQ's SubscriptionGroupConfig (defaults included)."""

    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True

    def __post_init__(self) -> None:
        if not self.group_name or "@" in self.group_name:
            raise ValueError(f"groupName must be a non-empty name without '@', got {quote(self.group_name)}")
        if not 0 <= self.retry_queue_nums <= 1024:
            raise ValueError(f"retryQueueNums must be in [0, 1024], got {self.retry_queue_nums}")
        if not -1 <= self.retry_max_times <= 10_000:
            raise ValueError(f"retryMaxTimes must be in [-1, 10000], got {self.retry_max_times}")

    def to_json(self) -> dict[str, Any]:
        return {camel_case(f.name): getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_json(cls, data: Any, name: str | None = None) -> SubscriptionGroupConfig:
        if not isinstance(data, dict):
            raise ValueError("a subscription group config must be a JSON object")
        values: dict[str, Any] = {}
        for f in fields(cls):
            key = camel_case(f.name)
            if key not in data or data[key] is None:
                continue
            value = data[key]
            kind = f.type if isinstance(f.type, str) else f.type.__name__
            if kind == "bool":
                if isinstance(value, str) and value.lower() in ("true", "false"):
                    value = value.lower() == "true"
                if not isinstance(value, bool):
                    raise ValueError(f"{key} must be true or false, got {quote(value)}")
            elif kind == "int":
                if isinstance(value, str) and is_ascii_int(value, signed=True):
                    value = int(value)
                if isinstance(value, bool) or not isinstance(value, int):
                    raise ValueError(f"{key} must be an integer, got {quote(value)}")
            else:
                value = str(value)
            values[f.name] = value
        if "group_name" not in values:
            if name is None:
                raise ValueError("groupName is missing")
            values["group_name"] = name
        return cls(**values)


class SubscriptionGroupManager:
    def __init__(self, config: BrokerConfig, file: JsonTableFile,
                 on_change: Callable[[], None] | None = None,
                 clock_ms: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        self.config = config
        self.file = file
        self.on_change = on_change
        self._clock_ms = clock_ms
        self.table: dict[str, SubscriptionGroupConfig] = {
            name: SubscriptionGroupConfig(name) for name in SYSTEM_GROUPS}
        self.data_version = DataVersion(clock_ms(), 0)

    def load(self) -> None:
        table, version = self.file.load_table("subscriptionGroupTable")
        for name, entry in table.items():
            try:
                self.table[name] = SubscriptionGroupConfig.from_json(entry, name)
            except ValueError as exc:
                raise ValueError(f"{self.file.path}: group {quote(name)}: {exc}") from None
        if version is not None:
            self.data_version = version

    def encode(self) -> bytes:
        return dumps_pretty({
            "dataVersion": self.data_version.to_json(),
            "subscriptionGroupTable": {n: c.to_json() for n, c in self.table.items()},
        })

    def persist(self) -> None:
        self.file.write(self.encode())

    def _changed(self) -> None:
        self.data_version = DataVersion(self._clock_ms(), self.data_version.counter + 1)
        if self.on_change is not None:
            self.on_change()

    def find(self, group: str) -> SubscriptionGroupConfig | None:
        """findSubscriptionGroupConfig: the group's config, created with the defaults when
        auto-creation is on (or it is a system group)."""
        cfg = self.table.get(group)
        if cfg is None and (self.config.auto_create_subscription_group or group in SYSTEM_GROUPS):
            try:
                cfg = SubscriptionGroupConfig(group)
            except ValueError:
                return None
            self.table[group] = cfg
            log.info("auto-created subscription group %s", quote(group))
            self._changed()
        return cfg

    def add_stored_groups(self, names: set[str]) -> list[str]:
        """Groups with committed offsets the table does not name (a store written through
        the embedded API has no subscriptionGroup.json): in the table with the defaults, in
        memory only. The names added."""
        added = []
        for name in sorted(names - self.table.keys()):
            try:
                self.table[name] = SubscriptionGroupConfig(name)
            except ValueError as exc:
                log.warning("group %s of consumerOffset.json not served: %s", quote(name), exc)
                continue
            added.append(name)
        return added

    def update(self, cfg: SubscriptionGroupConfig) -> None:
        self.table[cfg.group_name] = cfg
        log.info("subscription group %s set: %s", quote(cfg.group_name), quote(cfg, 600))
        self._changed()

    def delete(self, group: str) -> bool:
        if self.table.pop(group, None) is None:
            return False
        self._changed()
        return True
