"""Client settings: RocketMQ 4.9's ClientConfig, DefaultMQProducer, DefaultMQPushConsumer and
DefaultLitePullConsumer fields in snake_case, with their defaults.

Times are in milliseconds, as RocketMQ has them (``send_msg_timeout=3000``). Every config checks
its values when made: a wrong type raises ``TypeError`` and a bad value ``ValueError``, naming
the field. ``from_properties`` reads a Java ``.properties`` file with the camelCase keys.
"""

from __future__ import annotations

import dataclasses
import os
import re
import socket
import time
from dataclasses import dataclass, field
from typing import IO, Any, TypeVar

from rocketstore.common.compression import compression_flags
from rocketstore.common.consume import (
    ConsumeFromWhere,
    ConsumeFromWhereName,
    MessageModel,
    MessageModelName,
)
from rocketstore.common.java_properties import (
    camel_case,
    convert_value,
    parse_properties,
    read_properties_text,
)
from rocketstore.common.text import is_ascii_int
from rocketstore.common.topics import AUTO_CREATE_TOPIC_KEY_TOPIC, TOPIC_NAME_RE
from rocketstore.remoting.acl import SessionCredentials

C = TypeVar("C", bound="ClientConfig")

DEFAULT_PRODUCER_GROUP = "DEFAULT_PRODUCER"
DEFAULT_CONSUMER_GROUP = "DEFAULT_CONSUMER"
CLIENT_INNER_PRODUCER_GROUP = "CLIENT_INNER_PRODUCER"
TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"
#: the environment variables the command line's --access-key and --secret-key default to
ACCESS_KEY_ENV = "ROCKETSTORE_ACCESS_KEY"
SECRET_KEY_ENV = "ROCKETSTORE_SECRET_KEY"
#: A group name: the topic characters, up to 255 of them.
_GROUP_CHARS = TOPIC_NAME_RE.pattern[:-1]
_GROUP_RE = re.compile(_GROUP_CHARS + "{1,255}")
#: The levels each codec takes (the LZ4 frame codec ignores its level).
_COMPRESS_LEVELS = {"ZLIB": (0, 9), "ZSTD": (1, 22), "LZ4": (0, 16)}


def local_ip() -> str:
    """The address RocketMQ's client reports for itself (RemotingUtil.getLocalAddress)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("10.255.255.255", 1))  # no packet is sent: picks the outgoing interface
            return str(probe.getsockname()[0])
    except OSError:
        return "127.0.0.1"


def _default_consume_timestamp() -> str:
    """Half an hour ago as yyyyMMddHHmmss (DefaultMQPushConsumer's consumeTimestamp)."""
    return time.strftime("%Y%m%d%H%M%S", time.localtime(time.time() - 30 * 60))


def parse_consume_timestamp(text: str) -> int:
    """``yyyyMMddHHmmss`` (local time) in ms since the epoch; ValueError naming the field."""
    try:
        return int(time.mktime(time.strptime(text, "%Y%m%d%H%M%S")) * 1000)
    except (ValueError, OverflowError):
        raise ValueError(f"consume_timestamp must be yyyyMMddHHmmss, got {text!r}") from None


def check_group(what: str, group: object) -> str:
    if not isinstance(group, str):
        raise TypeError(f"{what} must be str, got {type(group).__name__}")
    if not _GROUP_RE.fullmatch(group):
        raise ValueError(f"{what} {group!r} must be 1..255 characters of {_GROUP_CHARS}")
    return group


def parse_namesrv_addr(text: str | None) -> list[str]:
    """``"host:port;host:port"`` as a list (RocketMQ separates name servers with ';')."""
    if not text:
        return []
    addresses = [part.strip() for part in re.split(r"[;,]", text) if part.strip()]
    for address in addresses:
        host, sep, port = address.rpartition(":")
        if not sep or not host or not is_ascii_int(port) or not 0 < int(port) <= 65535:
            raise ValueError(f"namesrv_addr: {address!r} is not host:port")
    return addresses


_TYPES: dict[str, type] = {"int": int, "bool": bool, "str": str, "float": float}


@dataclass(frozen=True)
class ClientConfig:
    """What every client has (RocketMQ's ClientConfig)."""

    #: Name servers, ``"host:port;host:port"``; default: the NAMESRV_ADDR environment variable.
    namesrv_addr: str | None = field(default_factory=lambda: os.environ.get("NAMESRV_ADDR"))
    client_ip: str = field(default_factory=local_ip)
    #: Part of the client id; the default "DEFAULT" becomes the process id (plus a counter).
    instance_name: str = "DEFAULT"
    client_callback_executor_threads: int = field(default_factory=lambda: os.cpu_count() or 1)
    namespace: str | None = None
    poll_name_server_interval: int = 30_000
    heartbeat_broker_interval: int = 30_000
    persist_consumer_offset_interval: int = 5_000
    pull_time_delay_mills_when_exception: int = 1_000
    unit_mode: bool = False
    unit_name: str | None = None
    vip_channel_enabled: bool = False
    mq_client_api_timeout: int = 3_000
    #: RocketMQ 4.x ACL: every request signed with this account (AclClientRPCHook)
    access_key: str | None = None
    secret_key: str | None = None
    security_token: str | None = None

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            kind = _TYPES.get(f.type if isinstance(f.type, str) else getattr(f.type, "__name__", ""))
            if kind is int and (not isinstance(value, int) or isinstance(value, bool)):
                raise TypeError(f"{f.name} must be int, got {type(value).__name__}")
            if kind is bool and not isinstance(value, bool):
                raise TypeError(f"{f.name} must be bool, got {type(value).__name__}")
        parse_namesrv_addr(self.namesrv_addr)
        for name in ("poll_name_server_interval", "heartbeat_broker_interval",
                     "persist_consumer_offset_interval", "mq_client_api_timeout",
                     "client_callback_executor_threads"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.pull_time_delay_mills_when_exception < 0:
            raise ValueError("pull_time_delay_mills_when_exception must not be negative")
        if (self.access_key is None) != (self.secret_key is None):
            raise ValueError("access_key and secret_key go together: set both or neither")
        if not self.instance_name or "@" in self.instance_name:
            raise ValueError(f"instance_name must be non-empty without '@', got {self.instance_name!r}")

    @property
    def credentials(self) -> SessionCredentials | None:
        """The account requests are signed with (None: unsigned)."""
        if self.access_key is None or self.secret_key is None:
            return None
        return SessionCredentials(self.access_key, self.secret_key, self.security_token)

    @property
    def namesrv_addresses(self) -> list[str]:
        return parse_namesrv_addr(self.namesrv_addr)

    def replace(self: C, **changes: Any) -> C:
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_properties(cls: type[C], source: str | os.PathLike[str] | IO[str], **overrides: Any) -> C:
        """Read a ``.properties`` file with RocketMQ's camelCase keys (``namesrvAddr``,
        ``sendMsgTimeout``, ...). Unknown keys raise ValueError; ``overrides`` win."""
        text = read_properties_text(source)
        fields = {camel_case(f.name): f for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {}
        for key, raw in parse_properties(text).items():
            f = fields.get(key)
            if f is None:
                raise ValueError(f"property {key!r} is not a {cls.__name__} setting")
            values[f.name] = _convert(key, f.type, raw.strip())
        values.update(overrides)
        return cls(**values)


def _convert(key: str, kind: Any, text: str) -> Any:
    name = kind if isinstance(kind, str) else getattr(kind, "__name__", str(kind))
    if name.startswith("MessageModel"):
        return MessageModel(text)
    if name.startswith("ConsumeFromWhere"):
        return ConsumeFromWhere(text)
    if name not in ("bool", "int"):
        return text
    try:
        return convert_value(name, text)
    except ValueError as exc:
        raise ValueError(f"property {key!r} {exc}") from None


@dataclass(frozen=True)
class ProducerConfig(ClientConfig):
    """DefaultMQProducer's settings."""

    producer_group: str = DEFAULT_PRODUCER_GROUP
    create_topic_key: str = AUTO_CREATE_TOPIC_KEY_TOPIC
    default_topic_queue_nums: int = 4
    send_msg_timeout: int = 3_000
    compress_msg_body_over_howmuch: int = 4 * 1024
    #: The level of compressed bodies (RocketMQ's rocketmq.message.compressLevel; LZ4 has none).
    compress_level: int = 5
    #: The codec of compressed bodies: ZLIB, LZ4 or ZSTD (RocketMQ's
    #: rocketmq.message.compressType); the sysFlag says which (ZLIB 0x301, LZ4 0x101, ZSTD 0x201).
    compress_type: str = "ZLIB"
    retry_times_when_send_failed: int = 2
    retry_times_when_send_async_failed: int = 2
    retry_another_broker_when_not_store_ok: bool = False
    max_message_size: int = 4 * 1024 * 1024
    #: Avoid brokers that failed recently (MQFaultStrategy): off by default, as in RocketMQ.
    send_latency_fault_enable: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        check_group("producer_group", self.producer_group)
        if not 1 <= self.default_topic_queue_nums <= 1024:
            raise ValueError(f"default_topic_queue_nums must be in [1, 1024], got {self.default_topic_queue_nums}")
        for name in ("send_msg_timeout", "max_message_size"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        for name in ("retry_times_when_send_failed", "retry_times_when_send_async_failed",
                     "compress_msg_body_over_howmuch"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative, got {getattr(self, name)}")
        compression_flags(self.compress_type)      # ValueError naming compress_type
        low, high = _COMPRESS_LEVELS.get(self.compress_type.strip().upper(), (0, 9))
        if not low <= self.compress_level <= high:
            raise ValueError(f"compress_level must be in [{low}, {high}] for {self.compress_type}, "
                             f"got {self.compress_level}")


@dataclass(frozen=True)
class ConsumerConfig(ClientConfig):
    """What push and pull consumers share."""

    consumer_group: str = DEFAULT_CONSUMER_GROUP
    #: a MessageModel or its name (made the MessageModel)
    message_model: MessageModel | MessageModelName = MessageModel.CLUSTERING
    #: a ConsumeFromWhere or its name (made the ConsumeFromWhere)
    consume_from_where: ConsumeFromWhere | ConsumeFromWhereName = \
        ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    consume_timestamp: str = field(default_factory=_default_consume_timestamp)
    pull_threshold_for_queue: int = 1_000
    #: MiB of message bodies cached per queue before pulling pauses.
    pull_threshold_size_for_queue: int = 100
    pull_batch_size: int = 32
    broker_suspend_max_time_millis: int = 15_000
    consumer_timeout_millis_when_suspend: int = 30_000
    #: How often queues are reassigned among the group (rocketmq.client.rebalance.waitInterval).
    rebalance_interval: int = 20_000
    #: Where broadcasting consumers keep their offsets (rocketmq.client.localOffsetStoreDir).
    local_offset_store_dir: str = field(
        default_factory=lambda: os.path.join(os.path.expanduser("~"), ".rocketmq_offsets"))

    def __post_init__(self) -> None:
        super().__post_init__()
        check_group("consumer_group", self.consumer_group)
        object.__setattr__(self, "message_model", MessageModel(self.message_model))
        object.__setattr__(self, "consume_from_where", ConsumeFromWhere(self.consume_from_where))
        parse_consume_timestamp(self.consume_timestamp)
        for name in ("pull_threshold_for_queue", "pull_threshold_size_for_queue",
                     "broker_suspend_max_time_millis", "consumer_timeout_millis_when_suspend",
                     "rebalance_interval"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if not 1 <= self.pull_batch_size <= 1024:
            raise ValueError(f"pull_batch_size must be in [1, 1024], got {self.pull_batch_size}")
        if self.consumer_timeout_millis_when_suspend <= self.broker_suspend_max_time_millis:
            raise ValueError("consumer_timeout_millis_when_suspend must exceed broker_suspend_max_time_millis")


@dataclass(frozen=True)
class PushConsumerConfig(ConsumerConfig):
    """DefaultMQPushConsumer's settings."""

    consume_thread_min: int = 20
    consume_thread_max: int = 20
    consume_concurrently_max_span: int = 2_000
    pull_threshold_for_topic: int = -1
    pull_threshold_size_for_topic: int = -1
    pull_interval: int = 0
    consume_message_batch_max_size: int = 1
    post_subscription_when_pull: bool = False
    #: -1: 16 for concurrent consumption, unlimited for orderly consumption (as RocketMQ).
    max_reconsume_times: int = -1
    suspend_current_queue_time_millis: int = 1_000
    #: Minutes a message may be consumed before it is sent back for retry.
    consume_timeout: int = 15
    await_termination_millis_when_shutdown: int = 0
    #: Wait before pulling again after a failed pull (PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION).
    pull_time_delay_mills_when_pull_exception: int = 3_000

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 1 <= self.consume_thread_min <= 1000 or not 1 <= self.consume_thread_max <= 1000:
            raise ValueError("consume_thread_min and consume_thread_max must be in [1, 1000]")
        if self.consume_thread_min > self.consume_thread_max:
            raise ValueError("consume_thread_min must not exceed consume_thread_max")
        if not 1 <= self.consume_concurrently_max_span <= 65535:
            raise ValueError(f"consume_concurrently_max_span must be in [1, 65535], got {self.consume_concurrently_max_span}")
        if not 1 <= self.consume_message_batch_max_size <= 1024:
            raise ValueError(f"consume_message_batch_max_size must be in [1, 1024], got {self.consume_message_batch_max_size}")
        if self.pull_interval < 0 or self.pull_interval > 65535:
            raise ValueError(f"pull_interval must be in [0, 65535], got {self.pull_interval}")
        if self.max_reconsume_times < -1:
            raise ValueError(f"max_reconsume_times must be -1 or more, got {self.max_reconsume_times}")
        if self.suspend_current_queue_time_millis < 0 or self.consume_timeout <= 0:
            raise ValueError("suspend_current_queue_time_millis and consume_timeout must be positive")

    def effective_max_reconsume_times(self, orderly: bool) -> int:
        if self.max_reconsume_times == -1:
            return 2**31 - 1 if orderly else 16
        return self.max_reconsume_times


@dataclass(frozen=True)
class PullConsumerConfig(ConsumerConfig):
    """DefaultLitePullConsumer's settings."""

    pull_batch_size: int = 10
    broker_suspend_max_time_millis: int = 20_000
    auto_commit: bool = True
    auto_commit_interval_millis: int = 5_000
    pull_threshold_for_all: int = 10_000
    consume_max_span: int = 2_000
    poll_timeout_millis: int = 5_000
    topic_metadata_check_interval_millis: int = 30_000
    #: Wait before pulling again after a failed pull.
    pull_time_delay_mills_when_pull_exception: int = 1_000

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("auto_commit_interval_millis", "pull_threshold_for_all", "consume_max_span",
                     "poll_timeout_millis", "topic_metadata_check_interval_millis"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.auto_commit_interval_millis < 1000:
            raise ValueError("auto_commit_interval_millis must be at least 1000")
