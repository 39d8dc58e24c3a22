"""NamesrvConfig: RocketMQ's name server settings in snake_case, read from namesrv.properties.

The fields are RocketMQ's NamesrvConfig and the NettyServerConfig fields a name server uses,
with their defaults, except ``bind_address``, which is loopback here (RocketMQ binds every
interface): serving other hosts is a choice made in the file or on the command line.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from dataclasses import dataclass
from typing import IO, Any

from rocketstore.common.java_properties import (
    camel_case,
    convert_value,
    parse_properties,
    read_properties_text,
)
from rocketstore.remoting.config import RemotingServerConfig
from rocketstore.remoting.metrics import check_exporter_type

log = logging.getLogger(__name__)


def _home_path(*parts: str) -> str:
    return os.path.join(os.path.expanduser("~"), *parts)


@dataclass(frozen=True)
class NamesrvConfig:
    rocketmq_home: str = dataclasses.field(default_factory=lambda: os.environ.get("ROCKETMQ_HOME", ""))
    kv_config_path: str = dataclasses.field(default_factory=lambda: _home_path("namesrv", "kvConfig.json"))
    config_store_path: str = dataclasses.field(default_factory=lambda: _home_path("namesrv", "namesrv.properties"))
    product_env_name: str = "center"
    cluster_test: bool = False
    order_message_enable: bool = False
    listen_port: int = 9876
    bind_address: str = "127.0.0.1"
    server_channel_max_idle_time_seconds: float = 120.0
    #: How often brokers are checked for silence (RocketMQ 4.9 scans every 10 s).
    scan_not_active_broker_interval: int = 10_000
    #: A broker not registered again within this many ms is dropped (RocketMQ: 2 minutes).
    broker_channel_expired_time: int = 120_000
    #: RocketMQ 5's metrics switches (see rocketstore.remoting.metrics)
    metrics_exporter_type: str = "DISABLE"
    metrics_prom_exporter_host: str = "127.0.0.1"
    metrics_prom_exporter_port: int = 5557
    #: Run the controller (RocketMQ 5's controller mode) on this name server's port; it scans
    #: broker heartbeats every scan_not_active_broker_interval.
    enable_controller_in_namesrv: bool = False
    controller_store_path: str = dataclasses.field(default_factory=lambda: _home_path("controller"))
    enable_elect_unclean_master: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "metrics_exporter_type", check_exporter_type(self.metrics_exporter_type))
        for name in ("listen_port", "metrics_prom_exporter_port"):
            if not 0 <= getattr(self, name) <= 65535:
                raise ValueError(f"{name} must be in [0, 65535], got {getattr(self, name)}")
        for name in ("scan_not_active_broker_interval", "broker_channel_expired_time"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")

    def server_config(self) -> RemotingServerConfig:
        return RemotingServerConfig(
            listen_port=self.listen_port,
            bind_address=self.bind_address,
            server_channel_max_idle_time_seconds=self.server_channel_max_idle_time_seconds,
        )

    def replace(self, **changes: Any) -> NamesrvConfig:
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_properties(cls, source: str | os.PathLike[str] | IO[str], **overrides: Any) -> NamesrvConfig:
        """Read ``namesrv.properties`` (camelCase keys, Java ``.properties`` syntax).

        Unknown keys are ignored (logged at debug level); a bad value raises ValueError naming
        the key. ``overrides`` (snake_case) win over the file.
        """
        text = read_properties_text(source)
        fields = {camel_case(f.name): f for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {}
        for key, raw in parse_properties(text).items():
            f = fields.get(key)
            if f is None:
                log.debug("ignoring property %r: not a name server setting", key)
                continue
            try:
                values[f.name] = convert_value(f.type, raw.strip())
            except ValueError as exc:
                raise ValueError(f"property {key!r} (field {f.name}): {exc}") from None
        values.update(overrides)
        return cls(**values)

