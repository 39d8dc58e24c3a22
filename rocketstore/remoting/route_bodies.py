"""Route bodies of the protocol: RegisterBrokerBody, TopicRouteData, ClusterInfo, TopicList.

JSON as RocketMQ 4.9 writes it (fastjson: fields in alphabetical order, nulls left out). The
route's ``brokerAddrs`` maps broker ids to addresses; we write the ids as quoted strings
(``{"0": "127.0.0.1:10911"}``, what RocketMQ writes from 4.9.4 on), and read both that and
older fastjson's unquoted ``{0: "..."}``. Here, below them all, because the name server, the
broker's registrar and the clients share them, and none of them may import another.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from rocketstore.common.fastjson import loads_fastjson
from rocketstore.common.perm import PERM_READ, PERM_WRITE
from rocketstore.common.text import quote

#: TopicConfig's defaults (RocketMQ's TopicConfig class).
DEFAULT_READ_QUEUE_NUMS = 16
DEFAULT_WRITE_QUEUE_NUMS = 16
DEFAULT_PERM = PERM_READ | PERM_WRITE
MASTER_ID = 0

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


class BodyError(ValueError):
    """A body that does not decode; the message names the field."""


def topic_config(
    topic_name: str,
    read_queue_nums: int = DEFAULT_READ_QUEUE_NUMS,
    write_queue_nums: int = DEFAULT_WRITE_QUEUE_NUMS,
    perm: int = DEFAULT_PERM,
    topic_filter_type: str = "SINGLE_TAG",
    topic_sys_flag: int = 0,
    order: bool = False,
) -> dict[str, Any]:
    """One TopicConfig as RocketMQ serializes it (topics.json and RegisterBrokerBody)."""
    return {
        "order": order,
        "perm": perm,
        "readQueueNums": read_queue_nums,
        "topicFilterType": topic_filter_type,
        "topicName": topic_name,
        "topicSysFlag": topic_sys_flag,
        "writeQueueNums": write_queue_nums,
    }


@dataclass(frozen=True)
class DataVersion:
    """When a broker's topic config last changed; equal versions mean nothing changed."""

    timestamp: int = 0
    counter: int = 0

    def to_json(self) -> dict[str, int]:
        return {"counter": self.counter, "timestamp": self.timestamp}

    @classmethod
    def from_json(cls, version: dict[str, Any]) -> DataVersion:
        """RocketMQ's dataVersion object; its counter may be an AtomicLong's {"value": n}.
        BodyError names the field that is not an integer."""
        counter = version.get("counter", 0)
        if type(counter) is dict:
            counter = counter.get("value", 0)
        return cls(timestamp=_int(version.get("timestamp", 0) or 0, "dataVersion.timestamp"),
                   counter=_int(counter or 0, "dataVersion.counter"))


@dataclass(frozen=True)
class QueueData:
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int

    def to_json(self) -> dict[str, Any]:
        return {
            "brokerName": self.broker_name,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }


@dataclass
class RegisterBrokerBody:
    """What a broker sends with REGISTER_BROKER: its topics, their data version, filter servers."""

    topic_config_table: dict[str, dict[str, Any]] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)
    filter_server_list: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class RegisterBrokerResult:
    """The name server's answer to a slave: where its master and the master's HA port are."""

    ha_server_addr: str | None = None
    master_addr: str | None = None


def _int(value: Any, where: str) -> int:
    if type(value) is int and _INT32_MIN <= value <= 2**63 - 1:
        return value
    if isinstance(value, str) and re.fullmatch(r"[+-]?[0-9]{1,19}", value):
        return int(value)
    raise BodyError(f"{where} must be an integer, got {value!r:.60}")


def _check_topic_config(name: Any, config: Any) -> dict[str, Any]:
    if not isinstance(name, str) or not name:
        raise BodyError(f"topicConfigTable key must be a topic name, got {name!r:.60}")
    if type(config) is not dict:
        raise BodyError(f"topicConfigTable[{quote(name)}] must be an object")
    where = f"topicConfigTable[{quote(name)}]"
    checked = dict(config)
    checked["topicName"] = config.get("topicName") or name
    for key, default in (
        ("readQueueNums", DEFAULT_READ_QUEUE_NUMS),
        ("writeQueueNums", DEFAULT_WRITE_QUEUE_NUMS),
        ("perm", DEFAULT_PERM),
        ("topicSysFlag", 0),
    ):
        value = config.get(key, default)
        checked[key] = _int(value if value is not None else default, f"{where}.{key}")
    return checked


def encode_register_broker_body(
    topic_config_table: Mapping[str, Mapping[str, Any]],
    data_version: DataVersion,
    filter_server_list: Sequence[str] = (),
) -> bytes:
    """RegisterBrokerBody as JSON (``compressed=false``, RocketMQ's default)."""
    return orjson.dumps(
        {
            "filterServerList": list(filter_server_list),
            "topicConfigSerializeWrapper": {
                "dataVersion": data_version.to_json(),
                "topicConfigTable": dict(topic_config_table),
            },
        }
    )


def decode_register_broker_body(body: bytes) -> RegisterBrokerBody:
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BodyError(f"RegisterBrokerBody is not valid JSON: {exc}") from None
    if type(data) is not dict:
        raise BodyError("RegisterBrokerBody must be a JSON object")
    wrapper = data.get("topicConfigSerializeWrapper") or {}
    if type(wrapper) is not dict:
        raise BodyError("topicConfigSerializeWrapper must be an object")
    table = wrapper.get("topicConfigTable") or {}
    if type(table) is not dict:
        raise BodyError("topicConfigSerializeWrapper.topicConfigTable must be an object")
    version = wrapper.get("dataVersion") or {}
    if type(version) is not dict:
        raise BodyError("topicConfigSerializeWrapper.dataVersion must be an object")
    data_version = DataVersion.from_json(version)
    filters = data.get("filterServerList") or []
    if type(filters) is not list or not all(isinstance(item, str) for item in filters):
        raise BodyError("filterServerList must be a list of addresses")
    return RegisterBrokerBody(
        topic_config_table={name: _check_topic_config(name, config) for name, config in table.items()},
        data_version=data_version,
        filter_server_list=filters,
    )


def decode_data_version(body: bytes) -> DataVersion:
    """A DataVersion body (QUERY_DATA_VERSION); an empty body is version 0/0."""
    if not body:
        return DataVersion()
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BodyError(f"DataVersion is not valid JSON: {exc}") from None
    if type(data) is not dict:
        raise BodyError("DataVersion must be a JSON object")
    return DataVersion.from_json(data)


def body_crc32(body: bytes) -> int:
    """RocketMQ's UtilAll.crc32: CRC-32 with the sign bit cleared."""
    return zlib.crc32(body) & 0x7FFFFFFF


# ---- routes ---------------------------------------------------------------------------------


def encode_route_json(data: Mapping[str, Any]) -> bytes:
    """Route, cluster-info and topic-list bodies: sorted keys as fastjson's MapSortField
    writes them, integer broker ids as quoted strings."""
    return orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SORT_KEYS)


@dataclass(frozen=True)
class BrokerData:
    cluster: str
    broker_name: str
    broker_addrs: dict[int, str]

    def master_addr(self) -> str | None:
        return self.broker_addrs.get(MASTER_ID)


@dataclass(frozen=True)
class TopicRouteData:
    queue_datas: list[QueueData]
    broker_datas: list[BrokerData]
    filter_server_table: dict[str, list[str]]
    order_topic_conf: str | None = None


def decode_topic_route_data(body: bytes) -> TopicRouteData:
    """A GET_ROUTEINFO_BY_TOPIC body, from our name server or RocketMQ's (any 4.x)."""
    try:
        data = loads_fastjson(body)
    except orjson.JSONDecodeError as exc:
        raise BodyError(f"route body is not valid JSON: {exc}") from None
    if type(data) is not dict:
        raise BodyError("route body must be a JSON object")
    try:
        queue_datas = [
            QueueData(
                broker_name=str(q["brokerName"]),
                read_queue_nums=_int(q.get("readQueueNums", 0), "queueDatas.readQueueNums"),
                write_queue_nums=_int(q.get("writeQueueNums", 0), "queueDatas.writeQueueNums"),
                perm=_int(q.get("perm", 0), "queueDatas.perm"),
                topic_sys_flag=_int(q.get("topicSysFlag", 0), "queueDatas.topicSysFlag"),
            )
            for q in data.get("queueDatas") or []
        ]
        broker_datas = [
            BrokerData(
                cluster=str(b.get("cluster", "")),
                broker_name=str(b["brokerName"]),
                broker_addrs={_int(k, "brokerAddrs key"): str(v) for k, v in (b.get("brokerAddrs") or {}).items()},
            )
            for b in data.get("brokerDatas") or []
        ]
    except (KeyError, TypeError, AttributeError) as exc:
        raise BodyError(f"route body is malformed: {quote(exc)}") from None
    filters = data.get("filterServerTable") or {}
    return TopicRouteData(
        queue_datas=queue_datas,
        broker_datas=broker_datas,
        filter_server_table={str(k): list(v) for k, v in filters.items()} if type(filters) is dict else {},
        order_topic_conf=data.get("orderTopicConf"),
    )
