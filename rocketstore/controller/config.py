"""ControllerConfig: a standalone controller's settings (RocketMQ 5's ControllerConfig keys in
controller.properties). A controller inside a name server reads the same keys from
namesrv.properties (NamesrvConfig)."""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import IO, Any

from rocketstore.common.java_properties import (
    camel_case,
    convert_value,
    parse_properties,
    read_properties_text,
)


@dataclass(frozen=True)
class ControllerConfig:
    #: RocketMQ 5's controller port
    listen_port: int = 9878
    bind_address: str = "127.0.0.1"
    #: where the controller keeps its state (replicasInfo.json)
    controller_store_path: str = dataclasses.field(
        default_factory=lambda: os.path.join(os.path.expanduser("~"), "controller"))
    #: how often brokers' heartbeats are checked (ms; RocketMQ 5: 5 s)
    scan_not_active_broker_interval: int = 5000
    #: elect a replica outside the SyncStateSet when none in it is alive (loses messages)
    enable_elect_unclean_master: bool = False
    #: a replicated controller (pysyncobj's Raft, the ``controller`` extra): every
    #: controller's Raft address, "n0-host:port;n1-host:port;n2-host:port" ("": one controller)
    controller_d_leger_peers: str = ""
    #: this controller's id in controller_d_leger_peers
    controller_d_leger_self_id: str = ""

    def __post_init__(self) -> None:
        if not 0 <= self.listen_port <= 65535:
            raise ValueError(f"listen_port must be in [0, 65535], got {self.listen_port}")
        if self.scan_not_active_broker_interval <= 0:
            raise ValueError("scan_not_active_broker_interval must be positive, got "
                             f"{self.scan_not_active_broker_interval}")

    @classmethod
    def from_properties(cls, source: str | os.PathLike[str] | IO[str],
                        **overrides: Any) -> ControllerConfig:
        """controller.properties (camelCase keys); unknown keys are ignored, a bad value
        raises ValueError naming the key."""
        fields = {camel_case(f.name): f for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {}
        for key, raw in parse_properties(read_properties_text(source)).items():
            f = fields.get(key)
            if f is None:
                continue
            try:
                values[f.name] = convert_value(f.type, raw.strip())
            except ValueError as exc:
                raise ValueError(f"property {key!r} (field {f.name}): {exc}") from None
        values.update(overrides)
        return cls(**values)
