"""TopicConfigManager: the broker's topics, persisted as RocketMQ's ``config/topics.json``::

    {"dataVersion": {"counter": 3, "timestamp": 1700000000000},
     "topicConfigTable": {"orders": {"order": false, "perm": 6, "readQueueNums": 8,
                                     "topicFilterType": "SINGLE_TAG", "topicName": "orders",
                                     "topicSysFlag": 0, "writeQueueNums": 8}, ...}}

System topics are created at start as RocketMQ's TopicConfigManager does (SELF_TEST_TOPIC,
TBW102 when auto-creation is on, BenchmarkTest, the cluster's and the broker's own topic,
OFFSET_MOVED_EVENT, SCHEDULE_TOPIC_XXXX, the trace topic when enabled). A send to an unknown
topic naming TBW102 as its default topic creates it from TBW102's config (queue count capped by
TBW102's) when TBW102 carries PERM_INHERIT; retry and dead-letter topics are created when a
consumer group needs them. Every change bumps the data version (name servers compare it) and
calls ``on_change`` (the controller persists the file and registers again).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from rocketstore.broker.config import BrokerConfig
from rocketstore.broker.json_table import JsonTableFile, dumps_pretty
from rocketstore.common.perm import PERM_INHERIT, PERM_MASK, PERM_READ, PERM_WRITE
from rocketstore.common.text import is_ascii_int, quote
from rocketstore.common.topics import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    BENCHMARK_TOPIC,
    OFFSET_MOVED_EVENT,
    REPLY_TOPIC_SUFFIX,
    SCHEDULE_TOPIC,
    SELF_TEST_TOPIC,
)
from rocketstore.message import validate_topic
from rocketstore.remoting.route_bodies import DataVersion

log = logging.getLogger(__name__)

DEFAULT_QUEUE_NUMS = 16


@dataclass(frozen=True)
class TopicConfig:
    """RocketMQ's TopicConfig."""

    topic_name: str
    read_queue_nums: int = DEFAULT_QUEUE_NUMS
    write_queue_nums: int = DEFAULT_QUEUE_NUMS
    perm: int = PERM_READ | PERM_WRITE
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False
    #: a memory topic: its messages are held in the broker's memory, never in the CommitLog
    #: (rocketstore's own; written to topics.json only when true)
    memory: bool = False

    def __post_init__(self) -> None:
        for name in ("read_queue_nums", "write_queue_nums"):
            value = getattr(self, name)
            if not 0 <= value <= 65535:
                raise ValueError(f"{name} must be in [0, 65535], got {value}")
        if not 0 <= self.perm <= PERM_MASK:
            raise ValueError(f"perm must be in [0, 15], got {self.perm}")
        if self.topic_filter_type not in ("SINGLE_TAG", "MULTI_TAG"):
            raise ValueError(f"topicFilterType must be SINGLE_TAG or MULTI_TAG, got {quote(self.topic_filter_type)}")

    @property
    def queue_nums(self) -> int:
        """Queue ids a client may address: max(read, write) (RocketMQ's msgCheck)."""
        return max(self.read_queue_nums, self.write_queue_nums)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "order": self.order,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicFilterType": self.topic_filter_type,
            "topicName": self.topic_name,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }
        if self.memory:
            data["memory"] = True
        return data

    @classmethod
    def from_json(cls, name: str, data: Any) -> TopicConfig:
        if not isinstance(data, dict):
            raise ValueError(f"topic {quote(name)}: config must be an object")

        def number(key: str, default: int) -> int:
            value = data.get(key, default)
            if isinstance(value, bool) or not isinstance(value, int):
                if isinstance(value, str) and is_ascii_int(value, signed=True):
                    return int(value)
                raise ValueError(f"topic {quote(name)}: {key} must be an integer, got {quote(value)}")
            return value

        def flag(key: str) -> bool:
            value = data.get(key, False)
            if isinstance(value, str) and value.lower() in ("true", "false"):
                return value.lower() == "true"
            if not isinstance(value, bool):
                raise ValueError(f"topic {quote(name)}: {key} must be true or false, got {quote(value)}")
            return value

        return cls(
            topic_name=str(data.get("topicName") or name),
            read_queue_nums=number("readQueueNums", DEFAULT_QUEUE_NUMS),
            write_queue_nums=number("writeQueueNums", DEFAULT_QUEUE_NUMS),
            perm=number("perm", PERM_READ | PERM_WRITE),
            topic_filter_type=str(data.get("topicFilterType") or "SINGLE_TAG"),
            topic_sys_flag=number("topicSysFlag", 0),
            order=bool(data.get("order", False)),
            memory=flag("memory"),
        )


class TopicConfigManager:
    """The topic table (see the module docstring)."""

    def __init__(self, config: BrokerConfig, file: JsonTableFile,
                 on_change: Callable[[bool], None] | None = None,
                 clock_ms: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        self.config = config
        self.file = file
        #: on_change(register): the table changed; register with the name servers if True.
        self.on_change = on_change
        self._clock_ms = clock_ms
        self.table: dict[str, TopicConfig] = {}
        #: the names of the memory topics of ``table`` (the send path tests every send's topic
        #: against it: no cost while it is empty); kept by this class's changes, never replaced
        self.memory_topics: set[str] = set()
        self.data_version = DataVersion(clock_ms(), 0)
        self._add_system_topics()

    def _add_system_topics(self) -> None:
        config = self.config
        system = [TopicConfig(SELF_TEST_TOPIC, 1, 1)]
        if config.auto_create_topic_enable:
            system.append(TopicConfig(AUTO_CREATE_TOPIC_KEY_TOPIC, config.default_topic_queue_nums,
                                      config.default_topic_queue_nums,
                                      PERM_INHERIT | PERM_READ | PERM_WRITE))
        system.append(TopicConfig(BENCHMARK_TOPIC, 1024, 1024))
        perm = PERM_INHERIT | (PERM_READ | PERM_WRITE if config.cluster_topic_enable else 0)
        system.append(TopicConfig(config.broker_cluster_name, perm=perm))
        perm = PERM_INHERIT | (PERM_READ | PERM_WRITE if config.broker_topic_enable else 0)
        system.append(TopicConfig(config.broker_name, 1, 1, perm))
        system.append(TopicConfig(OFFSET_MOVED_EVENT, 1, 1))
        levels = len(config.store.message_delay_level.split(" "))
        system.append(TopicConfig(SCHEDULE_TOPIC, levels, levels))
        if config.trace_topic_enable:
            system.append(TopicConfig(config.msg_trace_topic_name, 1, 1))
        system.append(TopicConfig(config.broker_cluster_name + REPLY_TOPIC_SUFFIX, 1, 1))
        for topic in system:
            self.table[topic.topic_name] = topic

    # ---- persistence ----

    def load(self) -> None:
        table, version = self.file.load_table("topicConfigTable")
        for name, entry in table.items():
            try:
                self.table[name] = TopicConfig.from_json(name, entry)
            except ValueError as exc:
                raise ValueError(f"{self.file.path}: {exc}") from None
        self._count_memory_topics()
        if version is not None:
            self.data_version = version

    def replace_table(self, table: dict[str, TopicConfig], version: DataVersion) -> None:
        """The whole table and its version, as a master has them (SlaveSynchronize)."""
        self.table.clear()
        self.table.update(table)
        self._count_memory_topics()
        self.data_version = version

    def _count_memory_topics(self) -> None:
        self.memory_topics.clear()
        self.memory_topics.update(name for name, cfg in self.table.items() if cfg.memory)

    def add_stored_topics(self, queue_counts: dict[str, int]) -> list[str]:
        """Topics the store holds ConsumeQueues of that the table does not name (a store
        written through the embedded API has no topics.json): in the table with that many
        read and write queues, in memory only. The names added."""
        added = []
        for name, queues in sorted(queue_counts.items()):
            if name not in self.table and queues > 0:
                self.table[name] = TopicConfig(name, queues, queues)
                added.append(name)
        return added

    def encode(self) -> bytes:
        return dumps_pretty({
            "dataVersion": self.data_version.to_json(),
            "topicConfigTable": {name: cfg.to_json() for name, cfg in self.table.items()},
        })

    def persist(self) -> None:
        self.file.write(self.encode())

    def next_version(self) -> None:
        """A new data version, registered (what the broker registers changed: its permission)."""
        self._changed()

    def _changed(self, register: bool = True) -> None:
        self.data_version = DataVersion(self._clock_ms(), self.data_version.counter + 1)
        if self.on_change is not None:
            self.on_change(register)

    # ---- reads ----

    def select(self, topic: str) -> TopicConfig | None:
        return self.table.get(topic)

    def registration_table(self) -> dict[str, dict[str, Any]]:
        """Topic configs as registered with the name servers: a broker that does not allow
        reading or writing says so in every topic's perm (RocketMQ's registerBrokerAll)."""
        broker_perm = self.config.broker_permission
        out: dict[str, dict[str, Any]] = {}
        for name, cfg in self.table.items():
            if broker_perm & (PERM_READ | PERM_WRITE) != PERM_READ | PERM_WRITE:
                cfg = replace(cfg, perm=cfg.perm & broker_perm)
            out[name] = cfg.to_json()
        return out

    # ---- changes ----

    def create_in_send(self, topic: str, default_topic: str, client_queue_nums: int,
                       topic_sys_flag: int = 0) -> TopicConfig | None:
        """createTopicInSendMessageMethod: an unknown topic made from its default topic's
        config when that one is inheritable; None when it may not be created."""
        existing = self.table.get(topic)
        if existing is not None:
            return existing
        default = self.table.get(default_topic)
        if default is None:
            log.warning("reject creating topic %s: default topic %s does not exist",
                        quote(topic), quote(default_topic))
            return None
        perm = default.perm
        if default_topic == AUTO_CREATE_TOPIC_KEY_TOPIC and not self.config.auto_create_topic_enable:
            perm = PERM_READ | PERM_WRITE
        if not perm & PERM_INHERIT:
            log.warning("reject creating topic %s: default topic %s is not inheritable (perm %d)",
                        quote(topic), quote(default_topic), perm)
            return None
        queues = max(0, min(client_queue_nums, default.write_queue_nums))
        created = TopicConfig(topic, queues, queues, perm & ~PERM_INHERIT,
                              default.topic_filter_type, topic_sys_flag)
        self.table[topic] = created
        log.info("created topic %s from %s: %s", topic, default_topic, created)
        self._changed()
        return created

    def create_in_send_back(self, topic: str, queue_nums: int, perm: int,
                            topic_sys_flag: int = 0) -> TopicConfig:
        """createTopicInSendMessageBackMethod: retry and dead-letter topics."""
        existing = self.table.get(topic)
        if existing is not None:
            return existing
        created = TopicConfig(topic, queue_nums, queue_nums, perm, topic_sys_flag=topic_sys_flag)
        self.table[topic] = created
        log.info("created topic %s: %s", quote(topic), quote(created, 400))
        self._changed()
        return created

    def update(self, cfg: TopicConfig) -> None:
        """UPDATE_AND_CREATE_TOPIC."""
        validate_topic(cfg.topic_name)
        old = self.table.get(cfg.topic_name)
        self.table[cfg.topic_name] = cfg
        if cfg.memory:
            self.memory_topics.add(cfg.topic_name)
        else:
            self.memory_topics.discard(cfg.topic_name)
        log.info("topic %s %s: %s", cfg.topic_name, "updated" if old else "created", cfg)
        self._changed()

    def delete(self, topic: str) -> bool:
        if self.table.pop(topic, None) is None:
            return False
        self.memory_topics.discard(topic)
        log.info("deleted topic %s", topic)
        self._changed()
        return True
