"""Settings of remoting servers and clients: RocketMQ's NettyServerConfig / NettyClientConfig
names in snake_case with their defaults, plus the limits our transports add."""

from __future__ import annotations

from dataclasses import dataclass

from rocketstore.common.text import is_ascii_int
from rocketstore.remoting.codec import MAX_FRAME_BYTES
from rocketstore.remoting.connection import ConnectionLimits


def _check_limits(max_frame_bytes: int, high: int, low: int, max_inflight: int) -> None:
    if max_frame_bytes < 8:
        raise ValueError(f"max_frame_bytes must be at least 8, got {max_frame_bytes}")
    if not 0 <= low <= high:
        raise ValueError(
            f"write_buffer_low_water_mark ({low}) must be between 0 and "
            f"write_buffer_high_water_mark ({high})"
        )
    if max_inflight < 1:
        raise ValueError(f"max_inflight_requests must be at least 1, got {max_inflight}")


@dataclass(frozen=True)
class RemotingServerConfig:
    #: RocketMQ's default is 8888 (the broker uses 10911, the name server 9876); 0 picks a free port.
    listen_port: int = 8888
    #: Loopback unless told otherwise: a server here is reachable from outside only on purpose.
    bind_address: str = "127.0.0.1"
    #: Seconds without traffic after which a connection is closed (RocketMQ: 120).
    server_channel_max_idle_time_seconds: float = 120.0
    #: Frames larger than this (length field included) close the connection (RocketMQ: 16 MiB).
    max_frame_bytes: int = MAX_FRAME_BYTES
    #: Stop reading a connection whose unsent replies pass this many bytes ...
    write_buffer_high_water_mark: int = 1024 * 1024
    #: ... and read it again once they are down to this.
    write_buffer_low_water_mark: int = 256 * 1024
    #: Requests of one connection being processed at once before it stops being read.
    max_inflight_requests: int = 10_000
    #: listen(2) backlog (RocketMQ's serverSocketBacklog).
    server_socket_backlog: int = 1024

    def __post_init__(self) -> None:
        if not 0 <= self.listen_port <= 65535:
            raise ValueError(f"listen_port must be in [0, 65535], got {self.listen_port}")
        if self.server_channel_max_idle_time_seconds <= 0:
            raise ValueError("server_channel_max_idle_time_seconds must be positive")
        _check_limits(
            self.max_frame_bytes,
            self.write_buffer_high_water_mark,
            self.write_buffer_low_water_mark,
            self.max_inflight_requests,
        )

    def connection_limits(self) -> ConnectionLimits:
        return ConnectionLimits(
            max_frame_bytes=self.max_frame_bytes,
            write_buffer_high_water_mark=self.write_buffer_high_water_mark,
            write_buffer_low_water_mark=self.write_buffer_low_water_mark,
            max_inflight_requests=self.max_inflight_requests,
            idle_timeout=self.server_channel_max_idle_time_seconds,
        )


@dataclass(frozen=True)
class RemotingClientConfig:
    connect_timeout_millis: int = 3000
    #: Seconds without traffic after which a connection is closed (RocketMQ: 120).
    client_channel_max_idle_time_seconds: float = 120.0
    #: Connections kept per address, used round robin (RocketMQ keeps one).
    connections_per_address: int = 1
    max_frame_bytes: int = MAX_FRAME_BYTES
    write_buffer_high_water_mark: int = 1024 * 1024
    write_buffer_low_water_mark: int = 256 * 1024
    #: Server-initiated requests processed at once per connection.
    max_inflight_requests: int = 10_000

    def __post_init__(self) -> None:
        if self.connect_timeout_millis <= 0:
            raise ValueError(f"connect_timeout_millis must be positive, got {self.connect_timeout_millis}")
        if self.client_channel_max_idle_time_seconds <= 0:
            raise ValueError("client_channel_max_idle_time_seconds must be positive")
        if self.connections_per_address < 1:
            raise ValueError(f"connections_per_address must be at least 1, got {self.connections_per_address}")
        _check_limits(
            self.max_frame_bytes,
            self.write_buffer_high_water_mark,
            self.write_buffer_low_water_mark,
            self.max_inflight_requests,
        )

    def connection_limits(self) -> ConnectionLimits:
        return ConnectionLimits(
            max_frame_bytes=self.max_frame_bytes,
            write_buffer_high_water_mark=self.write_buffer_high_water_mark,
            write_buffer_low_water_mark=self.write_buffer_low_water_mark,
            max_inflight_requests=self.max_inflight_requests,
            idle_timeout=self.client_channel_max_idle_time_seconds,
        )


def parse_address(address: str) -> tuple[str, int]:
    """``"127.0.0.1:9876"`` or ``"[::1]:9876"`` -> (host, port); ValueError names the address."""
    host, sep, port_text = address.strip().rpartition(":")
    if not sep or not host or not is_ascii_int(port_text):
        raise ValueError(f"address must be host:port, got {address!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    port = int(port_text)
    if not 0 < port <= 65535:
        raise ValueError(f"port must be in [1, 65535], got {address!r}")
    return host, port
