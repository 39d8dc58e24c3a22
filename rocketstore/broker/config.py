"""BrokerConfig: RocketMQ 4.9's BrokerConfig (and the NettyServerConfig fields a broker uses)
in snake_case with RocketMQ's defaults, read from ``broker.properties`` together with the
store's keys (:class:`rocketstore.config.StoreConfig`).

One ``broker.properties`` holds both, as in RocketMQ: ``brokerName``, ``listenPort``,
``namesrvAddr``... are broker settings; ``storePathRootDir``, ``flushDiskType``,
``messageDelayLevel``... go to the store. A key that is neither is logged (WARNING) and
ignored, as RocketMQ ignores it; a bad value raises ValueError naming the key.

Deliberate differences from RocketMQ: ``bind_address`` (rocketstore's own) defaults to
127.0.0.1 and ``broker_ip1`` to 127.0.0.1 (RocketMQ binds every interface and guesses the
host's address); ``broker_name`` defaults to ``broker-a`` rather than the host name, so a
store moved between hosts keeps its identity. The store's ``store_host`` (written into every
record and message id) is ``brokerIP1:listenPort`` unless the file sets ``storeHost``.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from dataclasses import dataclass, field
from typing import IO, Any

from rocketstore.common.java_properties import (
    camel_case,
    convert_value,
    escape_value,
    parse_properties,
    read_properties_text,
)
from rocketstore.common.perm import PERM_MASK, PERM_READ, PERM_WRITE
from rocketstore.common.topics import TRACE_TOPIC
from rocketstore.config import PROPERTY_KEYS, StoreConfig
from rocketstore.remoting.metrics import check_exporter_type

log = logging.getLogger(__name__)

MASTER_ID = 0


def _key(name: str) -> dict[str, str]:
    return {"key": name}


@dataclass(frozen=True)
class BrokerConfig:
    """A broker's settings; ``store`` is the store's (same file, its own keys)."""

    broker_cluster_name: str = "DefaultCluster"
    broker_name: str = "broker-a"
    #: 0 is the master; slaves have ids > 0.
    broker_id: int = 0
    #: Name servers, ``"host:port;host:port"``; None: register nowhere (RocketMQ reads the
    #: NAMESRV_ADDR environment variable then).
    namesrv_addr: str | None = field(default_factory=lambda: os.environ.get("NAMESRV_ADDR"))
    #: The address clients reach this broker at (registered with the name servers).
    broker_ip1: str = field(default="127.0.0.1", metadata=_key("brokerIP1"))
    #: The address slaves replicate from; None: broker_ip1.
    broker_ip2: str | None = field(default=None, metadata=_key("brokerIP2"))
    listen_port: int = 10911
    #: rocketstore's own: the interface the broker listens on ("0.0.0.0": every one).
    bind_address: str = "127.0.0.1"
    #: Also serve on listen_port - 2 (RocketMQ's "VIP channel", used by Java clients).
    fast_listen_port_enable: bool = True
    server_channel_max_idle_time_seconds: float = 120.0
    #: PERM_READ | PERM_WRITE: 6 (a broker that takes neither reads nor writes is 0).
    broker_permission: int = PERM_READ | PERM_WRITE
    default_topic_queue_nums: int = 8
    auto_create_topic_enable: bool = True
    cluster_topic_enable: bool = True
    broker_topic_enable: bool = True
    auto_create_subscription_group: bool = True
    trace_topic_enable: bool = False
    msg_trace_topic_name: str = TRACE_TOPIC
    #: Consumer offsets are written to consumerOffset.json this often (ms).
    flush_consumer_offset_interval: int = 5000
    long_polling_enable: bool = True
    #: A pull's reply suggests the subscription group's brokerId (whichBrokerWhenConsumeSlowly
    #: when the consumer is further behind than accessMessageInMemoryMaxRatio of memory);
    #: False: always the master (0).
    slave_read_enable: bool = False
    #: How long a pull with the suspend bit is held when long polling is off (ms).
    short_polling_time_mills: int = 1000
    notify_consumer_ids_changed_enable: bool = True
    #: A send answered later than this after it was read is answered SYSTEM_BUSY (ms).
    wait_time_mills_in_send_queue: int = 200
    broker_fast_failure_enable: bool = True
    register_name_server_period: int = 30000
    register_broker_timeout_mills: int = 6000
    force_register: bool = True
    #: A client connection silent this long is dropped (ClientHousekeepingService, ms).
    channel_expired_timeout: int = 120_000
    #: A queue lock of an orderly consumer expires this long after its last renewal (ms).
    rebalance_lock_max_live_time: int = 60_000
    #: Transaction messages (prepared/commit/rollback) are refused with NO_PERMISSION.
    reject_transaction_message: bool = False
    #: A half message younger than this is not checked yet (ms; RocketMQ's transactionTimeOut).
    transaction_time_out: int = 6000
    #: A half message is checked at most this many times, then discarded to
    #: TRANS_CHECK_MAX_TIME_TOPIC.
    transaction_check_max: int = 15
    #: The check service runs this often (ms).
    transaction_check_interval: int = 60_000
    region_id: str = "DefaultRegion"
    trace_on: bool = True
    #: SQL92 subscriptions (ExpressionType.SQL92) are served; off, they are refused as
    #: RocketMQ refuses them ("The broker does not support consumer to filter message by SQL92").
    enable_property_filter: bool = False
    #: SQL92 filter bitmaps computed at dispatch for the groups' SQL92 subscriptions, kept in
    #: the ConsumeQueue extension (the store's enableConsumeQueueExt) so pulls skip what
    #: cannot match; a bloom filter of expectConsumerNumUseFilter groups with an error rate of
    #: maxErrorRateOfBloomFilter percent
    enable_calc_filter_bit_map: bool = False
    expect_consumer_num_use_filter: int = 32
    max_error_rate_of_bloom_filter: int = 20
    #: QUEUE_PUT_* and QUEUE_GET_* statistics (by queue), and GROUP_GET_LATENCY by queue
    enable_detail_stat: bool = True
    #: RocketMQ 5's metrics switches: PROM serves Prometheus' /metrics on
    #: metricsPromExporterHost:metricsPromExporterPort (DISABLE: no endpoint)
    metrics_exporter_type: str = "DISABLE"
    metrics_prom_exporter_host: str = "127.0.0.1"
    metrics_prom_exporter_port: int = 5557
    #: RocketMQ 4.x plain ACL: requests signed by an account of acl_file
    acl_enable: bool = False
    #: the ACL file; empty: plain_acl.yml beside the properties file (else in the store's config dir)
    acl_file: str = ""
    #: RocketMQ 5's controller mode: the controller (controllerAddr, "host:port;...") decides
    #: which replica of the group is master; brokerId names the replica (> 0)
    enable_controller_mode: bool = False
    controller_addr: str = ""
    #: heartbeats to the controller this often (ms)
    broker_heartbeat_interval: int = 1000
    #: the controller elects another master when this one is silent this long (ms)
    controller_heart_beat_timeout_mills: int = 10_000
    #: a slave behind the master this long leaves the SyncStateSet (ms; RocketMQ 5's store key)
    ha_max_time_slave_not_catchup: int = 15_000
    #: memory topics (topic config ``memory=true``: messages held in memory, never in the
    #: CommitLog, lost at restart) may be created
    memory_topic_enable: bool = False
    #: the bytes all memory topics hold together; a put over it evicts the oldest messages of
    #: its topic (0: 75% of the memory available when the broker starts)
    memory_topic_max_bytes: int = 0
    store: StoreConfig = field(default_factory=StoreConfig, metadata={"properties": False})

    def __post_init__(self) -> None:
        object.__setattr__(self, "metrics_exporter_type", check_exporter_type(self.metrics_exporter_type))
        for name in ("listen_port", "metrics_prom_exporter_port"):
            value = getattr(self, name)
            if not 0 <= value <= 65535:
                raise ValueError(f"{name} must be in [0, 65535], got {value}")
        if self.broker_id < 0:
            raise ValueError(f"broker_id must be >= 0, got {self.broker_id}")
        if self.memory_topic_max_bytes < 0:
            raise ValueError(f"memory_topic_max_bytes must be >= 0, got {self.memory_topic_max_bytes}")
        if self.store.broker_role == "SLAVE" and self.broker_id <= 0:
            # RocketMQ's BrokerStartup: "Slave's brokerId must be > 0"
            raise ValueError(f"broker_id of a SLAVE (brokerRole) must be > 0, got {self.broker_id}")
        if self.enable_controller_mode:
            if self.broker_id <= 0:
                raise ValueError("broker_id must be > 0 with enable_controller_mode (it names the "
                                 f"replica; the master registers as 0), got {self.broker_id}")
            if not self.controller_addr.strip():
                raise ValueError("controller_addr must be set with enable_controller_mode")
        if not 0 <= self.broker_permission <= PERM_MASK:
            raise ValueError(f"broker_permission must be in [0, 15], got {self.broker_permission}")
        if self.store.read_only and self.broker_permission & PERM_WRITE:
            # a broker over a store opened read-only takes no sends (PERM_READ alone is 4)
            raise ValueError("broker_permission must not have PERM_WRITE (2) with read_only "
                             f"(readOnly=true; {PERM_READ}: read only), got {self.broker_permission}")
        if not 1 <= self.default_topic_queue_nums <= 1024:
            raise ValueError(
                f"default_topic_queue_nums must be in [1, 1024], got {self.default_topic_queue_nums}")
        for name in ("flush_consumer_offset_interval", "short_polling_time_mills",
                     "wait_time_mills_in_send_queue", "register_name_server_period",
                     "register_broker_timeout_mills", "channel_expired_timeout",
                     "rebalance_lock_max_live_time", "broker_heartbeat_interval",
                     "controller_heart_beat_timeout_mills", "ha_max_time_slave_not_catchup"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if not self.broker_name or "@" in self.broker_name:
            raise ValueError(f"broker_name must be a non-empty name without '@', got {self.broker_name!r}")
        if not self.broker_cluster_name:
            raise ValueError("broker_cluster_name must not be empty")

    # ---- derived ----

    @property
    def namesrv_addrs(self) -> list[str]:
        if not self.namesrv_addr:
            return []
        return [a.strip() for a in self.namesrv_addr.split(";") if a.strip()]

    @property
    def fast_listen_port(self) -> int | None:
        """listen_port - 2 when enabled and meaningful (not with a system-chosen port)."""
        if not self.fast_listen_port_enable or self.listen_port < 3:
            return None
        return self.listen_port - 2

    def broker_addr(self, port: int | None = None) -> str:
        return f"{self.broker_ip1}:{self.listen_port if port is None else port}"

    def ha_server_addr(self, port: int | None = None, ha_port: int | None = None) -> str:
        """``brokerIP2:haListenPort``: ha_port, else listenPort + 1 (as RocketMQ sets
        haListenPort)."""
        if ha_port is None:
            ha_port = (self.listen_port if port is None else port) + 1
        return f"{self.broker_ip2 or self.broker_ip1}:{ha_port}"

    def store_config_for(self, port: int) -> StoreConfig:
        """The store's config for a broker listening on ``port``: its store host (unless set
        explicitly in the file) and RocketMQ's haListenPort (listenPort + 1)."""
        changes: dict[str, Any] = {}
        if self.store.store_host == StoreConfig.__dataclass_fields__["store_host"].default:
            changes["store_host"] = f"{self.broker_ip1}:{port}"
        if self.store.ha_listen_port == 10912 and port + 1 <= 65535:
            changes["ha_listen_port"] = port + 1
        return self.store.replace(**changes) if changes else self.store

    def replace(self, **changes: Any) -> BrokerConfig:
        return dataclasses.replace(self, **changes)

    # ---- .properties ----

    @classmethod
    def from_properties(cls, source: str | os.PathLike[str] | IO[str], **overrides: Any) -> BrokerConfig:
        """Read ``broker.properties``: broker keys here, store keys into ``store``.

        ``overrides`` (snake_case broker fields, or ``store=StoreConfig``) win over the file.
        """
        properties = parse_properties(read_properties_text(source))
        values: dict[str, Any] = {}
        store_values: dict[str, str] = {}
        for key, raw in properties.items():
            spec = _BROKER_KEYS.get(key)
            if spec is not None:
                values[spec.name] = broker_value(key, raw)
            elif key in _STORE_KEYS:
                store_values[key] = raw
            else:
                log.warning("ignoring property %r: neither a broker nor a store setting", key)
        if "store" not in overrides:
            store_text = "".join(f"{k}={escape_value(v)}\n" for k, v in store_values.items())
            import io

            values["store"] = StoreConfig.from_properties(io.StringIO(store_text))
        values.update(overrides)
        return cls(**values)


def broker_value(key: str, raw: str) -> Any:
    """A ``broker.properties`` value of broker key ``key`` as its field's type (trimmed, as
    RocketMQ reads it); ValueError names the key and the field."""
    spec = _BROKER_KEYS[key]
    try:
        return _convert(spec.type, raw.strip())
    except ValueError as exc:
        raise ValueError(f"property {key!r} (field {spec.name}): {exc}") from None


def _convert(kind: Any, text: str) -> Any:
    kind = kind if isinstance(kind, str) else getattr(kind, "__name__", str(kind))
    kind = kind.replace(" ", "")
    if kind.startswith("str"):
        return text
    if kind not in ("bool", "int", "float"):
        raise ValueError(f"unsupported setting type {kind}")
    return convert_value(kind, text)


_BROKER_KEYS: dict[str, dataclasses.Field[Any]] = {
    f.metadata.get("key", camel_case(f.name)): f
    for f in dataclasses.fields(BrokerConfig)
    if f.metadata.get("properties", True)
}
_STORE_KEYS = frozenset(PROPERTY_KEYS.values())

#: Every broker field (snake_case) -> its ``broker.properties`` key.
BROKER_PROPERTY_KEYS = {f.name: key for key, f in _BROKER_KEYS.items()}
