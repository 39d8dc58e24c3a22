"""The requests clients send, one coroutine each (RocketMQ's MQClientAPIImpl).

:class:`ClientAPI` turns arguments into remoting commands, sends them with a
:class:`~rocketstore.remoting.RemotingClient`, and turns replies into results: an error code
raises :class:`~rocketstore.client.errors.MQBrokerError`, a network failure raises the remoting
layer's ``RemotingError``. Name-server requests go to one name server and move on to the next
when it does not answer, so a client keeps working while any name server is up.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import orjson

from rocketstore.client.errors import MQBrokerError, MQClientError
from rocketstore.client.message import MessageConst, MessageQueue, PullResult, PullStatus
from rocketstore.client.records import decode_messages
from rocketstore.client.subscription import SubscriptionData
from rocketstore.common.fastjson import loads_fastjson
from rocketstore.remoting import (
    RemotingClient,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    create_request,
)
from rocketstore.remoting.errors import RemotingConnectError, RemotingError, RemotingTimeoutError
from rocketstore.remoting.route_bodies import (
    BodyError,
    TopicRouteData,
    decode_topic_route_data,
)

log = logging.getLogger(__name__)

#: Send answers that mean "stored" (plain ints: an IntEnum member hashes slowly).
_SEND_STORED_CODES = frozenset(int(code) for code in (
    ResponseCode.SUCCESS, ResponseCode.FLUSH_DISK_TIMEOUT, ResponseCode.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE))
_PULL_STATUS = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


def _int_field(response: RemotingCommand, name: str, default: int | None = None) -> int:
    value = response.ext_fields.get(name)
    if value is None:
        if default is None:
            raise MQClientError(f"reply to request code has no {name!r} field: {response!r:.200}")
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        raise MQClientError(f"reply field {name!r} is not an integer: {value!r:.60}") from None


def _json_body(response: RemotingCommand, what: str) -> Any:
    body = response.body_bytes()
    if not body:
        return {}
    try:
        return loads_fastjson(body)
    except orjson.JSONDecodeError as exc:
        raise MQClientError(f"{what} reply body is not JSON: {exc}") from None


class SendReply(NamedTuple):
    code: int
    msg_id: str
    queue_id: int
    queue_offset: int
    transaction_id: str | None
    region_id: str | None


class ClientAPI:
    """Requests to name servers and brokers over one RemotingClient. Timeouts in seconds."""

    def __init__(self, remoting: RemotingClient, namesrv_addresses: Sequence[str]) -> None:
        self.remoting = remoting
        self._namesrv = list(namesrv_addresses)
        self._namesrv_index = random.randrange(len(self._namesrv)) if self._namesrv else 0

    # ---- name servers ----

    @property
    def namesrv_addresses(self) -> list[str]:
        return list(self._namesrv)

    @property
    def namesrv_in_use(self) -> str | None:
        """The name server requests go to first (the next one is tried when it fails)."""
        return self._namesrv[self._namesrv_index % len(self._namesrv)] if self._namesrv else None

    async def invoke_namesrv(self, request: RemotingCommand, timeout: float) -> RemotingCommand:
        """Send to the name server in use; when it cannot be reached, try the others in turn."""
        if not self._namesrv:
            raise MQClientError("no name server address: set namesrv_addr (or NAMESRV_ADDR)")
        last: Exception | None = None
        for _ in range(len(self._namesrv)):
            address = self._namesrv[self._namesrv_index % len(self._namesrv)]
            try:
                return await self.remoting.invoke(address, _copy(request), timeout)
            except (RemotingConnectError, RemotingTimeoutError, RemotingError) as exc:
                last = exc
                log.info("name server %s failed (%s); trying the next one", address, exc)
                self.remoting.close_connection(address)
                self._namesrv_index += 1
        raise MQClientError(f"no name server answered ({', '.join(self._namesrv)}): {last}") from last

    async def get_topic_route(self, topic: str, timeout: float) -> TopicRouteData | None:
        """The topic's route, or None when the name servers do not know the topic."""
        request = create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        response = await self.invoke_namesrv(request, timeout)
        if response.code == ResponseCode.TOPIC_NOT_EXIST:
            return None
        if response.code != ResponseCode.SUCCESS:
            raise MQBrokerError(response.code, response.remark, "name server")
        try:
            return decode_topic_route_data(response.body_bytes())
        except BodyError as exc:
            raise MQClientError(f"route of {topic!r}: {exc}") from None

    async def get_broker_cluster_info(self, timeout: float) -> dict[str, Any]:
        response = await self.invoke_namesrv(create_request(RequestCode.GET_BROKER_CLUSTER_INFO), timeout)
        _check(response, "name server")
        return _json_body(response, "GET_BROKER_CLUSTER_INFO")  # type: ignore[no-any-return]

    async def get_topic_list(self, timeout: float) -> list[str]:
        response = await self.invoke_namesrv(
            create_request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER), timeout)
        _check(response, "name server")
        return list(_json_body(response, "GET_ALL_TOPIC_LIST_FROM_NAMESERVER").get("topicList") or [])

    # ---- sending ----

    async def send_message(self, address: str, header_v2: dict[str, str], body: bytes, *,
                           batch: bool, timeout: float, oneway: bool = False) -> SendReply | None:
        """SEND_MESSAGE_V2 (SEND_BATCH_MESSAGE for a batch); ``header_v2`` has the one-letter
        names (``a`` producerGroup ... ``m`` batch:
        :data:`rocketstore.common.send_header.SEND_HEADER_FIELDS`)."""
        code = RequestCode.SEND_BATCH_MESSAGE if batch else RequestCode.SEND_MESSAGE_V2
        request = create_request(code, header_v2, body, oneway=oneway)
        if oneway:
            await self.remoting.invoke_oneway(address, request, timeout)
            return None
        response = await self.remoting.invoke(address, request, timeout)
        if response.code not in _SEND_STORED_CODES:
            raise MQBrokerError(response.code, response.remark, address)
        ext = response.ext_fields
        return SendReply(
            code=response.code,
            msg_id=ext.get("msgId", ""),
            queue_id=_int_field(response, "queueId", -1),
            queue_offset=_int_field(response, "queueOffset", -1),
            transaction_id=ext.get("transactionId"),
            region_id=ext.get(MessageConst.MSG_REGION),
        )

    # ---- pulling ----

    async def pull_message(self, address: str, group: str, mq: MessageQueue, offset: int,
                           max_nums: int, sys_flag: int, commit_offset: int,
                           suspend_timeout_millis: int, subscription: SubscriptionData | None,
                           timeout: float, broker_name: str | None = None) -> PullResult:
        result, body = await self.pull_message_raw(
            address, group, mq, offset, max_nums, sys_flag, commit_offset,
            suspend_timeout_millis, subscription, timeout)
        if result.pull_status is PullStatus.FOUND:
            result.messages = decode_messages(body, broker_name=broker_name or mq.broker_name)
        return result

    async def pull_message_raw(self, address: str, group: str, mq: MessageQueue, offset: int,
                               max_nums: int, sys_flag: int, commit_offset: int,
                               suspend_timeout_millis: int, subscription: SubscriptionData | None,
                               timeout: float) -> tuple[PullResult, bytes | bytearray | memoryview]:
        """PULL_MESSAGE: the result without messages, and the reply's body undecoded (the
        CommitLog records back to back; empty unless FOUND), for readers that decode records
        themselves."""
        ext = {
            "consumerGroup": group,
            "topic": mq.topic,
            "queueId": str(mq.queue_id),
            "queueOffset": str(offset),
            "maxMsgNums": str(max_nums),
            "sysFlag": str(sys_flag),
            "commitOffset": str(commit_offset),
            "suspendTimeoutMillis": str(suspend_timeout_millis),
        }
        if subscription is not None:
            ext["subscription"] = subscription.sub_string
            ext["subVersion"] = str(subscription.sub_version)
            ext["expressionType"] = subscription.expression_type
        response = await self.remoting.invoke(address, create_request(RequestCode.PULL_MESSAGE, ext), timeout)
        status = _PULL_STATUS.get(response.code)  # type: ignore[call-overload]
        if status is None:
            raise MQBrokerError(response.code, response.remark, address)
        result = PullResult(
            pull_status=status,
            next_begin_offset=_int_field(response, "nextBeginOffset"),
            min_offset=_int_field(response, "minOffset", 0),
            max_offset=_int_field(response, "maxOffset", 0),
            suggest_which_broker_id=_int_field(response, "suggestWhichBrokerId", 0),
        )
        return result, (_body(response) if status is PullStatus.FOUND else b"")

    # ---- offsets ----

    async def query_consumer_offset(self, address: str, group: str, mq: MessageQueue, timeout: float) -> int | None:
        """The group's committed offset, or None when the broker has none (QUERY_NOT_FOUND)."""
        request = create_request(RequestCode.QUERY_CONSUMER_OFFSET, {
            "consumerGroup": group, "topic": mq.topic, "queueId": str(mq.queue_id)})
        response = await self.remoting.invoke(address, request, timeout)
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return None
        _check(response, address)
        return _int_field(response, "offset")

    async def update_consumer_offset(self, address: str, group: str, mq: MessageQueue, offset: int,
                                     timeout: float, oneway: bool = False) -> None:
        request = create_request(RequestCode.UPDATE_CONSUMER_OFFSET, {
            "consumerGroup": group, "topic": mq.topic, "queueId": str(mq.queue_id),
            "commitOffset": str(offset)}, oneway=oneway)
        if oneway:
            await self.remoting.invoke_oneway(address, request, timeout)
            return
        _check(await self.remoting.invoke(address, request, timeout), address)

    async def _queue_number(self, code: int, field_name: str, address: str, mq: MessageQueue,
                            timeout: float, **extra: str) -> int:
        request = create_request(code, {"topic": mq.topic, "queueId": str(mq.queue_id), **extra})
        response = await self.remoting.invoke(address, request, timeout)
        _check(response, address)
        return _int_field(response, field_name)

    async def get_max_offset(self, address: str, mq: MessageQueue, timeout: float) -> int:
        return await self._queue_number(RequestCode.GET_MAX_OFFSET, "offset", address, mq, timeout)

    async def get_min_offset(self, address: str, mq: MessageQueue, timeout: float) -> int:
        return await self._queue_number(RequestCode.GET_MIN_OFFSET, "offset", address, mq, timeout)

    async def search_offset(self, address: str, mq: MessageQueue, timestamp_ms: int, timeout: float) -> int:
        return await self._queue_number(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, "offset", address, mq,
                                        timeout, timestamp=str(timestamp_ms))

    # ---- group membership ----

    async def send_heartbeat(self, address: str, heartbeat: dict[str, Any], timeout: float) -> None:
        request = create_request(RequestCode.HEART_BEAT, body=orjson.dumps(heartbeat))
        _check(await self.remoting.invoke(address, request, timeout), address)

    async def unregister_client(self, address: str, client_id: str, producer_group: str | None,
                                consumer_group: str | None, timeout: float) -> None:
        ext = {"clientID": client_id}
        if producer_group:
            ext["producerGroup"] = producer_group
        if consumer_group:
            ext["consumerGroup"] = consumer_group
        _check(await self.remoting.invoke(address, create_request(RequestCode.UNREGISTER_CLIENT, ext),
                                          timeout), address)

    async def get_consumer_id_list(self, address: str, group: str, timeout: float) -> list[str]:
        request = create_request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group})
        response = await self.remoting.invoke(address, request, timeout)
        _check(response, address)
        ids = _json_body(response, "GET_CONSUMER_LIST_BY_GROUP").get("consumerIdList") or []
        return [str(cid) for cid in ids]

    async def consumer_send_message_back(self, address: str, commit_log_offset: int, group: str,
                                         delay_level: int, origin_msg_id: str, origin_topic: str,
                                         max_reconsume_times: int, timeout: float) -> None:
        request = create_request(RequestCode.CONSUMER_SEND_MSG_BACK, {
            "offset": str(commit_log_offset),
            "group": group,
            "delayLevel": str(delay_level),
            "originMsgId": origin_msg_id,
            "originTopic": origin_topic,
            "unitMode": "false",
            "maxReconsumeTimes": str(max_reconsume_times),
        })
        _check(await self.remoting.invoke(address, request, timeout), address)

    async def lock_batch_mq(self, address: str, group: str, client_id: str,
                            mqs: Iterable[MessageQueue], timeout: float) -> set[MessageQueue]:
        body = orjson.dumps({"consumerGroup": group, "clientId": client_id,
                             "mqSet": [mq.to_json() for mq in mqs]})
        response = await self.remoting.invoke(address, create_request(RequestCode.LOCK_BATCH_MQ, body=body), timeout)
        _check(response, address)
        locked = _json_body(response, "LOCK_BATCH_MQ").get("lockOKMQSet") or []
        return {MessageQueue.from_json(item) for item in locked}

    async def check_client_config(self, address: str, group: str, client_id: str,
                                  subscription: SubscriptionData, timeout: float) -> None:
        """CHECK_CLIENT_CONFIG 46: whether the broker serves the subscription (MQBrokerError
        with its reason when not)."""
        body = orjson.dumps({"clientId": client_id, "group": group,
                             "subscriptionData": subscription.to_json()})
        request = create_request(RequestCode.CHECK_CLIENT_CONFIG, body=body)
        _check(await self.remoting.invoke(address, request, timeout), address)

    async def unlock_batch_mq(self, address: str, group: str, client_id: str,
                              mqs: Iterable[MessageQueue], timeout: float, oneway: bool = False) -> None:
        body = orjson.dumps({"consumerGroup": group, "clientId": client_id,
                             "mqSet": [mq.to_json() for mq in mqs]})
        request = create_request(RequestCode.UNLOCK_BATCH_MQ, body=body, oneway=oneway)
        if oneway:
            await self.remoting.invoke_oneway(address, request, timeout)
            return
        _check(await self.remoting.invoke(address, request, timeout), address)

    # ---- queries ----

    async def query_message(self, address: str, topic: str, key: str, max_num: int,
                            begin_timestamp: int, end_timestamp: int, timeout: float,
                            unique_key: bool = False, broker_name: str | None = None) -> list[Any]:
        ext = {"topic": topic, "key": key, "maxNum": str(max_num),
               "beginTimestamp": str(begin_timestamp), "endTimestamp": str(end_timestamp)}
        if unique_key:
            ext["_UNIQUE_KEY_QUERY"] = "true"
        response = await self.remoting.invoke(address, create_request(RequestCode.QUERY_MESSAGE, ext), timeout)
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return []
        _check(response, address)
        return decode_messages(_body(response), broker_name=broker_name)

    async def view_message(self, address: str, commit_log_offset: int, timeout: float,
                           broker_name: str | None = None) -> Any:
        request = create_request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(commit_log_offset)})
        response = await self.remoting.invoke(address, request, timeout)
        _check(response, address)
        messages = decode_messages(_body(response), broker_name=broker_name)
        if not messages:
            raise MQClientError(f"{address} returned no message at CommitLog offset {commit_log_offset}")
        return messages[0]

    async def invoke_broker(self, address: str, code: int, ext: dict[str, str] | None = None,
                            body: bytes | None = None, timeout: float = 3.0) -> RemotingCommand:
        """Any request; an error code raises MQBrokerError."""
        response = await self.remoting.invoke(address, create_request(code, ext or {}, body), timeout)
        _check(response, address)
        return response


def _body(response: RemotingCommand) -> bytes | bytearray | memoryview:
    """A received body, as one buffer (received frames carry one; joined otherwise)."""
    body = response.body
    if body is None:
        return b""
    if isinstance(body, (bytes, bytearray, memoryview)):
        return body
    return response.body_bytes()


def _check(response: RemotingCommand, address: str) -> None:
    if response.code != ResponseCode.SUCCESS:
        raise MQBrokerError(response.code, response.remark, address)


def _copy(request: RemotingCommand) -> RemotingCommand:
    """A fresh command for another attempt (a connection stamps its own opaque on a request)."""
    return create_request(request.code, dict(request.ext_fields), request.body,
                          remark=request.remark, serialize_type=request.serialize_type,
                          oneway=request.is_oneway)

