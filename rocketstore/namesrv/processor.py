"""The name server's request processors (RocketMQ's DefaultRequestProcessor).

Plain functions over the RouteInfoManager: every one answers at once, so none needs a task.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import orjson

from rocketstore.namesrv.route_info import RouteInfoManager
from rocketstore.remoting import (
    RemotingCommand,
    RemotingConnection,
    RemotingServer,
    RequestCode,
    ResponseCode,
    create_response,
    decode_header,
)
from rocketstore.remoting.route_bodies import (
    BodyError,
    DataVersion,
    body_crc32,
    decode_data_version,
    decode_register_broker_body,
    encode_route_json,
)

log = logging.getLogger(__name__)


@dataclass
class RegisterBrokerRequestHeader:
    broker_name: str
    broker_addr: str
    cluster_name: str
    ha_server_addr: str
    broker_id: int
    compressed: bool | None = False
    body_crc32: int | None = 0


@dataclass
class UnRegisterBrokerRequestHeader:
    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: int


@dataclass
class QueryDataVersionRequestHeader:
    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: int


@dataclass
class GetRouteInfoRequestHeader:
    topic: str
    accept_standard_json_only: bool | None = None


@dataclass
class DeleteTopicFromNamesrvRequestHeader:
    topic: str
    cluster_name: str | None = None


@dataclass
class GetTopicsByClusterRequestHeader:
    cluster: str


@dataclass
class BrokerNameRequestHeader:
    broker_name: str


class NamesrvProcessor:
    """Answers the name server's requests from one RouteInfoManager."""

    def __init__(self, route_info: RouteInfoManager,
                 order_topic_conf: Callable[[str], str | None] | None = None) -> None:
        self.route_info = route_info
        #: a topic's orderTopicConf for its route (the KV config's ORDER_TOPIC_CONFIG)
        self.order_topic_conf = order_topic_conf

    def register_with(self, server: RemotingServer) -> None:
        handlers = {
            RequestCode.REGISTER_BROKER: self.register_broker,
            RequestCode.UNREGISTER_BROKER: self.unregister_broker,
            RequestCode.QUERY_DATA_VERSION: self.query_data_version,
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self.get_route_info_by_topic,
            RequestCode.GET_BROKER_CLUSTER_INFO: self.get_broker_cluster_info,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.get_all_topic_list,
            RequestCode.GET_TOPICS_BY_CLUSTER: self.get_topics_by_cluster,
            RequestCode.DELETE_TOPIC_IN_NAMESRV: self.delete_topic,
            RequestCode.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm_of_broker,
            RequestCode.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm_of_broker,
        }
        for code, handler in handlers.items():
            server.register_processor(code, handler)
        server.add_connection_listener(on_close=self.route_info.on_connection_closed)

    def register_broker(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        header = decode_header(request.ext_fields, RegisterBrokerRequestHeader)
        body = request.body_bytes()
        if header.body_crc32 and body_crc32(body) != header.body_crc32:
            log.warning("REGISTER_BROKER from %s: crc32 not match", ctx.remote_address)
            return create_response(request, ResponseCode.SYSTEM_ERROR, "crc32 not match")
        if header.compressed:
            # RocketMQ's compressed form (brokerConfig.compressedRegister, off by default) is
            # not implemented yet: say so rather than guess.
            return create_response(request, ResponseCode.SYSTEM_ERROR, "compressed RegisterBrokerBody is not supported")
        if body:
            try:
                register_body = decode_register_broker_body(body)
            except BodyError as exc:
                return create_response(request, ResponseCode.SYSTEM_ERROR, f"Failed to decode RegisterBrokerBody: {exc}")
            topics, version, filters = (
                register_body.topic_config_table,
                register_body.data_version,
                register_body.filter_server_list,
            )
        else:
            topics, version, filters = {}, DataVersion(), []
        result = self.route_info.register_broker(
            header.cluster_name,
            header.broker_addr,
            header.broker_name,
            header.broker_id,
            header.ha_server_addr,
            topics,
            version,
            filters,
            ctx,
        )
        ext: dict[str, str] = {}
        if result.ha_server_addr is not None:
            ext["haServerAddr"] = result.ha_server_addr
        if result.master_addr is not None:
            ext["masterAddr"] = result.master_addr
        return create_response(request, ext_fields=ext)

    def query_data_version(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """A broker with forceRegister=false asks whether its topics changed since it last
        registered; an unchanged one counts as a heartbeat."""
        header = decode_header(request.ext_fields, QueryDataVersionRequestHeader)
        try:
            data_version = decode_data_version(request.body_bytes())
        except BodyError as exc:
            return create_response(request, ResponseCode.SYSTEM_ERROR, f"Failed to decode DataVersion: {exc}")
        live = self.route_info.broker_live_table.get(header.broker_addr)
        changed = live is None or live.data_version != data_version
        if not changed and live is not None:
            live.last_update_timestamp = self.route_info.clock()
        body = orjson.dumps(live.data_version.to_json()) if live is not None else None
        return create_response(request, ext_fields={"changed": "true" if changed else "false"}, body=body)

    def unregister_broker(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        header = decode_header(request.ext_fields, UnRegisterBrokerRequestHeader)
        self.route_info.unregister_broker(header.cluster_name, header.broker_addr, header.broker_name, header.broker_id)
        return create_response(request)

    def get_route_info_by_topic(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        header = decode_header(request.ext_fields, GetRouteInfoRequestHeader)
        route = self.route_info.pickup_topic_route_data(header.topic)
        if route is None:
            return create_response(
                request,
                ResponseCode.TOPIC_NOT_EXIST,
                f"No topic route info in name server for the topic: {header.topic}",
            )
        conf = None if self.order_topic_conf is None else self.order_topic_conf(header.topic)
        if conf is not None:
            route = {**route, "orderTopicConf": conf}
        return create_response(request, body=encode_route_json(route))

    def get_broker_cluster_info(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        return create_response(request, body=encode_route_json(self.route_info.get_all_cluster_info()))

    def get_all_topic_list(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        return create_response(request, body=orjson.dumps({"topicList": self.route_info.get_all_topic_list()}))

    def get_topics_by_cluster(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        header = decode_header(request.ext_fields, GetTopicsByClusterRequestHeader)
        topics = self.route_info.get_topics_by_cluster(header.cluster)
        return create_response(request, body=orjson.dumps({"topicList": topics}))

    def delete_topic(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        header = decode_header(request.ext_fields, DeleteTopicFromNamesrvRequestHeader)
        self.route_info.delete_topic(header.topic, header.cluster_name or None)
        return create_response(request)

    def wipe_write_perm_of_broker(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        header = decode_header(request.ext_fields, BrokerNameRequestHeader)
        count = self.route_info.wipe_write_perm_of_broker(header.broker_name)
        return create_response(request, ext_fields={"wipeTopicCount": str(count)})

    def add_write_perm_of_broker(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        header = decode_header(request.ext_fields, BrokerNameRequestHeader)
        count = self.route_info.add_write_perm_of_broker(header.broker_name)
        return create_response(request, ext_fields={"addTopicCount": str(count)})
