"""Messages as the clients see them: Message, MessageExt, MessageQueue, send and pull results.

RocketMQ's client-side vocabulary (``org.apache.rocketmq.common.message``), in Python. A
:class:`Message` is what a producer sends: a topic, a body, a flag and string properties, with
the well-known properties (tags, keys, delay level) as attributes. A :class:`MessageExt` is what
a consumer receives: the stored record's fields besides. Property text travels as
``name\\x01value`` pairs joined by ``\\x02`` (docs/format.md, 3.4 "Properties").
"""

from __future__ import annotations

import enum
import os
import random
import socket
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from rocketstore.common.properties import (
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    SYSTEM_PROPERTIES,
    MessageConst,
    decode_properties,
    encode_properties,
)
from rocketstore.common.record import MAX_TOPIC_LENGTH, SysFlag
from rocketstore.common.text import is_ascii_int
from rocketstore.common.topics import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    dlq_topic,
    retry_topic,
    validate_topic,
)

__all__ = [
    "AUTO_CREATE_TOPIC_KEY_TOPIC", "DLQ_GROUP_TOPIC_PREFIX", "MAX_TOPIC_LENGTH",
    "NAME_VALUE_SEPARATOR", "PROPERTY_SEPARATOR", "RETRY_GROUP_TOPIC_PREFIX", "SYSTEM_PROPERTIES",
    "Message", "MessageConst", "MessageExt", "MessageQueue", "PullResult", "PullStatus",
    "SendResult", "SendStatus", "SysFlag", "create_offset_msg_id", "decode_offset_msg_id",
    "decode_properties", "dlq_topic", "encode_properties", "format_host", "java_hash_code",
    "new_uniq_key", "retry_topic", "tags_hash_code", "validate_topic",
]

def _check_property_text(what: str, value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be str, got {type(value).__name__}")
    if NAME_VALUE_SEPARATOR in value or PROPERTY_SEPARATOR in value:
        raise ValueError(f"{what} {value!r} contains a separator character (\\x01 or \\x02)")
    return value


class Message:
    """A message a producer sends a broker (``rocketstore.client.Message``, RocketMQ's client
    Message); the embedded store puts ``rocketstore.Message`` instead.

    It has a ``topic``, a ``body`` (bytes), a ``flag`` and string ``properties``.

    ``tags``, ``keys``, ``delay_time_level`` and ``wait_store_msg_ok`` are properties under
    RocketMQ's names (TAGS, KEYS, DELAY, WAIT). ``keys`` are several lookup keys, stored
    space-separated; each is indexed by the broker (``query_message``). Other properties are
    yours: ``put_user_property(name, value)``.
    """

    __slots__ = ("_topic", "_body", "flag", "properties", "transaction_id")

    def __init__(
        self,
        topic: str,
        body: bytes | bytearray | memoryview = b"",
        *,
        tags: str | None = None,
        keys: str | Iterable[str] | None = None,
        flag: int = 0,
        delay_time_level: int = 0,
        wait_store_msg_ok: bool = True,
        properties: Mapping[str, str] | None = None,
    ) -> None:
        self.topic = topic
        self.body = body
        if not isinstance(flag, int):
            raise TypeError(f"flag must be int, got {type(flag).__name__}")
        self.flag = flag
        self.properties: dict[str, str] = {}
        self.transaction_id: str | None = None
        if properties:
            for name, value in properties.items():
                self.put_property(_check_property_text("property name", name),
                                  _check_property_text(f"property {name!r}", value))
        if tags is not None:
            self.tags = tags
        if keys is not None:
            self.keys = [keys] if isinstance(keys, str) else list(keys)
        if delay_time_level:
            self.delay_time_level = delay_time_level
        if not wait_store_msg_ok:
            self.wait_store_msg_ok = False

    # ---- topic and body ----

    @property
    def topic(self) -> str:
        return self._topic

    @topic.setter
    def topic(self, value: str) -> None:
        if not isinstance(value, str):
            raise TypeError(f"topic must be str, got {type(value).__name__}")
        self._topic = value

    @property
    def body(self) -> bytes:
        return self._body

    @body.setter
    def body(self, value: bytes | bytearray | memoryview) -> None:
        if isinstance(value, bytes):
            self._body = value
        elif isinstance(value, (bytearray, memoryview)):
            self._body = bytes(value)
        else:
            raise TypeError(f"body must be bytes, got {type(value).__name__} (encode text first)")

    # ---- properties ----

    def put_property(self, name: str, value: str) -> None:
        self.properties[name] = value

    def get_property(self, name: str) -> str | None:
        return self.properties.get(name)

    def put_user_property(self, name: str, value: str) -> None:
        """Set one of your own properties; RocketMQ's system names are refused."""
        if name in SYSTEM_PROPERTIES:
            raise ValueError(f"property name {name!r} is reserved by RocketMQ")
        _check_property_text("property name", name)
        if not name.strip() or not str(value).strip():
            raise ValueError("a user property's name and value must not be blank")
        self.properties[name] = _check_property_text(f"property {name!r}", value)

    def clear_property(self, name: str) -> None:
        self.properties.pop(name, None)

    @property
    def tags(self) -> str | None:
        return self.properties.get(MessageConst.TAGS)

    @tags.setter
    def tags(self, value: str | None) -> None:
        if value is None:
            self.properties.pop(MessageConst.TAGS, None)
        else:
            self.properties[MessageConst.TAGS] = _check_property_text("tags", value)

    @property
    def keys(self) -> list[str]:
        text = self.properties.get(MessageConst.KEYS)
        return text.split(" ") if text else []

    @keys.setter
    def keys(self, value: Iterable[str]) -> None:
        keys = [value] if isinstance(value, str) else list(value)
        for key in keys:
            _check_property_text("key", key)
            if " " in key:
                raise ValueError(f"key {key!r} contains a space (keys are stored space-separated)")
        if keys:
            self.properties[MessageConst.KEYS] = " ".join(keys)
        else:
            self.properties.pop(MessageConst.KEYS, None)

    @property
    def delay_time_level(self) -> int:
        text = self.properties.get(MessageConst.DELAY_TIME_LEVEL)
        return int(text) if text and is_ascii_int(text) else 0

    @delay_time_level.setter
    def delay_time_level(self, level: int) -> None:
        if not isinstance(level, int) or level < 0:
            raise ValueError(f"delay_time_level must be a non-negative int, got {level!r}")
        if level:
            self.properties[MessageConst.DELAY_TIME_LEVEL] = str(level)
        else:
            self.properties.pop(MessageConst.DELAY_TIME_LEVEL, None)

    @property
    def wait_store_msg_ok(self) -> bool:
        return self.properties.get(MessageConst.WAIT_STORE_MSG_OK) != "false"

    @wait_store_msg_ok.setter
    def wait_store_msg_ok(self, value: bool) -> None:
        self.properties[MessageConst.WAIT_STORE_MSG_OK] = "true" if value else "false"

    @property
    def uniq_key(self) -> str | None:
        """The client-made message id (UNIQ_KEY), set when the message is sent."""
        return self.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(topic={self.topic!r}, flag={self.flag}, "
                f"properties={self.properties!r}, body={len(self.body)} bytes)")


class MessageExt(Message):
    """A stored message as a consumer or a query gets it from a broker
    (``rocketstore.client.MessageExt``); the embedded store reads back ``rocketstore.MessageExt``.

    Beside the message's fields, its record's (queue and CommitLog offsets, timestamps, hosts, ...).

    The hosts and the broker's message id are kept as the record's bytes and formatted when
    read (most consumers never look at them)."""

    __slots__ = ("queue_id", "store_size", "queue_offset", "sys_flag", "born_timestamp",
                 "store_timestamp", "commit_log_offset", "body_crc", "reconsume_times",
                 "prepared_transaction_offset", "broker_name", "_born_host", "_store_host",
                 "_offset_msg_id")

    def __init__(self, topic: str, body: bytes = b"", *, flag: int = 0,
                 properties: dict[str, str] | None = None) -> None:
        self._topic = topic
        self._body = body
        self.flag = flag
        self.properties = properties if properties is not None else {}
        self.transaction_id = None
        self.queue_id = 0
        self.store_size = 0
        self.queue_offset = 0
        self.sys_flag = 0
        self.born_timestamp = 0
        self.store_timestamp = 0
        self.commit_log_offset = 0
        self.body_crc = 0
        self.reconsume_times = 0
        self.prepared_transaction_offset = 0
        self.broker_name: str | None = None
        self._born_host: bytes | str = ""
        self._store_host: bytes | str = ""
        self._offset_msg_id: str | None = None

    @property
    def born_host(self) -> str:
        """``"ip:port"`` of the producer (``"[ip6]:port"`` for IPv6)."""
        host = self._born_host
        return format_host(host) if isinstance(host, bytes) else host

    @born_host.setter
    def born_host(self, value: str) -> None:
        self._born_host = value

    @property
    def store_host(self) -> str:
        """``"ip:port"`` of the broker that stored the message."""
        host = self._store_host
        return format_host(host) if isinstance(host, bytes) else host

    @store_host.setter
    def store_host(self, value: str) -> None:
        self._store_host = value
        self._offset_msg_id = None

    @property
    def offset_msg_id(self) -> str:
        """The broker's message id: store host and CommitLog offset, in hex."""
        if self._offset_msg_id is None:
            host = self._store_host
            if isinstance(host, bytes):
                self._offset_msg_id = (host + self.commit_log_offset.to_bytes(8, "big", signed=True)).hex().upper()
            else:
                self._offset_msg_id = create_offset_msg_id(host, self.commit_log_offset) if host else ""
        return self._offset_msg_id

    @offset_msg_id.setter
    def offset_msg_id(self, value: str) -> None:
        self._offset_msg_id = value

    @property
    def msg_id(self) -> str:
        """The message id: the client's UNIQ_KEY, or the broker's offset id without one."""
        return self.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or self.offset_msg_id

    @property
    def message_queue(self) -> MessageQueue:
        return MessageQueue(self.topic, self.broker_name or "", self.queue_id)

    def __repr__(self) -> str:
        return (f"MessageExt(topic={self.topic!r}, queue_id={self.queue_id}, "
                f"queue_offset={self.queue_offset}, msg_id={self.msg_id!r}, tags={self.tags!r}, "
                f"keys={self.keys!r}, reconsume_times={self.reconsume_times}, "
                f"body={len(self.body)} bytes)")


def format_host(raw: bytes) -> str:
    """A record's host field (IPv4 4 bytes + port int32, or IPv6 16 + 4) as text."""
    port = int.from_bytes(raw[-4:], "big", signed=True)
    if len(raw) == 8:
        return f"{raw[0]}.{raw[1]}.{raw[2]}.{raw[3]}:{port}"
    return f"[{socket.inet_ntop(socket.AF_INET6, raw[:16])}]:{port}"


class MessageQueue(NamedTuple):
    """One queue of a topic on one broker; sorted as RocketMQ sorts them (topic, broker, id)."""

    topic: str
    broker_name: str
    queue_id: int

    def to_json(self) -> dict[str, object]:
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> MessageQueue:
        try:
            return cls(str(data["topic"]), str(data["brokerName"]), int(data["queueId"]))  # type: ignore[call-overload]
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a MessageQueue: {dict(data)!r:.120}") from exc

    def __str__(self) -> str:
        return f"{self.topic}@{self.broker_name}#{self.queue_id}"


class SendStatus(enum.Enum):
    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


@dataclass(slots=True)
class SendResult:
    """What a send got: ``msg_id`` is the client's id (UNIQ_KEY; comma-joined for a batch),
    ``offset_msg_id`` the broker's (store host + CommitLog offset), ``queue_offset`` the
    message's (a batch's first message's) offset in ``message_queue``."""

    send_status: SendStatus
    msg_id: str
    offset_msg_id: str
    message_queue: MessageQueue
    queue_offset: int
    transaction_id: str | None = None
    region_id: str | None = None


class PullStatus(enum.Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


@dataclass(slots=True)
class PullResult:
    pull_status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt] = field(default_factory=list)
    suggest_which_broker_id: int = 0


# ---- message ids ----------------------------------------------------------------------------


class _UniqKeyFactory:
    """RocketMQ's MessageClientIDSetter: ip (4 bytes) + pid (2) + a random int (4), then the ms
    since the start of the month (4) and a counter (2), as 32 upper-case hex characters."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reset()
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        try:
            ip = socket.inet_aton(socket.gethostbyname(socket.gethostname()))
        except OSError:
            ip = b"\x7f\x00\x00\x01"
        self._prefix = (ip + (os.getpid() & 0xFFFF).to_bytes(2, "big")
                        + random.getrandbits(32).to_bytes(4, "big")).hex().upper()
        self._counter = 0
        self._month_start_ms = 0
        self._next_month_ms = 0

    def _set_month(self, now_ms: int) -> None:
        t = time.localtime(now_ms / 1000)
        start = time.mktime((t.tm_year, t.tm_mon, 1, 0, 0, 0, 0, 0, -1))
        nxt = time.mktime((t.tm_year + (t.tm_mon == 12), t.tm_mon % 12 + 1, 1, 0, 0, 0, 0, 0, -1))
        self._month_start_ms = int(start * 1000)
        self._next_month_ms = int(nxt * 1000)

    def new(self) -> str:
        now_ms = int(time.time() * 1000)
        with self._lock:
            if not self._month_start_ms <= now_ms < self._next_month_ms:
                self._set_month(now_ms)
            counter = self._counter
            self._counter = (counter + 1) & 0xFFFF
            since = (now_ms - self._month_start_ms) & 0xFFFFFFFF
        return f"{self._prefix}{since:08X}{counter:04X}"


new_uniq_key = _UniqKeyFactory().new


def create_offset_msg_id(store_host: str, commit_log_offset: int) -> str:
    """The broker's message id: store ip + port (int32) + CommitLog offset (int64), in hex."""
    host, _, port = store_host.rpartition(":")
    try:
        packed = socket.inet_pton(socket.AF_INET6 if ":" in host else socket.AF_INET, host.strip("[]"))
    except OSError as exc:
        raise ValueError(f"store host must be an ip:port, got {store_host!r}") from exc
    return (packed + int(port).to_bytes(4, "big") + commit_log_offset.to_bytes(8, "big", signed=True)).hex().upper()


def decode_offset_msg_id(msg_id: str) -> tuple[str, int]:
    """``(store "ip:port", CommitLog offset)`` of an offset message id; ValueError otherwise."""
    text = msg_id.strip()
    if len(text) not in (32, 56):
        raise ValueError(f"{msg_id!r} is not an offset message id (32 or 56 hex characters)")
    try:
        raw = bytes.fromhex(text)
    except ValueError:
        raise ValueError(f"{msg_id!r} is not an offset message id (not hex)") from None
    ip_len = 4 if len(raw) == 16 else 16
    ip = socket.inet_ntop(socket.AF_INET if ip_len == 4 else socket.AF_INET6, raw[:ip_len])
    port = int.from_bytes(raw[ip_len:ip_len + 4], "big")
    offset = int.from_bytes(raw[ip_len + 4:], "big", signed=True)
    host = ip if ip_len == 4 else f"[{ip}]"
    return f"{host}:{port}", offset


def java_hash_code(value: object) -> int:
    """Java's ``hashCode`` of a String, Integer or Long (as int32), so that an ordering key
    picks the same queue as RocketMQ's Java SelectMessageQueueByHash would."""
    if isinstance(value, bool):
        return 1231 if value else 1237
    if isinstance(value, int):
        if -(2**31) <= value < 2**31:
            return value
        v = value & 0xFFFFFFFFFFFFFFFF
        h = (v ^ (v >> 32)) & 0xFFFFFFFF
        return h - (1 << 32) if h & 0x80000000 else h
    if isinstance(value, (bytes, bytearray)):
        value = bytes(value).decode("utf-8", "surrogateescape")
    if not isinstance(value, str):
        value = str(value)
    h = 0
    for unit in _utf16_units(value):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def _utf16_units(text: str) -> Iterable[int]:
    if text.isascii():
        return text.encode("ascii")
    data = text.encode("utf-16-be", "surrogatepass")
    return (int.from_bytes(data[i:i + 2], "big") for i in range(0, len(data), 2))


def tags_hash_code(tags: str | None) -> int:
    """The tags code the broker stores and filters on: ``String.hashCode`` of the tag."""
    return java_hash_code(tags) if tags else 0
