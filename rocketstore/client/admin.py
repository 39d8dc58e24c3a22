"""Administration over the wire: :class:`AsyncAdmin` and the blocking :class:`AdminClient`.

What RocketMQ's ``DefaultMQAdminExt`` does for mqadmin's most used commands: topics (create,
update, delete, list, route, status), clusters and brokers, consumer groups (progress,
connections, offsets reset by time), producer connections, and messages looked up by id, key
or queue offset. Results are plain dicts and lists with RocketMQ's camelCase field names (what
``rocketstore admin ... --json`` prints), messages are :class:`MessageExt`.
"""

from __future__ import annotations

import json
from typing import Any

from rocketstore.client.config import TOOLS_CONSUMER_GROUP, ClientConfig
from rocketstore.client.errors import MQBrokerError, MQClientError
from rocketstore.client.instance import ClientInstance, parse_offset_table
from rocketstore.client.loop_thread import BlockingClient
from rocketstore.client.message import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    MessageExt,
    MessageQueue,
    PullResult,
    PullStatus,
    decode_offset_msg_id,
    retry_topic,
    validate_topic,
)
from rocketstore.client.subscription import Selector, SubscriptionData
from rocketstore.common.fastjson import loads_object_keys
from rocketstore.common.perm import PERM_READ, PERM_WRITE
from rocketstore.common.pull_sys_flag import FLAG_SUBSCRIPTION
from rocketstore.remoting import RequestCode, ResponseCode, create_request
from rocketstore.remoting.route_bodies import MASTER_ID, TopicRouteData

#: QUERY_MESSAGE's end of time: everything.
_END_OF_TIME = 2**63 - 1


def _mq_table(table: Any) -> dict[MessageQueue, Any]:
    """A fastjson map keyed by MessageQueue objects."""
    result: dict[MessageQueue, Any] = {}
    if isinstance(table, dict):
        for key, value in table.items():
            if isinstance(key, tuple):
                result[MessageQueue.from_json(dict(key))] = value
    return result


def _route_json(route: TopicRouteData) -> dict[str, Any]:
    return {
        "brokerDatas": [{"brokerAddrs": {str(k): v for k, v in sorted(b.broker_addrs.items())},
                         "brokerName": b.broker_name, "cluster": b.cluster} for b in route.broker_datas],
        "queueDatas": [qd.to_json() for qd in route.queue_datas],
        "filterServerTable": route.filter_server_table,
        **({"orderTopicConf": route.order_topic_conf} if route.order_topic_conf else {}),
    }


class AsyncAdmin:
    """Admin requests on the running asyncio loop; ``namesrv_addr`` as for the clients."""

    def __init__(self, namesrv_addr: str | None = None, *, config: ClientConfig | None = None,
                 timeout: float = 5.0) -> None:
        base = config or ClientConfig()
        self.config = base.replace(namesrv_addr=namesrv_addr) if namesrv_addr is not None else base
        self.timeout = timeout
        self._instance: ClientInstance | None = None

    async def start(self) -> None:
        if self._instance is None:
            instance = ClientInstance(self.config)
            await instance.start()
            self._instance = instance

    async def shutdown(self) -> None:
        instance, self._instance = self._instance, None
        if instance is not None:
            await instance.shutdown()

    async def __aenter__(self) -> AsyncAdmin:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    @property
    def instance(self) -> ClientInstance:
        if self._instance is None:
            raise MQClientError("the admin client is not started")
        return self._instance

    # ---- name server views ----

    async def cluster_info(self) -> dict[str, Any]:
        """``{"brokerAddrTable": {name: {"cluster", "brokerName", "brokerAddrs"}},
        "clusterAddrTable": {cluster: [names]}}`` with broker ids as ints."""
        response = await self.instance.api.invoke_namesrv(create_request(RequestCode.GET_BROKER_CLUSTER_INFO), self.timeout)
        if response.code != ResponseCode.SUCCESS:
            raise MQBrokerError(response.code, response.remark, "name server")
        data = loads_object_keys(response.body_bytes() or b"{}")
        table = {}
        for name, broker in (data.get("brokerAddrTable") or {}).items():
            addrs = {int(k): str(v) for k, v in (broker.get("brokerAddrs") or {}).items()}
            table[str(name)] = {"cluster": broker.get("cluster", ""), "brokerName": str(name), "brokerAddrs": addrs}
        clusters = {str(k): sorted(v) for k, v in (data.get("clusterAddrTable") or {}).items()}
        return {"brokerAddrTable": table, "clusterAddrTable": clusters}

    async def masters(self, cluster: str | None = None) -> dict[str, str]:
        """Broker name -> master address, of one cluster or of all."""
        info = await self.cluster_info()
        names = info["clusterAddrTable"].get(cluster, []) if cluster else list(info["brokerAddrTable"])
        if cluster and cluster not in info["clusterAddrTable"]:
            raise MQClientError(f"cluster {cluster!r} is unknown to the name server "
                                f"(known: {', '.join(sorted(info['clusterAddrTable'])) or 'none'})")
        return {name: info["brokerAddrTable"][name]["brokerAddrs"][MASTER_ID]
                for name in sorted(names)
                if name in info["brokerAddrTable"] and MASTER_ID in info["brokerAddrTable"][name]["brokerAddrs"]}

    async def topic_list(self) -> list[str]:
        return sorted(await self.instance.api.get_topic_list(self.timeout))

    async def route(self, topic: str) -> TopicRouteData:
        validate_topic(topic)
        route = await self.instance.api.get_topic_route(topic, self.timeout)
        if route is None:
            raise MQClientError(f"topic {topic!r} does not exist (no route on the name server)")
        self.instance.topic_routes[topic] = route
        self.instance.broker_addrs.update({b.broker_name: dict(b.broker_addrs) for b in route.broker_datas})
        return route

    async def topic_route(self, topic: str) -> dict[str, Any]:
        return _route_json(await self.route(topic))

    async def _topic_masters(self, topic: str) -> dict[str, str]:
        route = await self.route(topic)
        return {b.broker_name: b.broker_addrs[MASTER_ID] for b in sorted(route.broker_datas, key=lambda b: b.broker_name)
                if MASTER_ID in b.broker_addrs}

    # ---- topics ----

    async def update_topic(self, topic: str, *, cluster: str | None = None, broker_addr: str | None = None,
                           read_queue_nums: int = 8, write_queue_nums: int = 8,
                           perm: int = PERM_READ | PERM_WRITE,
                           order: bool = False, memory: bool = False) -> list[str]:
        """Create or change ``topic`` on one broker or on every master of a cluster; returns
        the addresses updated. ``memory``: a memory topic (rocketstore's brokers with
        memoryTopicEnable: its messages are held in memory only, lost at restart)."""
        validate_topic(topic)
        if (cluster is None) == (broker_addr is None):
            raise MQClientError("give exactly one of cluster and broker_addr")
        for name, value in (("read_queue_nums", read_queue_nums), ("write_queue_nums", write_queue_nums)):
            if not 1 <= value <= 1024:
                raise ValueError(f"{name} must be in [1, 1024], got {value}")
        if perm not in (PERM_WRITE, PERM_READ, PERM_READ | PERM_WRITE):
            raise ValueError(f"perm must be 2 (write), 4 (read) or 6 (both), got {perm}")
        ext = {"topic": topic, "defaultTopic": AUTO_CREATE_TOPIC_KEY_TOPIC, "readQueueNums": str(read_queue_nums),
               "writeQueueNums": str(write_queue_nums), "perm": str(perm), "topicFilterType": "SINGLE_TAG",
               "topicSysFlag": "0", "order": "true" if order else "false"}
        if memory:
            ext["memory"] = "true"
        addresses = [broker_addr] if broker_addr else list((await self.masters(cluster)).values())
        if not addresses:
            raise MQClientError(f"cluster {cluster!r} has no master broker")
        for address in addresses:
            await self.instance.api.invoke_broker(address, RequestCode.UPDATE_AND_CREATE_TOPIC, ext,
                                                  timeout=self.timeout)
        return addresses

    async def delete_topic(self, topic: str, cluster: str) -> list[str]:
        validate_topic(topic)
        addresses = list((await self.masters(cluster)).values())
        for address in addresses:
            await self.instance.api.invoke_broker(address, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic},
                                                  timeout=self.timeout)
        for namesrv in self.instance.api.namesrv_addresses:
            await self.instance.api.invoke_broker(namesrv, RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": topic},
                                                  timeout=self.timeout)
        return addresses

    async def topic_status(self, topic: str) -> list[dict[str, Any]]:
        """Per queue: brokerName, queueId, minOffset, maxOffset, lastUpdateTimestamp."""
        rows = []
        for address in (await self._topic_masters(topic)).values():
            rows.extend(await self.topic_stats(address, topic))
        return sorted(rows, key=lambda r: (r["brokerName"], r["queueId"]))

    async def topic_stats(self, broker_addr: str, topic: str) -> list[dict[str, Any]]:
        """GET_TOPIC_STATS_INFO on one broker: its queues of ``topic`` as topic_status gives them."""
        response = await self.instance.api.invoke_broker(broker_addr, RequestCode.GET_TOPIC_STATS_INFO,
                                                         {"topic": topic}, timeout=self.timeout)
        table = _mq_table(loads_object_keys(response.body_bytes() or b"{}").get("offsetTable"))
        return sorted(({"brokerName": mq.broker_name, "queueId": mq.queue_id,
                        "minOffset": int(stats.get("minOffset", 0)), "maxOffset": int(stats.get("maxOffset", 0)),
                        "lastUpdateTimestamp": int(stats.get("lastUpdateTimestamp", 0))}
                       for mq, stats in table.items()), key=lambda r: (r["brokerName"], r["queueId"]))

    # ---- brokers ----

    async def broker_status(self, broker_addr: str) -> dict[str, str]:
        response = await self.instance.api.invoke_broker(broker_addr, RequestCode.GET_BROKER_RUNTIME_INFO,
                                                         timeout=self.timeout)
        table = loads_object_keys(response.body_bytes() or b"{}").get("table") or {}
        return {str(k): str(v) for k, v in sorted(table.items())}

    # ---- controller mode (RocketMQ 5's mqadmin getSyncStateSet, getBrokerEpoch,
    # getControllerMetaData, electMaster) ----

    async def get_sync_state_set(self, controller_addr: str,
                                 broker_names: list[str] | None = None) -> dict[str, Any]:
        """brokerName -> the controller's view: master, epochs, SyncStateSet, replicas."""
        response = await self.instance.api.invoke_broker(
            controller_addr, RequestCode.CONTROLLER_GET_SYNC_STATE_DATA,
            body=json.dumps(broker_names or []).encode(), timeout=self.timeout)
        result: dict[str, Any] = json.loads(response.body_bytes() or b"{}")
        return result

    async def get_controller_metadata(self, controller_addr: str) -> dict[str, str]:
        response = await self.instance.api.invoke_broker(
            controller_addr, RequestCode.CONTROLLER_GET_METADATA_INFO, timeout=self.timeout)
        return dict(response.ext_fields)

    async def elect_master(self, controller_addr: str, broker_name: str,
                           broker_id: int | None = None) -> dict[str, Any]:
        """Ask the controller to elect broker_id (None: the best candidate of the
        SyncStateSet) master of broker_name; the group's new state."""
        fields = {"brokerName": broker_name, "brokerId": str(-1 if broker_id is None else broker_id)}
        response = await self.instance.api.invoke_broker(
            controller_addr, RequestCode.CONTROLLER_ELECT_MASTER, fields, timeout=self.timeout)
        result: dict[str, Any] = json.loads(response.body_bytes() or b"{}")
        return result

    async def get_broker_epoch(self, broker_addr: str) -> dict[str, Any]:
        """A broker's epochs (GET_BROKER_EPOCH_CACHE): epochList, maxOffset, brokerId."""
        response = await self.instance.api.invoke_broker(
            broker_addr, RequestCode.GET_BROKER_EPOCH_CACHE, timeout=self.timeout)
        result: dict[str, Any] = json.loads(response.body_bytes() or b"{}")
        return result

    async def cluster_list(self) -> list[dict[str, Any]]:
        """One row per broker: cluster, brokerName, brokerId, address, and runtime figures."""
        info = await self.cluster_info()
        rows = []
        for cluster, names in sorted(info["clusterAddrTable"].items()):
            for name in names:
                for broker_id, address in sorted(info["brokerAddrTable"].get(name, {}).get("brokerAddrs", {}).items()):
                    try:
                        status: dict[str, str] = await self.broker_status(address)
                    except Exception as exc:  # noqa: BLE001 - a row for a broker that does not answer
                        status = {"error": str(exc)}
                    rows.append({"cluster": cluster, "brokerName": name, "brokerId": broker_id, "address": address,
                                 "version": status.get("brokerVersionDesc", ""),
                                 "putTps": status.get("putTps", ""), "getTransferedTps": status.get("getTransferedTps", ""),
                                 "msgPutTotalTodayNow": status.get("msgPutTotalTodayNow", ""),
                                 "msgGetTotalTodayNow": status.get("msgGetTotalTodayNow", ""),
                                 **({"error": status["error"]} if "error" in status else {})})
        return rows

    # ---- consumer groups ----

    async def _group_brokers(self, group: str) -> list[str]:
        """The masters serving a group: those of its retry topic, else every master."""
        try:
            return list((await self._topic_masters(retry_topic(group))).values())
        except MQClientError:
            return list((await self.masters()).values())

    async def consumer_progress(self, group: str, topic: str | None = None) -> dict[str, Any]:
        """ConsumeStats: per queue brokerOffset, consumerOffset, diff, lastTimestamp; the
        total diff and the group's consume TPS."""
        rows = []
        tps = 0.0
        ext = {"consumerGroup": group, **({"topic": topic} if topic else {})}
        for address in await self._group_brokers(group):
            try:
                response = await self.instance.api.invoke_broker(address, RequestCode.GET_CONSUME_STATS, ext,
                                                                 timeout=self.timeout)
            except MQBrokerError as exc:
                if exc.response_code in (ResponseCode.CONSUMER_NOT_ONLINE, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                         ResponseCode.TOPIC_NOT_EXIST):
                    continue
                raise
            data = loads_object_keys(response.body_bytes() or b"{}")
            tps += float(data.get("consumeTps") or 0)
            for mq, wrapper in _mq_table(data.get("offsetTable")).items():
                broker_offset = int(wrapper.get("brokerOffset", 0))
                consumer_offset = int(wrapper.get("consumerOffset", 0))
                rows.append({"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id,
                             "brokerOffset": broker_offset, "consumerOffset": consumer_offset,
                             "diff": broker_offset - consumer_offset,
                             "lastTimestamp": int(wrapper.get("lastTimestamp", 0))})
        rows.sort(key=lambda r: (r["topic"], r["brokerName"], r["queueId"]))
        return {"consumerGroup": group, "offsetTable": rows, "consumeTps": tps,
                "diffTotal": sum(r["diff"] for r in rows)}

    async def consumer_connection(self, group: str) -> dict[str, Any]:
        last: Exception | None = None
        for address in await self._group_brokers(group):
            try:
                response = await self.instance.api.invoke_broker(
                    address, RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group}, timeout=self.timeout)
            except MQBrokerError as exc:
                last = exc
                continue
            return dict(loads_object_keys(response.body_bytes() or b"{}"))
        raise MQClientError(f"consumer group {group!r} is not online: {last}")

    async def producer_connection(self, group: str, topic: str) -> dict[str, Any]:
        connections: dict[str, dict[str, Any]] = {}
        for address in (await self._topic_masters(topic)).values():
            try:
                response = await self.instance.api.invoke_broker(
                    address, RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": group}, timeout=self.timeout)
            except MQBrokerError:
                continue
            for conn in loads_object_keys(response.body_bytes() or b"{}").get("connectionSet") or []:
                connections[str(conn.get("clientId"))] = conn
        if not connections:
            raise MQClientError(f"producer group {group!r} has no connection to the brokers of {topic!r}")
        return {"connectionSet": sorted(connections.values(), key=lambda c: str(c.get("clientId")))}

    async def reset_offset_by_time(self, group: str, topic: str, timestamp_ms: int,
                                   force: bool = True) -> dict[MessageQueue, int]:
        """Move the group's offsets of ``topic`` to the first message stored at or after
        ``timestamp_ms`` (-1: the end); online members are told by their brokers."""
        offsets: dict[MessageQueue, int] = {}
        ext = {"topic": topic, "group": group, "timestamp": str(timestamp_ms), "isForce": str(force).lower()}
        for address in (await self._topic_masters(topic)).values():
            response = await self.instance.api.invoke_broker(address, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                                                             ext, timeout=self.timeout)
            if response.body:
                offsets.update(parse_offset_table(response.body_bytes()))
        return offsets

    # ---- messages ----

    async def view_message(self, offset_msg_id: str, address: str | None = None) -> MessageExt:
        """The message an offset id names, from the broker whose store host the id holds, or
        from ``address`` (a store served by another broker than the one that wrote it)."""
        named, offset = decode_offset_msg_id(offset_msg_id)
        return await self.instance.api.view_message(address or named, offset, self.timeout)  # type: ignore[no-any-return]

    async def query_msg_by_id(self, msg_id: str, topic: str | None = None,
                              address: str | None = None) -> MessageExt:
        """By the broker's offset id (asked of ``address`` when given, see view_message), or
        by the client's id (UNIQ_KEY) within ``topic``."""
        try:
            return await self.view_message(msg_id, address)
        except (ValueError, MQClientError, OSError) as exc:
            if topic is None:
                raise MQClientError(f"message {msg_id} not found by its offset id ({exc}); "
                                    "give the topic to look it up by its client id") from None
        found = await self._query(topic, msg_id, 32, unique=True)
        if not found:
            raise MQClientError(f"message {msg_id} not found in topic {topic}")
        return found[0]

    async def query_msg_by_key(self, topic: str, key: str, max_num: int = 64,
                               begin_timestamp: int = 0, end_timestamp: int = _END_OF_TIME) -> list[MessageExt]:
        found = await self._query(topic, key, max_num, begin_timestamp=begin_timestamp, end_timestamp=end_timestamp)
        return [m for m in found if key in m.keys][:max_num]

    async def _query(self, topic: str, key: str, max_num: int, *, unique: bool = False,
                     begin_timestamp: int = 0, end_timestamp: int = _END_OF_TIME) -> list[MessageExt]:
        results: list[MessageExt] = []
        for name, address in (await self._topic_masters(topic)).items():
            found = await self.instance.api.query_message(address, topic, key, max_num, begin_timestamp,
                                                          end_timestamp, self.timeout, unique_key=unique,
                                                          broker_name=name)
            results.extend(m for m in found if m.topic == topic)
        if unique:
            results = [m for m in results if m.msg_id == key]
        results.sort(key=lambda m: (m.store_timestamp, m.commit_log_offset))
        return results

    async def query_msg_by_offset(self, topic: str, broker_name: str, queue_id: int, offset: int) -> MessageExt | None:
        messages = await self.pull(MessageQueue(topic, broker_name, queue_id), offset, 1)
        return messages[0] if messages and messages[0].queue_offset == offset else None

    async def pull(self, mq: MessageQueue, offset: int, max_nums: int = 32, expression: Selector = "*",
                   group: str = TOOLS_CONSUMER_GROUP) -> list[MessageExt]:
        """Read a queue from ``offset`` without a consumer group's offsets."""
        if mq.broker_name not in self.instance.broker_addrs:
            await self.route(mq.topic)
        address = self.instance.broker_address(mq.broker_name)
        if address is None:
            raise MQClientError(f"broker {mq.broker_name!r} serves no route of {mq.topic!r}")
        subscription = SubscriptionData.build(mq.topic, expression)
        result = await self.instance.api.pull_message(address, group, mq, offset, max_nums, FLAG_SUBSCRIPTION, 0, 0,
                                                      subscription, self.timeout)
        if result.pull_status is not PullStatus.FOUND:
            return []
        return subscription.filter(result.messages)

    async def queue_address(self, mq: MessageQueue) -> str:
        """The address of the broker holding mq (its master; a slave when there is none)."""
        if mq.broker_name not in self.instance.broker_addrs:
            await self.route(mq.topic)
        address = self.instance.broker_address(mq.broker_name)
        if address is None:
            raise MQClientError(f"broker {mq.broker_name!r} serves no route of {mq.topic!r}")
        return address

    async def pull_records(self, mq: MessageQueue, offset: int, max_nums: int,
                           subscription: SubscriptionData, group: str = TOOLS_CONSUMER_GROUP
                           ) -> tuple[PullResult, bytes | bytearray | memoryview]:
        """One PULL_MESSAGE from ``offset`` without a consumer group's offsets: the result
        (status, next begin offset, min/max offsets; no messages) and the records undecoded
        (``ClientAPI.pull_message_raw``). The broker filters by tag hash codes only."""
        address = await self.queue_address(mq)
        return await self.instance.api.pull_message_raw(
            address, group, mq, offset, max_nums, FLAG_SUBSCRIPTION, 0, 0, subscription,
            self.timeout)

    async def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP: the first offset of mq stored at or after the time."""
        return await self.instance.api.search_offset(await self.queue_address(mq), mq,
                                                     timestamp_ms, self.timeout)

    async def update_consumer_offset(self, group: str, mq: MessageQueue, offset: int) -> None:
        """UPDATE_CONSUMER_OFFSET: the group's committed offset of mq on its master."""
        if mq.broker_name not in self.instance.broker_addrs:
            await self.route(mq.topic)
        address = self.instance.master_address(mq.broker_name)
        if address is None:
            raise MQClientError(f"broker {mq.broker_name!r} has no master to commit offsets to")
        await self.instance.api.update_consumer_offset(address, group, mq, offset, self.timeout)

    async def queues(self, topic: str) -> list[MessageQueue]:
        route = await self.route(topic)
        return sorted(MessageQueue(topic, qd.broker_name, i) for qd in route.queue_datas
                      for i in range(qd.read_queue_nums))

    async def max_offset(self, mq: MessageQueue) -> int:
        if mq.broker_name not in self.instance.broker_addrs:
            await self.route(mq.topic)
        address = self.instance.broker_address(mq.broker_name)
        if address is None:
            raise MQClientError(f"broker {mq.broker_name!r} serves no route of {mq.topic!r}")
        return await self.instance.api.get_max_offset(address, mq, self.timeout)

    async def min_offset(self, mq: MessageQueue) -> int:
        if mq.broker_name not in self.instance.broker_addrs:
            await self.route(mq.topic)
        address = self.instance.broker_address(mq.broker_name)
        if address is None:
            raise MQClientError(f"broker {mq.broker_name!r} serves no route of {mq.topic!r}")
        return await self.instance.api.get_min_offset(address, mq, self.timeout)

    # ---- broker tables ----

    async def topic_configs(self, broker_addr: str) -> dict[str, dict[str, Any]]:
        """GET_ALL_TOPIC_CONFIG: topic name -> its TopicConfig (readQueueNums, writeQueueNums,
        perm, order, ...) on one broker."""
        response = await self.instance.api.invoke_broker(broker_addr, RequestCode.GET_ALL_TOPIC_CONFIG,
                                                         timeout=self.timeout)
        table = loads_object_keys(response.body_bytes() or b"{}").get("topicConfigTable") or {}
        return {str(name): dict(cfg) for name, cfg in table.items() if isinstance(cfg, dict)}

    async def subscription_groups(self, broker_addr: str) -> dict[str, dict[str, Any]]:
        """GET_ALL_SUBSCRIPTIONGROUP_CONFIG: group name -> its SubscriptionGroupConfig on one
        broker."""
        response = await self.instance.api.invoke_broker(broker_addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
                                                         timeout=self.timeout)
        table = loads_object_keys(response.body_bytes() or b"{}").get("subscriptionGroupTable") or {}
        return {str(name): dict(cfg) for name, cfg in table.items() if isinstance(cfg, dict)}

    async def topic_consumers(self, topic: str) -> list[str]:
        """QUERY_TOPIC_CONSUME_BY_WHO on every master of ``topic``: the groups subscribed to it
        or holding offsets of it."""
        groups: set[str] = set()
        for address in (await self._topic_masters(topic)).values():
            response = await self.instance.api.invoke_broker(address, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO,
                                                             {"topic": topic}, timeout=self.timeout)
            groups.update(str(g) for g in loads_object_keys(response.body_bytes() or b"{}").get("groupList") or [])
        return sorted(groups)


class AdminClient(BlockingClient[AsyncAdmin]):
    """The blocking admin client (for scripts and the ``rocketstore admin`` CLI)::

        with AdminClient(namesrv_addr="127.0.0.1:9876") as admin:
            admin.update_topic("orders", cluster="DefaultCluster", write_queue_nums=8)
            print(admin.topic_status("orders"))
    """

    not_running_text = "the admin client is not started"

    def __init__(self, namesrv_addr: str | None = None, *, config: ClientConfig | None = None,
                 timeout: float = 5.0) -> None:
        super().__init__(AsyncAdmin(namesrv_addr, config=config, timeout=timeout), "rocketstore-admin")

    # one blocking method per AsyncAdmin coroutine, the same parameters and docstring
    # (tests/client/test_client_typing.py checks that none is missing or differs)

    def cluster_info(self) -> dict[str, Any]:
        """``{"brokerAddrTable": {name: {"cluster", "brokerName", "brokerAddrs"}},
        "clusterAddrTable": {cluster: [names]}}`` with broker ids as ints."""
        return self._run(self._core.cluster_info())

    def masters(self, cluster: str | None = None) -> dict[str, str]:
        """Broker name -> master address, of one cluster or of all."""
        return self._run(self._core.masters(cluster))

    def topic_list(self) -> list[str]:
        return self._run(self._core.topic_list())

    def route(self, topic: str) -> TopicRouteData:
        return self._run(self._core.route(topic))

    def topic_route(self, topic: str) -> dict[str, Any]:
        return self._run(self._core.topic_route(topic))

    def update_topic(self, topic: str, *, cluster: str | None = None, broker_addr: str | None = None,
                     read_queue_nums: int = 8, write_queue_nums: int = 8,
                     perm: int = PERM_READ | PERM_WRITE, order: bool = False,
                     memory: bool = False) -> list[str]:
        """Create or change ``topic`` on one broker or on every master of a cluster; returns
        the addresses updated. ``memory``: a memory topic (rocketstore's brokers with
        memoryTopicEnable: its messages are held in memory only, lost at restart)."""
        return self._run(self._core.update_topic(
            topic, cluster=cluster, broker_addr=broker_addr, read_queue_nums=read_queue_nums,
            write_queue_nums=write_queue_nums, perm=perm, order=order, memory=memory))

    def delete_topic(self, topic: str, cluster: str) -> list[str]:
        return self._run(self._core.delete_topic(topic, cluster))

    def topic_status(self, topic: str) -> list[dict[str, Any]]:
        """Per queue: brokerName, queueId, minOffset, maxOffset, lastUpdateTimestamp."""
        return self._run(self._core.topic_status(topic))

    def topic_stats(self, broker_addr: str, topic: str) -> list[dict[str, Any]]:
        """GET_TOPIC_STATS_INFO on one broker: its queues of ``topic`` as topic_status gives them."""
        return self._run(self._core.topic_stats(broker_addr, topic))

    def broker_status(self, broker_addr: str) -> dict[str, str]:
        return self._run(self._core.broker_status(broker_addr))

    def cluster_list(self) -> list[dict[str, Any]]:
        """One row per broker: cluster, brokerName, brokerId, address, and runtime figures."""
        return self._run(self._core.cluster_list())

    def consumer_progress(self, group: str, topic: str | None = None) -> dict[str, Any]:
        """ConsumeStats: per queue brokerOffset, consumerOffset, diff, lastTimestamp; the
        total diff and the group's consume TPS."""
        return self._run(self._core.consumer_progress(group, topic))

    def consumer_connection(self, group: str) -> dict[str, Any]:
        return self._run(self._core.consumer_connection(group))

    def producer_connection(self, group: str, topic: str) -> dict[str, Any]:
        return self._run(self._core.producer_connection(group, topic))

    def reset_offset_by_time(self, group: str, topic: str, timestamp_ms: int,
                             force: bool = True) -> dict[MessageQueue, int]:
        """Move the group's offsets of ``topic`` to the first message stored at or after
        ``timestamp_ms`` (-1: the end); online members are told by their brokers."""
        return self._run(self._core.reset_offset_by_time(group, topic, timestamp_ms, force))

    def view_message(self, offset_msg_id: str, address: str | None = None) -> MessageExt:
        """The message an offset id names, from the broker whose store host the id holds, or
        from ``address`` (a store served by another broker than the one that wrote it)."""
        return self._run(self._core.view_message(offset_msg_id, address))

    def query_msg_by_id(self, msg_id: str, topic: str | None = None,
                        address: str | None = None) -> MessageExt:
        """By the broker's offset id (asked of ``address`` when given, see view_message), or
        by the client's id (UNIQ_KEY) within ``topic``."""
        return self._run(self._core.query_msg_by_id(msg_id, topic, address))

    def query_msg_by_key(self, topic: str, key: str, max_num: int = 64,
                         begin_timestamp: int = 0, end_timestamp: int = _END_OF_TIME) -> list[MessageExt]:
        return self._run(self._core.query_msg_by_key(topic, key, max_num, begin_timestamp,
                                                     end_timestamp))

    def query_msg_by_offset(self, topic: str, broker_name: str, queue_id: int,
                            offset: int) -> MessageExt | None:
        return self._run(self._core.query_msg_by_offset(topic, broker_name, queue_id, offset))

    def pull(self, mq: MessageQueue, offset: int, max_nums: int = 32, expression: Selector = "*",
             group: str = TOOLS_CONSUMER_GROUP) -> list[MessageExt]:
        """Read a queue from ``offset`` without a consumer group's offsets."""
        return self._run(self._core.pull(mq, offset, max_nums, expression, group))

    def queues(self, topic: str) -> list[MessageQueue]:
        return self._run(self._core.queues(topic))

    def max_offset(self, mq: MessageQueue) -> int:
        return self._run(self._core.max_offset(mq))

    def min_offset(self, mq: MessageQueue) -> int:
        return self._run(self._core.min_offset(mq))

    def get_sync_state_set(self, controller_addr: str,
                                 broker_names: list[str] | None = None) -> dict[str, Any]:
        """brokerName -> the controller's view: master, epochs, SyncStateSet, replicas."""
        return self._run(self._core.get_sync_state_set(controller_addr, broker_names))

    def get_controller_metadata(self, controller_addr: str) -> dict[str, str]:
        return self._run(self._core.get_controller_metadata(controller_addr))

    def elect_master(self, controller_addr: str, broker_name: str,
                     broker_id: int | None = None) -> dict[str, Any]:
        """Ask the controller to elect broker_id (None: the best candidate of the
        SyncStateSet) master of broker_name; the group's new state."""
        return self._run(self._core.elect_master(controller_addr, broker_name, broker_id))

    def get_broker_epoch(self, broker_addr: str) -> dict[str, Any]:
        """A broker's epochs (GET_BROKER_EPOCH_CACHE): epochList, maxOffset, brokerId."""
        return self._run(self._core.get_broker_epoch(broker_addr))

    def queue_address(self, mq: MessageQueue) -> str:
        """The address of the broker holding mq (its master; a slave when there is none)."""
        return self._run(self._core.queue_address(mq))

    def pull_records(self, mq: MessageQueue, offset: int, max_nums: int,
                     subscription: SubscriptionData, group: str = TOOLS_CONSUMER_GROUP
                     ) -> tuple[PullResult, bytes | bytearray | memoryview]:
        """One PULL_MESSAGE from ``offset`` without a consumer group's offsets: the result
        (status, next begin offset, min/max offsets; no messages) and the records undecoded
        (``ClientAPI.pull_message_raw``). The broker filters by tag hash codes only."""
        return self._run(self._core.pull_records(mq, offset, max_nums, subscription, group))

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP: the first offset of mq stored at or after the time."""
        return self._run(self._core.search_offset(mq, timestamp_ms))

    def update_consumer_offset(self, group: str, mq: MessageQueue, offset: int) -> None:
        """UPDATE_CONSUMER_OFFSET: the group's committed offset of mq on its master."""
        return self._run(self._core.update_consumer_offset(group, mq, offset))

    def topic_configs(self, broker_addr: str) -> dict[str, dict[str, Any]]:
        """GET_ALL_TOPIC_CONFIG: topic name -> its TopicConfig (readQueueNums, writeQueueNums,
        perm, order, ...) on one broker."""
        return self._run(self._core.topic_configs(broker_addr))

    def subscription_groups(self, broker_addr: str) -> dict[str, dict[str, Any]]:
        """GET_ALL_SUBSCRIPTIONGROUP_CONFIG: group name -> its SubscriptionGroupConfig on one
        broker."""
        return self._run(self._core.subscription_groups(broker_addr))

    def topic_consumers(self, topic: str) -> list[str]:
        """QUERY_TOPIC_CONSUME_BY_WHO on every master of ``topic``: the groups subscribed to it
        or holding offsets of it."""
        return self._run(self._core.topic_consumers(topic))
