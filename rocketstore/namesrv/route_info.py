"""RouteInfoManager: which brokers are alive and which topics they serve.

RocketMQ 4.9's tables and rules (RouteInfoManager.java), on the event loop's one thread, so
with no lock: a broker registers every 30 s with its topics; the route of a topic is its queue
data plus the brokers holding them; a broker silent for ``broker_channel_expired_time`` or
whose connection closes is dropped from every table. The clock is injected (milliseconds).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from rocketstore.common.perm import PERM_WRITE
from rocketstore.common.text import quote
from rocketstore.remoting.route_bodies import (
    MASTER_ID,
    DataVersion,
    QueueData,
    RegisterBrokerResult,
)

log = logging.getLogger(__name__)

#: RocketMQ's BROKER_CHANNEL_EXPIRED_TIME: two minutes without a registration.
BROKER_CHANNEL_EXPIRED_TIME_MS = 120_000


def wall_clock_ms() -> float:
    return time.time() * 1000


@dataclass
class BrokerLiveInfo:
    last_update_timestamp: float
    data_version: DataVersion
    #: The connection the broker registered on (a RemotingConnection, or None in tests).
    connection: Any
    ha_server_addr: str


@dataclass
class BrokerAddrs:
    """BrokerData: the addresses of one broker name's master (id 0) and slaves."""

    cluster: str
    broker_name: str
    broker_addrs: dict[int, str]

    def to_json(self) -> dict[str, Any]:
        return {"brokerAddrs": dict(self.broker_addrs), "brokerName": self.broker_name, "cluster": self.cluster}


class RouteInfoManager:
    def __init__(
        self,
        clock: Callable[[], float] = wall_clock_ms,
        broker_channel_expired_time_ms: float = BROKER_CHANNEL_EXPIRED_TIME_MS,
    ) -> None:
        self.clock = clock
        self.broker_channel_expired_time_ms = broker_channel_expired_time_ms
        #: topic -> broker name -> its queues of the topic.
        self.topic_queue_table: dict[str, dict[str, QueueData]] = {}
        #: broker name -> cluster and addresses.
        self.broker_addr_table: dict[str, BrokerAddrs] = {}
        #: cluster name -> broker names.
        self.cluster_addr_table: dict[str, set[str]] = {}
        #: broker address -> liveness.
        self.broker_live_table: dict[str, BrokerLiveInfo] = {}
        #: broker address -> its filter servers.
        self.filter_server_table: dict[str, list[str]] = {}

    # ---- registration ----

    def register_broker(
        self,
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str,
        topic_config_table: dict[str, dict[str, Any]] | None,
        data_version: DataVersion,
        filter_server_list: Iterable[str] = (),
        connection: Any = None,
    ) -> RegisterBrokerResult:
        self.cluster_addr_table.setdefault(cluster_name, set()).add(broker_name)

        broker = self.broker_addr_table.get(broker_name)
        if broker is None:
            broker = self.broker_addr_table[broker_name] = BrokerAddrs(cluster_name, broker_name, {})
        # A slave promoted to master keeps its address under a new id: one record per address.
        for other_id, addr in list(broker.broker_addrs.items()):
            if addr == broker_addr and other_id != broker_id:
                del broker.broker_addrs[other_id]
        register_first = broker.broker_addrs.get(broker_id) is None
        broker.broker_addrs[broker_id] = broker_addr

        if topic_config_table is not None and broker_id == MASTER_ID:
            if register_first or self._topic_config_changed(broker_addr, data_version):
                for topic_config in topic_config_table.values():
                    self._create_and_update_queue_data(broker_name, topic_config)

        previous = self.broker_live_table.get(broker_addr)
        self.broker_live_table[broker_addr] = BrokerLiveInfo(
            self.clock(), data_version, connection, ha_server_addr
        )
        if previous is None:
            log.info("new broker registered: %s %s (id %d) in %s", quote(broker_name), quote(broker_addr),
                     broker_id, quote(cluster_name))

        filters = list(filter_server_list)
        if filters:
            self.filter_server_table[broker_addr] = filters
        else:
            self.filter_server_table.pop(broker_addr, None)

        if broker_id != MASTER_ID:
            master_addr = broker.broker_addrs.get(MASTER_ID)
            if master_addr is not None:
                master = self.broker_live_table.get(master_addr)
                if master is not None:
                    return RegisterBrokerResult(master.ha_server_addr, master_addr)
        return RegisterBrokerResult()

    def _topic_config_changed(self, broker_addr: str, data_version: DataVersion) -> bool:
        live = self.broker_live_table.get(broker_addr)
        return live is None or live.data_version != data_version

    def _create_and_update_queue_data(self, broker_name: str, topic_config: dict[str, Any]) -> None:
        topic = topic_config["topicName"]
        queue_data = QueueData(
            broker_name=broker_name,
            read_queue_nums=topic_config["readQueueNums"],
            write_queue_nums=topic_config["writeQueueNums"],
            perm=topic_config["perm"],
            topic_sys_flag=topic_config["topicSysFlag"],
        )
        queues = self.topic_queue_table.setdefault(topic, {})
        old = queues.get(broker_name)
        if old != queue_data:
            if old is None:
                log.info("new topic registered: %s %s", quote(topic), quote(queue_data, 400))
            queues[broker_name] = queue_data

    def unregister_broker(self, cluster_name: str, broker_addr: str, broker_name: str, broker_id: int) -> None:
        self.broker_live_table.pop(broker_addr, None)
        self.filter_server_table.pop(broker_addr, None)
        remove_broker_name = False
        broker = self.broker_addr_table.get(broker_name)
        if broker is not None:
            broker.broker_addrs.pop(broker_id, None)
            if not broker.broker_addrs:
                del self.broker_addr_table[broker_name]
                remove_broker_name = True
        if remove_broker_name:
            names = self.cluster_addr_table.get(cluster_name)
            if names is not None:
                names.discard(broker_name)
                if not names:
                    del self.cluster_addr_table[cluster_name]
            self._remove_topics_of(broker_name)
        log.info("broker unregistered: %s %s (id %d)", quote(broker_name), quote(broker_addr), broker_id)

    def _remove_topics_of(self, broker_name: str) -> None:
        for topic in list(self.topic_queue_table):
            queues = self.topic_queue_table[topic]
            if queues.pop(broker_name, None) is not None and not queues:
                del self.topic_queue_table[topic]

    # ---- liveness ----

    def scan_not_active_broker(self) -> list[str]:
        """Drop brokers not heard from for the expiry time; returns their addresses."""
        now = self.clock()
        expired = [
            addr
            for addr, live in self.broker_live_table.items()
            if live.last_update_timestamp + self.broker_channel_expired_time_ms < now
        ]
        for addr in expired:
            live = self.broker_live_table[addr]
            log.warning("broker %s silent for %.0f ms: dropped", quote(addr), now - live.last_update_timestamp)
            if live.connection is not None:
                live.connection.close()
            self._destroy_broker_addr(addr)
        return expired

    def on_connection_closed(self, connection: Any) -> str | None:
        """Drop the broker that registered on ``connection``, if any; returns its address."""
        for addr, live in self.broker_live_table.items():
            if live.connection is connection:
                log.info("connection of broker %s closed: dropped", quote(addr))
                self._destroy_broker_addr(addr)
                return addr
        return None

    def _destroy_broker_addr(self, broker_addr: str) -> None:
        self.broker_live_table.pop(broker_addr, None)
        self.filter_server_table.pop(broker_addr, None)
        emptied: list[tuple[str, str]] = []
        for name, broker in list(self.broker_addr_table.items()):
            for broker_id, addr in list(broker.broker_addrs.items()):
                if addr == broker_addr:
                    del broker.broker_addrs[broker_id]
            if not broker.broker_addrs:
                del self.broker_addr_table[name]
                emptied.append((broker.cluster, name))
        for cluster, name in emptied:
            names = self.cluster_addr_table.get(cluster)
            if names is not None:
                names.discard(name)
                if not names:
                    del self.cluster_addr_table[cluster]
            self._remove_topics_of(name)

    # ---- queries ----

    def pickup_topic_route_data(self, topic: str) -> dict[str, Any] | None:
        """TopicRouteData as JSON-ready dicts, or None when no live broker holds the topic."""
        queues = self.topic_queue_table.get(topic)
        if not queues:
            return None
        broker_datas = []
        filter_server_table: dict[str, list[str]] = {}
        for broker_name in queues:
            broker = self.broker_addr_table.get(broker_name)
            if broker is None:
                continue
            broker_datas.append(broker.to_json())
            for addr in broker.broker_addrs.values():
                filters = self.filter_server_table.get(addr)
                if filters is not None:
                    filter_server_table[addr] = list(filters)
        if not broker_datas:
            return None
        return {
            "brokerDatas": broker_datas,
            "filterServerTable": filter_server_table,
            "queueDatas": [queue.to_json() for queue in queues.values()],
        }

    def get_all_cluster_info(self) -> dict[str, Any]:
        return {
            "brokerAddrTable": {name: broker.to_json() for name, broker in self.broker_addr_table.items()},
            "clusterAddrTable": {cluster: sorted(names) for cluster, names in self.cluster_addr_table.items()},
        }

    def get_all_topic_list(self) -> list[str]:
        return list(self.topic_queue_table)

    def get_topics_by_cluster(self, cluster: str) -> list[str]:
        names = self.cluster_addr_table.get(cluster, set())
        return [topic for topic, queues in self.topic_queue_table.items() if names & queues.keys()]

    def delete_topic(self, topic: str, cluster: str | None = None) -> None:
        if cluster is None:
            self.topic_queue_table.pop(topic, None)
            return
        queues = self.topic_queue_table.get(topic)
        if queues is None:
            return
        for broker_name in self.cluster_addr_table.get(cluster, set()):
            queues.pop(broker_name, None)
        if not queues:
            del self.topic_queue_table[topic]

    def wipe_write_perm_of_broker(self, broker_name: str) -> int:
        """Take write permission away from every queue of ``broker_name`` (before it is stopped);
        returns how many topics changed."""
        return self._set_write_perm(broker_name, False)

    def add_write_perm_of_broker(self, broker_name: str) -> int:
        return self._set_write_perm(broker_name, True)

    def _set_write_perm(self, broker_name: str, writable: bool) -> int:
        changed = 0
        for queues in self.topic_queue_table.values():
            queue = queues.get(broker_name)
            if queue is None:
                continue
            perm = queue.perm | PERM_WRITE if writable else queue.perm & ~PERM_WRITE
            queues[broker_name] = QueueData(
                queue.broker_name, queue.read_queue_nums, queue.write_queue_nums, perm, queue.topic_sys_flag
            )
            changed += 1
        return changed
