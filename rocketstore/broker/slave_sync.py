"""SlaveSynchronize: a slave copies its master's tables (RocketMQ 4.9.8's SlaveSynchronize).

Every 10 s (first 3 s after start) a slave asks the master's broker address, the ``masterAddr``
of its last registration reply (RocketMQ learns it there only: without a name server there
is nothing to sync), for
- GET_ALL_TOPIC_CONFIG: the topic table, replaced whole when its dataVersion differs;
- GET_ALL_CONSUMER_OFFSET: the consumer offsets, the master's put over the slave's;
- GET_ALL_DELAY_OFFSET: the schedule service's progress (delayOffset.json);
- GET_ALL_SUBSCRIPTIONGROUP_CONFIG: the subscription groups, replaced whole when their
  dataVersion differs;
and writes each table to its own file. A failed step is logged and the others still run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from rocketstore.broker.consumer_offset_manager import ConsumerOffsetManager
from rocketstore.broker.schedule import ScheduleMessageService
from rocketstore.broker.subscription_group import SubscriptionGroupConfig, SubscriptionGroupManager
from rocketstore.broker.topic_config import TopicConfig, TopicConfigManager
from rocketstore.common.fastjson import loads_fastjson
from rocketstore.common.text import quote
from rocketstore.remoting import RemotingClient, RequestCode, ResponseCode, create_request
from rocketstore.remoting.route_bodies import DataVersion

log = logging.getLogger("rocketstore.broker")

#: RocketMQ's BrokerController schedules syncAll at a fixed rate of 10 s, 3 s after start
FIRST_SYNC_DELAY_S = 3.0
SYNC_PERIOD_S = 10.0
REQUEST_TIMEOUT_S = 3.0


class SlaveSynchronize:
    """``sync_all()`` on the broker's event loop; ``master_addr`` set from registrations."""

    def __init__(self, client: RemotingClient, broker_addr: str, *, topics: TopicConfigManager,
                 groups: SubscriptionGroupManager, offsets: ConsumerOffsetManager,
                 schedule: ScheduleMessageService | None,
                 persist: Callable[[Any], None]) -> None:
        """``persist(manager)`` writes a changed table (topics, groups, offsets or the
        schedule) off the event loop."""
        self.client = client
        self.broker_addr = broker_addr
        self.topics = topics
        self.groups = groups
        self.offsets = offsets
        self.schedule = schedule
        self.persist = persist
        self.master_addr: str | None = None

    async def sync_all(self) -> None:
        master = self.master_addr
        if not master or master == self.broker_addr:
            return
        for name, step in (("topic config", self._sync_topics),
                           ("consumer offset", self._sync_offsets),
                           ("delay offset", self._sync_delay_offsets),
                           ("subscription group", self._sync_groups)):
            try:
                await step(master)
            except Exception as exc:  # noqa: BLE001 - one table's failure leaves the others
                log.error("Sync%s Exception, %s: %s", name.title().replace(" ", ""), master,
                          quote(str(exc)))

    async def _get(self, master: str, code: int) -> Any:
        response = await self.client.invoke(master, create_request(code), timeout=REQUEST_TIMEOUT_S)
        if response.code != ResponseCode.SUCCESS:
            raise ValueError(f"request {code} answered {response.code}: {response.remark}")
        data = loads_fastjson(response.body or b"{}")
        if not isinstance(data, dict):
            raise ValueError(f"request {code}: the body is not a JSON object")
        return data

    async def _sync_topics(self, master: str) -> None:
        data = await self._get(master, RequestCode.GET_ALL_TOPIC_CONFIG)
        version = _version(data)
        if version == self.topics.data_version:
            return
        table = {name: TopicConfig.from_json(name, entry)
                 for name, entry in _table(data, "topicConfigTable").items()}
        self.topics.replace_table(table, version)
        self.persist(self.topics)
        log.info("Update slave topic config from master, %s", master)

    async def _sync_offsets(self, master: str) -> None:
        data = await self._get(master, RequestCode.GET_ALL_CONSUMER_OFFSET)
        for key, queues in _table(data, "offsetTable").items():
            if not isinstance(queues, dict):
                raise ValueError(f"offsetTable[{quote(str(key))}] is not an object")
            for queue_id, offset in queues.items():
                topic, _, group = str(key).rpartition("@")
                self.offsets.commit(group, topic, int(queue_id), int(offset))
        self.persist(self.offsets)
        log.info("Update slave consumer offset from master, %s", master)

    async def _sync_delay_offsets(self, master: str) -> None:
        if self.schedule is None:
            return
        data = await self._get(master, RequestCode.GET_ALL_DELAY_OFFSET)
        table = {int(level): int(offset) for level, offset in _table(data, "offsetTable").items()}
        self.schedule.take_offsets(table)
        self.persist(self.schedule)
        log.info("Update slave delay offset from master, %s", master)

    async def _sync_groups(self, master: str) -> None:
        data = await self._get(master, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        version = _version(data)
        if version == self.groups.data_version:
            return
        table = {name: SubscriptionGroupConfig.from_json(entry, name)
                 for name, entry in _table(data, "subscriptionGroupTable").items()}
        self.groups.table.clear()
        self.groups.table.update(table)
        self.groups.data_version = version
        self.persist(self.groups)
        log.info("Update slave Subscription Group from master, %s", master)


def _table(data: dict[str, Any], key: str) -> dict[str, Any]:
    table = data.get(key) or {}
    if not isinstance(table, dict):
        raise ValueError(f"{key} is not an object")
    return table


def _version(data: dict[str, Any]) -> DataVersion:
    version = data.get("dataVersion") or {}
    if not isinstance(version, dict):
        raise ValueError("dataVersion is not an object")
    return DataVersion.from_json(version)
