"""NamesrvController: the name server's parts wired together, started and stopped."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from types import TracebackType

from rocketstore.controller import ControllerProcessor, ReplicasInfo
from rocketstore.namesrv.config import NamesrvConfig
from rocketstore.namesrv.kv_config import KVConfigManager, NamesrvConfigProcessor
from rocketstore.namesrv.processor import NamesrvProcessor
from rocketstore.namesrv.route_info import RouteInfoManager, wall_clock_ms
from rocketstore.remoting import RemotingServer
from rocketstore.remoting.metrics import LoopSnapshotCollector, PrometheusExporter

log = logging.getLogger(__name__)


class NamesrvController:
    """A name server: a RemotingServer answering from a RouteInfoManager, and the scan that
    drops silent brokers every ``scan_not_active_broker_interval`` ms.

    ``clock`` (milliseconds) is the route table's: tests move it to expire brokers.
    """

    def __init__(self, config: NamesrvConfig | None = None, clock: Callable[[], float] = wall_clock_ms, *,
                 config_file: str | os.PathLike[str] | None = None) -> None:
        self.config = config or NamesrvConfig()
        self.route_info = RouteInfoManager(clock, self.config.broker_channel_expired_time)
        self.server = RemotingServer(self.config.server_config())
        #: the KV config, loaded from kvConfigPath at start
        self.kv = KVConfigManager(self.config.kv_config_path)
        self.config_processor = NamesrvConfigProcessor(
            self.kv, lambda: self.config, self._set_config,
            None if config_file is None else os.fspath(config_file))
        self.processor = NamesrvProcessor(self.route_info, self.config_processor.order_topic_conf)
        self.processor.register_with(self.server)
        self.config_processor.register_with(self.server)
        #: /metrics (metricsExporterType=PROM)
        self.metrics: PrometheusExporter | None = None
        #: the controller on this port (enableControllerInNamesrv)
        self.controller: ControllerProcessor | None = None
        if self.config.enable_controller_in_namesrv:
            self.controller = ControllerProcessor(
                ReplicasInfo(self.config.controller_store_path,
                             enable_elect_unclean_master=self.config.enable_elect_unclean_master),
                lambda: self.address,
                scan_not_active_broker_interval=self.config.scan_not_active_broker_interval)
            self.controller.register_with(self.server)

    def _set_config(self, config: NamesrvConfig) -> None:
        self.config = config
        self._scan_timer: asyncio.TimerHandle | None = None

    @property
    def address(self) -> str:
        """``"host:port"`` it listens on, as brokers and clients write name server addresses."""
        host, port = self.server.address
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    async def start(self) -> None:
        self.kv.load()
        await self.server.start()
        self._schedule_scan()
        if self.config.metrics_exporter_type == "PROM":
            from rocketstore.namesrv.metrics import namesrv_families

            self.metrics = PrometheusExporter(
                LoopSnapshotCollector(asyncio.get_running_loop(), lambda: namesrv_families(self)),
                self.config.metrics_prom_exporter_host, self.config.metrics_prom_exporter_port)
            await asyncio.get_running_loop().run_in_executor(None, self.metrics.start)
        if self.controller is not None:
            self.controller.start()

    def _schedule_scan(self) -> None:
        loop = asyncio.get_running_loop()
        self._scan_timer = loop.call_later(self.config.scan_not_active_broker_interval / 1000, self._scan)

    def _scan(self) -> None:
        try:
            self.route_info.scan_not_active_broker()
        except Exception:
            log.exception("scanning brokers failed")
        self._schedule_scan()

    async def stop(self) -> None:
        metrics, self.metrics = self.metrics, None
        if metrics is not None:
            await asyncio.get_running_loop().run_in_executor(None, metrics.stop)
        if self.controller is not None:
            self.controller.stop()
        if self._scan_timer is not None:
            self._scan_timer.cancel()
            self._scan_timer = None
        await self.server.stop()

    async def __aenter__(self) -> NamesrvController:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()
