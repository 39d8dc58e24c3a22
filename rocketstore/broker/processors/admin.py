"""Administration (RocketMQ's AdminBrokerProcessor): what ``rocketstore admin`` and RocketMQ's
mqadmin ask a broker.

UPDATE_AND_CREATE_TOPIC 17, DELETE_TOPIC_IN_BROKER 215, GET_ALL_TOPIC_CONFIG 21,
GET_BROKER_CONFIG 26, GET_ALL_CONSUMER_OFFSET 43,
GET_ALL_DELAY_OFFSET 45, UPDATE_AND_CREATE_SUBSCRIPTIONGROUP 200,
GET_ALL_SUBSCRIPTIONGROUP_CONFIG 201, DELETE_SUBSCRIPTIONGROUP 207, GET_TOPIC_STATS_INFO 202,
GET_CONSUMER_CONNECTION_LIST 203, GET_PRODUCER_CONNECTION_LIST 204, GET_CONSUME_STATS 208,
INVOKE_BROKER_TO_RESET_OFFSET 222 (reset a group's offsets by time), QUERY_TOPIC_CONSUME_BY_WHO
300, GET_SYSTEM_TOPIC_LIST_FROM_BROKER 305, GET_CONSUMER_RUNNING_INFO 307 (asked of the
client and passed back). The statistics codes and GET_BROKER_RUNTIME_INFO 28 are
:mod:`rocketstore.broker.processors.stats`'s.

Bodies are RocketMQ's JSON; those keyed by MessageQueue (202, 208, 222) use fastjson's
object keys (:mod:`rocketstore.common.fastjson`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import orjson

from rocketstore.broker.config import BROKER_PROPERTY_KEYS
from rocketstore.broker.live_config import FIXED_BROKER_PROPERTIES
from rocketstore.broker.subscription_group import SubscriptionGroupConfig
from rocketstore.broker.topic_config import TopicConfig
from rocketstore.broker.topic_stores import TopicStores
from rocketstore.common.consume import MessageModel
from rocketstore.common.fastjson import dumps_object_keys as fastjson_dumps
from rocketstore.common.perm import PERM_READ, PERM_WRITE
from rocketstore.common.text import quote
from rocketstore.common.topics import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    BENCHMARK_TOPIC,
    NOT_ALLOWED_SEND_TOPICS,
    OFFSET_MOVED_EVENT,
    SCHEDULE_TOPIC,
    SELF_TEST_TOPIC,
)
from rocketstore.config import PROPERTY_KEYS
from rocketstore.message import validate_topic
from rocketstore.remoting import (
    RemotingCommand,
    RemotingConnection,
    RemotingServer,
    RemotingTimeoutError,
    RequestCode,
    ResponseCode,
    create_request,
    create_response,
)
from rocketstore.remoting.headers import get_bool, get_int, get_str, require_int, require_str

if TYPE_CHECKING:
    from rocketstore.broker.client_groups import ConsumerManager, ProducerManager
    from rocketstore.broker.config import BrokerConfig
    from rocketstore.broker.consumer_offset_manager import ConsumerOffsetManager
    from rocketstore.broker.long_polling import PullRequestHoldService
    from rocketstore.broker.schedule import ScheduleMessageService
    from rocketstore.broker.stats import BrokerStatsManager
    from rocketstore.broker.subscription_group import SubscriptionGroupManager
    from rocketstore.broker.topic_config import TopicConfigManager
    from rocketstore.store import MessageStore

log = logging.getLogger(__name__)

def message_queue_key(topic: str, broker_name: str, queue_id: int) -> tuple[tuple[str, object], ...]:
    """A MessageQueue as a map key: fastjson writes it as the object itself."""
    return (("brokerName", broker_name), ("queueId", queue_id), ("topic", topic))


class AdminBrokerProcessor:
    def __init__(self, config: BrokerConfig, store: MessageStore, *, topics: TopicConfigManager,
                 groups: SubscriptionGroupManager, offsets: ConsumerOffsetManager,
                 consumers: ConsumerManager, producers: ProducerManager, stats: BrokerStatsManager,
                 schedule: ScheduleMessageService, hold_service: PullRequestHoldService,
                 queues: TopicStores | None = None) -> None:
        self.config = config
        self.store = store
        #: queue offsets by topic (a memory topic's from the memory store)
        self.queues: TopicStores | MessageStore = queues if queues is not None else store
        self.topics = topics
        self.groups = groups
        self.offsets = offsets
        self.consumers = consumers
        self.producers = producers
        self.stats = stats
        self.schedule = schedule
        self.hold_service = hold_service

    def register_with(self, server: RemotingServer) -> None:
        for code, handler in (
            (RequestCode.UPDATE_AND_CREATE_TOPIC, self.update_and_create_topic),
            (RequestCode.DELETE_TOPIC_IN_BROKER, self.delete_topic),
            (RequestCode.GET_ALL_TOPIC_CONFIG, self.get_all_topic_config),
            (RequestCode.GET_BROKER_CONFIG, self.get_broker_config),
            (RequestCode.GET_ALL_CONSUMER_OFFSET, self.get_all_consumer_offset),
            (RequestCode.GET_ALL_DELAY_OFFSET, self.get_all_delay_offset),
            (RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, self.update_and_create_subscription_group),
            (RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, self.get_all_subscription_group_config),
            (RequestCode.DELETE_SUBSCRIPTIONGROUP, self.delete_subscription_group),
            (RequestCode.GET_TOPIC_STATS_INFO, self.get_topic_stats_info),
            (RequestCode.GET_CONSUMER_CONNECTION_LIST, self.get_consumer_connection_list),
            (RequestCode.GET_PRODUCER_CONNECTION_LIST, self.get_producer_connection_list),
            (RequestCode.GET_CONSUME_STATS, self.get_consume_stats),
            (RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, self.reset_offset),
            (RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, self.query_topic_consume_by_who),
            (RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER, self.get_system_topic_list),
            (RequestCode.GET_CONSUMER_RUNNING_INFO, self.get_consumer_running_info),
        ):
            server.register_processor(code, handler)

    # ---- topics ----

    def update_and_create_topic(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        ext = request.ext_fields
        topic = require_str(ext, "topic")
        try:
            validate_topic(topic)
        except (ValueError, TypeError) as exc:
            return create_response(request, ResponseCode.SYSTEM_ERROR, str(exc))
        if topic == self.config.broker_cluster_name:
            return create_response(request, ResponseCode.SYSTEM_ERROR,
                                   f"the topic[{topic}] is conflict with system reserved words.")
        try:
            cfg = TopicConfig(
                topic,
                read_queue_nums=get_int(ext, "readQueueNums", 16) or 0,
                write_queue_nums=get_int(ext, "writeQueueNums", 16) or 0,
                perm=get_int(ext, "perm", PERM_READ | PERM_WRITE) or 0,
                topic_filter_type=get_str(ext, "topicFilterType", "SINGLE_TAG") or "SINGLE_TAG",
                topic_sys_flag=get_int(ext, "topicSysFlag", 0) or 0,
                order=bool(get_bool(ext, "order", False)),
                memory=bool(get_bool(ext, "memory", False)),
            )
        except ValueError as exc:
            return create_response(request, ResponseCode.SYSTEM_ERROR, str(exc))
        refusal = self._memory_refusal(cfg)
        if refusal is not None:
            log.warning("update topic %s refused: %s", quote(topic), refusal)
            return create_response(request, ResponseCode.SYSTEM_ERROR, refusal)
        self.topics.update(cfg)
        return create_response(request)

    def _memory_refusal(self, cfg: TopicConfig) -> str | None:
        """Why a topic config's memory attribute cannot be had (None: it can): memory topics
        need memoryTopicEnable, and a topic stays where its messages are (delete it first)."""
        if cfg.memory and not self.config.memory_topic_enable:
            return (f"the topic[{cfg.topic_name}] cannot be a memory topic: the broker has "
                    "memoryTopicEnable=false")
        old = self.topics.select(cfg.topic_name)
        if old is not None and old.memory != cfg.memory:
            return (f"the topic[{cfg.topic_name}] is a {'memory' if old.memory else 'disk'} topic; "
                    "delete it before creating it as a "
                    f"{'memory' if cfg.memory else 'disk'} topic")
        return None

    def delete_topic(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        topic = require_str(request.ext_fields, "topic")
        if topic in NOT_ALLOWED_SEND_TOPICS or topic in (SCHEDULE_TOPIC, OFFSET_MOVED_EVENT):
            return create_response(request, ResponseCode.SYSTEM_ERROR,
                                   f"the topic[{topic}] is a system topic and cannot be deleted")
        self.topics.delete(topic)
        if isinstance(self.queues, TopicStores):
            self.queues.topic_deleted(topic)
        self.stats.on_topic_deleted(topic)
        for group in self.offsets.groups_of_topic(topic):
            self.offsets.remove_group(group, topic)
        return create_response(request)

    def get_all_topic_config(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        return create_response(request, body=self.topics.encode())

    def get_system_topic_list(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        system = sorted(t for t in self.topics.table
                        if t in NOT_ALLOWED_SEND_TOPICS or t in (
                            SCHEDULE_TOPIC, OFFSET_MOVED_EVENT, AUTO_CREATE_TOPIC_KEY_TOPIC, SELF_TEST_TOPIC,
                            BENCHMARK_TOPIC, self.config.broker_cluster_name, self.config.broker_name))
        return create_response(request, body=orjson.dumps({"topicList": system}))

    # ---- broker ----

    def get_broker_config(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """Every setting as properties text, as RocketMQ's Configuration gives it: in-force
        values (brokerIP2 and storePathCommitLog as used), no line for an unset one (Java's
        null)."""
        store_config = self.store.config
        values: dict[str, object] = dict(FIXED_BROKER_PROPERTIES)
        values.update({key: getattr(self.config, name) for name, key in BROKER_PROPERTY_KEYS.items()})
        values.update({key: getattr(store_config, name) for name, key in PROPERTY_KEYS.items()})
        values["brokerIP2"] = self.config.broker_ip2 or self.config.broker_ip1
        values["storePathCommitLog"] = store_config.commit_log_path
        lines = [f"{key}={_property_text(value)}" for key, value in sorted(values.items()) if value is not None]
        version = self.topics.data_version
        return create_response(request, ext_fields={"version": orjson.dumps(version.to_json()).decode()},
                               body=("\n".join(lines) + "\n").encode())

    # ---- offsets ----

    def get_all_consumer_offset(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        table = {key: {str(q): o for q, o in sorted(queues.items())}
                 for key, queues in sorted(self.offsets.table.items())}
        return create_response(request, body=orjson.dumps({"offsetTable": table}))

    def get_all_delay_offset(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        return create_response(request, body=self.schedule.offset_table_json())

    def get_topic_stats_info(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        topic = require_str(request.ext_fields, "topic")
        cfg = self.topics.select(topic)
        if cfg is None:
            return create_response(request, ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        table = {}
        for queue_id in range(cfg.write_queue_nums):
            low = self.queues.get_min_offset_in_queue(topic, queue_id)
            high = self.queues.get_max_offset_in_queue(topic, queue_id)
            last = self.queues.get_message_store_timestamp(topic, queue_id, high - 1) if high > 0 else 0
            table[message_queue_key(topic, self.config.broker_name, queue_id)] = {
                "lastUpdateTimestamp": max(0, last), "maxOffset": high, "minOffset": low}
        return create_response(request, body=fastjson_dumps({"offsetTable": table}))

    def get_consume_stats(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        ext = request.ext_fields
        group = require_str(ext, "consumerGroup")
        only_topic = get_str(ext, "topic")
        topics = [only_topic] if only_topic else sorted(self.offsets.topics_of_group(group))
        table: dict[Any, Any] = {}
        tps = 0.0
        for topic in topics:
            cfg = self.topics.select(topic)
            if cfg is None:
                continue
            info = self.consumers.get(group)
            if only_topic is None and info is not None and info.message_model == MessageModel.BROADCASTING:
                continue
            for queue_id in range(cfg.read_queue_nums):
                broker_offset = self.queues.get_max_offset_in_queue(topic, queue_id)
                consumer_offset = max(0, self.offsets.query(group, topic, queue_id))
                last = 0
                if consumer_offset > 0:
                    last = max(0, self.queues.get_message_store_timestamp(topic, queue_id, consumer_offset - 1))
                table[message_queue_key(topic, self.config.broker_name, queue_id)] = {
                    "brokerOffset": broker_offset, "consumerOffset": consumer_offset,
                    "lastTimestamp": last}
            tps += self.stats.group_get_tps(group, topic)
        return create_response(request, body=fastjson_dumps({"consumeTps": tps, "offsetTable": table}))

    def reset_offset(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """INVOKE_BROKER_TO_RESET_OFFSET: each queue's offset at ``timestamp`` (-1: the end)
        becomes the group's committed offset (when earlier than the committed one, or always
        with isForce); the group's online members are told with RESET_CONSUMER_CLIENT_OFFSET."""
        ext = request.ext_fields
        topic = require_str(ext, "topic")
        group = require_str(ext, "group")
        timestamp = require_int(ext, "timestamp")
        force = bool(get_bool(ext, "isForce", True))
        cfg = self.topics.select(topic)
        if cfg is None:
            return create_response(request, ResponseCode.SYSTEM_ERROR,
                                   f"[reset-offset] request topic[{topic}] does not exist")
        table: dict[Any, int] = {}
        reset: dict[int, int] = {}
        for queue_id in range(cfg.write_queue_nums):
            if timestamp == -1:
                target = self.queues.get_max_offset_in_queue(topic, queue_id)
            else:
                target = self.queues.get_offset_in_queue_by_time(topic, queue_id, timestamp)
            current = self.offsets.query(group, topic, queue_id)
            if current == -1 and not force:
                continue
            if force or target < current:
                reset[queue_id] = target
            else:
                reset[queue_id] = current
            table[message_queue_key(topic, self.config.broker_name, queue_id)] = reset[queue_id]
        for queue_id, offset in reset.items():
            self.offsets.commit(group, topic, queue_id, offset)
        body = fastjson_dumps({"offsetTable": table})
        info = self.consumers.get(group)
        if info is not None:
            notice = create_request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
                                    {"topic": topic, "group": group, "timestamp": str(timestamp)}, body)
            for connection in info.connections():
                try:
                    connection.invoke_oneway(create_request(notice.code, dict(notice.ext_fields), body))
                except Exception as exc:  # noqa: BLE001 - a closing connection
                    log.debug("reset notice to %s failed: %s", connection.remote_address, exc)
        log.info("reset offsets of group %s on topic %s to time %d: %s", quote(group), quote(topic),
                 timestamp, quote(reset, 1000))
        return create_response(request, body=body)

    # ---- subscription groups ----

    def update_and_create_subscription_group(self, ctx: RemotingConnection, request: RemotingCommand
                                             ) -> RemotingCommand:
        try:
            data = orjson.loads(request.body_bytes())
            cfg = SubscriptionGroupConfig.from_json(data)
        except (orjson.JSONDecodeError, ValueError) as exc:
            return create_response(request, ResponseCode.SYSTEM_ERROR,
                                   f"bad subscription group config: {exc}")
        self.groups.update(cfg)
        return create_response(request)

    def get_all_subscription_group_config(self, ctx: RemotingConnection, request: RemotingCommand
                                          ) -> RemotingCommand:
        return create_response(request, body=self.groups.encode())

    def delete_subscription_group(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        group = require_str(request.ext_fields, "groupName")
        self.groups.delete(group)
        self.stats.on_group_deleted(group)
        if get_bool(request.ext_fields, "removeOffset", False):
            self.offsets.remove_group(group)
        return create_response(request)

    # ---- connections ----

    def get_consumer_connection_list(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        group = require_str(request.ext_fields, "consumerGroup")
        info = self.consumers.get(group)
        if info is None or not info.channels:
            return create_response(request, ResponseCode.CONSUMER_NOT_ONLINE,
                                   f"the consumer group[{group}] not online")
        body = {
            "connectionSet": [ch.to_connection_json() for ch in info.channels.values()],
            "consumeFromWhere": info.consume_from_where,
            "consumeType": info.consume_type,
            "messageModel": info.message_model,
            "subscriptionTable": {t: s.to_json() for t, s in info.subscriptions.items()},
        }
        return create_response(request, body=orjson.dumps(body))

    def get_producer_connection_list(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        group = require_str(request.ext_fields, "producerGroup")
        channels = self.producers.groups.get(group)
        if not channels:
            return create_response(request, ResponseCode.SYSTEM_ERROR,
                                   f"the producer group[{group}] not exist")
        return create_response(request, body=orjson.dumps(
            {"connectionSet": [ch.to_connection_json() for ch in channels.values()]}))

    def query_topic_consume_by_who(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        topic = require_str(request.ext_fields, "topic")
        groups = set(self.consumers.groups_of_topic(topic)) | self.offsets.groups_of_topic(topic)
        return create_response(request, body=orjson.dumps({"groupList": sorted(groups)}))

    async def get_consumer_running_info(self, ctx: RemotingConnection, request: RemotingCommand
                                        ) -> RemotingCommand:
        ext = request.ext_fields
        group = require_str(ext, "consumerGroup")
        client_id = require_str(ext, "clientId")
        info = self.consumers.get(group)
        target = None
        if info is not None:
            for channel in info.channels.values():
                if channel.client_id == client_id:
                    target = channel.connection
        if target is None or target.is_closed:
            return create_response(request, ResponseCode.SYSTEM_ERROR,
                                   f"The Consumer <{client_id}> <{group}> not online")
        forward = create_request(RequestCode.GET_CONSUMER_RUNNING_INFO, dict(ext))
        try:
            reply = await target.invoke(forward, 5.0)
        except RemotingTimeoutError:
            return create_response(request, ResponseCode.CONSUME_MSG_TIMEOUT,
                                   f"consumer {client_id} did not answer in time")
        except Exception as exc:  # noqa: BLE001 - the consumer's connection went away
            return create_response(request, ResponseCode.SYSTEM_ERROR, f"asking {client_id} failed: {exc}")
        return create_response(request, reply.code, reply.remark, dict(reply.ext_fields), reply.body_bytes())


def _property_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
