"""ClientInstance: one client's connections, routes, heartbeats and server-initiated requests.

RocketMQ's MQClientInstance, for one producer or consumer: it owns the RemotingClient, keeps
the routes of the topics its members use (refreshed every ``poll_name_server_interval``), the
broker addresses they name, sends heartbeats to every broker (every
``heartbeat_broker_interval``), and answers what brokers ask a client:
NOTIFY_CONSUMER_IDS_CHANGED (rebalance now), RESET_CONSUMER_CLIENT_OFFSET (an admin reset a
group's offsets) and GET_CONSUMER_RUNNING_INFO. Everything runs on one event loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import os
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from rocketstore.client.api import ClientAPI
from rocketstore.client.config import ClientConfig
from rocketstore.client.errors import MQClientError
from rocketstore.client.message import MessageConst, MessageExt, MessageQueue
from rocketstore.client.records import CorruptMessageError, decode_message
from rocketstore.client.route import (
    TopicPublishInfo,
    broker_addresses,
    publish_info_from_route,
    subscribe_info_from_route,
)
from rocketstore.common.fastjson import dumps_object_keys, loads_object_keys
from rocketstore.remoting import (
    RemotingClient,
    RemotingClientConfig,
    RemotingCommand,
    RemotingConnection,
    RequestCode,
    ResponseCode,
    create_response,
)
from rocketstore.remoting.route_bodies import MASTER_ID, TopicRouteData

log = logging.getLogger(__name__)

_instance_numbers = itertools.count()


class ProducerMember(Protocol):
    group: str

    def topics_in_use(self) -> set[str]: ...
    def update_publish_info(self, topic: str, info: TopicPublishInfo) -> None: ...
    def check_transaction_state(self, connection: RemotingConnection, message: MessageExt,
                                request: RemotingCommand) -> None: ...


class ConsumerMember(Protocol):
    group: str

    def subscribed_topics(self) -> set[str]: ...
    def update_subscribe_info(self, topic: str, queues: set[MessageQueue]) -> None: ...
    def consumer_data(self) -> dict[str, Any]: ...
    def rebalance_immediately(self) -> None: ...
    async def reset_offsets(self, topic: str, offsets: dict[MessageQueue, int]) -> None: ...
    def running_info(self) -> dict[str, Any]: ...


def make_client_id(config: ClientConfig) -> str:
    """``ip@instance``: the instance name "DEFAULT" becomes the process id, and every client
    object of a process gets its own number, so two consumers of one group in one process
    are two members of it."""
    instance = config.instance_name
    if instance == "DEFAULT":
        instance = str(os.getpid())
    return f"{config.client_ip}@{instance}#{next(_instance_numbers)}"


class ClientInstance:
    def __init__(self, config: ClientConfig, remoting_config: RemotingClientConfig | None = None) -> None:
        self.config = config
        self.client_id = make_client_id(config)
        self.remoting = RemotingClient(remoting_config, rpc_hook=config.credentials)
        self.api = ClientAPI(self.remoting, config.namesrv_addresses)
        self.timeout = config.mq_client_api_timeout / 1000
        self.topic_routes: dict[str, TopicRouteData] = {}
        self.broker_addrs: dict[str, dict[int, str]] = {}
        self.producers: dict[str, ProducerMember] = {}
        self.consumers: dict[str, ConsumerMember] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._route_lock: asyncio.Lock | None = None
        self._started = False
        self.remoting.register_processor(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, self._on_ids_changed)
        self.remoting.register_processor(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, self._on_reset_offset)
        self.remoting.register_processor(RequestCode.GET_CONSUMER_RUNNING_INFO, self._on_running_info)
        self.remoting.register_processor(RequestCode.CHECK_TRANSACTION_STATE, self._on_check_transaction)

    # ---- life ----

    async def start(self) -> None:
        if self._started:
            return
        if not self.api.namesrv_addresses:
            raise MQClientError("no name server address: set namesrv_addr (or NAMESRV_ADDR)")
        self._route_lock = asyncio.Lock()
        self._started = True
        self._tasks.append(self._every(self.config.poll_name_server_interval, self.update_all_routes, "route refresh"))
        self._tasks.append(self._every(self.config.heartbeat_broker_interval, self.send_heartbeat_to_all_brokers,
                                       "heartbeat"))

    async def shutdown(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        await self.remoting.close()
        self._started = False

    def _every(self, interval_ms: int, action: Callable[[], Awaitable[Any]], what: str) -> asyncio.Task[None]:
        async def loop() -> None:
            while True:
                await asyncio.sleep(interval_ms / 1000)
                try:
                    await action()
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # noqa: BLE001 - a periodic task logs and goes on
                    log.warning("%s failed: %s", what, exc)

        return asyncio.ensure_future(loop())

    def spawn(self, coro: Awaitable[Any], what: str) -> asyncio.Task[Any]:
        """A background task whose failure is logged, not lost."""
        async def run() -> Any:
            try:
                return await coro
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001
                log.warning("%s failed: %s", what, exc)
                return None

        return asyncio.ensure_future(run())

    # ---- routes ----

    async def update_route(self, topic: str, *, default_topic: str | None = None,
                           default_queue_nums: int = 4) -> bool:
        """Fetch ``topic``'s route and hand it to the members; with ``default_topic``, a topic
        the name servers do not know takes that topic's route (a producer's first send to a
        topic the broker will create), with at most ``default_queue_nums`` queues per broker.
        Returns whether the topic has a route now."""
        assert self._route_lock is not None, "start() first"
        async with self._route_lock:
            route = await self.api.get_topic_route(topic, self.timeout)
            if route is None and default_topic is not None:
                route = await self.api.get_topic_route(default_topic, self.timeout)
                if route is not None:
                    route = dataclasses.replace(route, queue_datas=[
                        dataclasses.replace(qd, read_queue_nums=min(default_queue_nums, qd.read_queue_nums),
                                            write_queue_nums=min(default_queue_nums, qd.write_queue_nums))
                        for qd in route.queue_datas])
            if route is None:
                return False
            self._apply_route(topic, route)
            return True

    def _apply_route(self, topic: str, route: TopicRouteData) -> None:
        self.topic_routes[topic] = route
        addresses = broker_addresses(route)
        known = {address for addrs in self.broker_addrs.values() for address in addrs.values()}
        self.broker_addrs.update(addresses)
        if any(address not in known for addrs in addresses.values() for address in addrs.values()):
            # a broker we have not told about our groups yet: tell it now, not in 30 s
            self.spawn(self.send_heartbeat_to_all_brokers(), "heartbeat to a new broker")
        publish = publish_info_from_route(topic, route)
        for producer in self.producers.values():
            if topic in producer.topics_in_use():
                producer.update_publish_info(topic, publish)
        subscribe = subscribe_info_from_route(topic, route)
        for consumer in self.consumers.values():
            if topic in consumer.subscribed_topics():
                consumer.update_subscribe_info(topic, subscribe)

    async def update_all_routes(self) -> None:
        topics: set[str] = set()
        for producer in self.producers.values():
            topics |= producer.topics_in_use()
        for consumer in self.consumers.values():
            topics |= consumer.subscribed_topics()
        for topic in sorted(topics):
            try:
                await self.update_route(topic)
            except Exception as exc:  # noqa: BLE001 - one topic's failure does not stop the others
                log.warning("route of %s not refreshed: %s", topic, exc)

    def master_address(self, broker_name: str) -> str | None:
        return self.broker_addrs.get(broker_name, {}).get(MASTER_ID)

    def broker_address(self, broker_name: str) -> str | None:
        """The master's address, or any slave's when there is no master."""
        addrs = self.broker_addrs.get(broker_name) or {}
        if MASTER_ID in addrs:
            return addrs[MASTER_ID]
        return next(iter(addrs.values()), None)

    def find_broker_address_in_subscribe(self, broker_name: str, broker_id: int
                                         ) -> tuple[str, bool] | None:
        """(address, is a slave) of the broker a consumer pulls from (RocketMQ's
        MQClientInstance.findBrokerAddressInSubscribe, not only this broker): broker_id, then
        broker_id + 1 for a slave, then any (the lowest id: the master when there is one)."""
        addrs = self.broker_addrs.get(broker_name) or {}
        if not addrs:
            return None
        address = addrs.get(broker_id)
        if address is not None:
            return address, broker_id != MASTER_ID
        if broker_id != MASTER_ID and broker_id + 1 in addrs:
            return addrs[broker_id + 1], True
        first = min(addrs)
        return addrs[first], first != MASTER_ID

    def brokers_of_topic(self, topic: str) -> list[str]:
        """An address of each broker group serving ``topic``, by broker name: its master's, or
        a slave's when the master is absent (RocketMQ's BrokerData.selectBrokerAddr)."""
        route = self.topic_routes.get(topic)
        if route is None:
            return []
        return [b.broker_addrs.get(MASTER_ID) or b.broker_addrs[min(b.broker_addrs)]
                for b in sorted(route.broker_datas, key=lambda b: b.broker_name) if b.broker_addrs]

    # ---- membership ----

    def heartbeat_data(self) -> dict[str, Any]:
        return {
            "clientID": self.client_id,
            "consumerDataSet": [consumer.consumer_data() for consumer in self.consumers.values()],
            "producerDataSet": [{"groupName": group} for group in self.producers],
        }

    async def send_heartbeat_to_all_brokers(self) -> None:
        if not self.producers and not self.consumers:
            return
        heartbeat = self.heartbeat_data()
        has_consumers = bool(heartbeat["consumerDataSet"])
        sends = []
        for addrs in list(self.broker_addrs.values()):
            for broker_id, address in addrs.items():
                if broker_id != MASTER_ID and not has_consumers:
                    continue
                sends.append(self._heartbeat(address, heartbeat))
        await asyncio.gather(*sends)

    async def _heartbeat(self, address: str, heartbeat: dict[str, Any]) -> None:
        try:
            await self.api.send_heartbeat(address, heartbeat, self.timeout)
        except Exception as exc:  # noqa: BLE001 - a stopped broker must not stop the others
            log.info("heartbeat to %s failed: %s", address, exc)

    async def unregister(self, producer_group: str | None, consumer_group: str | None) -> None:
        sends = [self._unregister(address, producer_group, consumer_group)
                 for addrs in self.broker_addrs.values() for address in addrs.values()]
        await asyncio.gather(*sends)

    async def _unregister(self, address: str, producer_group: str | None, consumer_group: str | None) -> None:
        try:
            await self.api.unregister_client(address, self.client_id, producer_group, consumer_group,
                                             self.timeout)
        except Exception as exc:  # noqa: BLE001
            log.info("unregister from %s failed: %s", address, exc)

    async def find_consumer_id_list(self, topic: str, group: str) -> list[str]:
        """The group's client ids, from the first broker of the topic that answers."""
        last: Exception | None = None
        for address in self.brokers_of_topic(topic):
            try:
                return await self.api.get_consumer_id_list(address, group, self.timeout)
            except Exception as exc:  # noqa: BLE001 - ask the next broker
                last = exc
        if last is not None:
            raise last
        return []

    # ---- requests from brokers ----

    def _on_ids_changed(self, ctx: RemotingConnection, request: RemotingCommand) -> None:
        group = request.ext_fields.get("consumerGroup")
        log.info("broker %s says the members of %s changed: rebalancing", ctx.remote_address, group)
        for consumer in self.consumers.values():
            consumer.rebalance_immediately()
        return None

    async def _on_reset_offset(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        topic = request.ext_fields.get("topic", "")
        group = request.ext_fields.get("group", "")
        consumer = self.consumers.get(group)
        if consumer is not None and request.body:
            try:
                offsets = parse_offset_table(request.body_bytes())
            except ValueError as exc:
                return create_response(request, ResponseCode.SYSTEM_ERROR, str(exc))
            await consumer.reset_offsets(topic, offsets)
        return create_response(request)

    def _on_running_info(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        group = request.ext_fields.get("consumerGroup", "")
        consumer = self.consumers.get(group)
        if consumer is None:
            return create_response(request, ResponseCode.SYSTEM_ERROR,
                                   f"the consumer group [{group}] is not online in {self.client_id}")
        return create_response(request, body=dumps_object_keys(consumer.running_info()))


    def _on_check_transaction(self, ctx: RemotingConnection, request: RemotingCommand) -> None:
        """CHECK_TRANSACTION_STATE (oneway): the producer of the message's group answers with
        END_TRANSACTION over ``ctx`` (ClientRemotingProcessor.checkTransactionState)."""
        message = decode_check_message(request)
        if message is None:
            return None
        group = message.properties.get(MessageConst.PRODUCER_GROUP)
        producer = self.producers.get(group) if group else None
        if producer is None:
            log.debug("a broker checks a transaction of group %s: no producer of it here", group)
            return None
        producer.check_transaction_state(ctx, message, request)
        return None


def decode_check_message(request: RemotingCommand) -> MessageExt | None:
    """The message a CHECK_TRANSACTION_STATE request carries (None when it does not decode)."""
    body = request.body_bytes() if request.body is not None else b""
    try:
        message, _ = decode_message(memoryview(body))
    except (CorruptMessageError, ValueError, IndexError) as exc:
        log.warning("CHECK_TRANSACTION_STATE: the message does not decode: %s", exc)
        return None
    message.transaction_id = message.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or None
    return message


def parse_offset_table(body: bytes) -> dict[MessageQueue, int]:
    """``{"offsetTable": {queue: offset}}`` whose keys are MessageQueue objects, as fastjson
    writes them (ResetOffsetBody), or a list of ``{"messageQueue", "offset"}`` pairs."""
    data = loads_object_keys(body)
    if not isinstance(data, dict):
        raise ValueError("offset table body must be an object")
    table = data.get("offsetTable")
    offsets: dict[MessageQueue, int] = {}
    if isinstance(table, list):
        for key, value in table:
            offsets[MessageQueue.from_json(dict(key))] = int(value)
    elif isinstance(table, dict):
        for key, value in table.items():
            if isinstance(key, tuple):
                offsets[MessageQueue.from_json(dict(key))] = int(value)
    return offsets
