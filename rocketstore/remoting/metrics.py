"""The Prometheus endpoint of a server (broker or name server), RocketMQ 5's switches:
``metricsExporterType=PROM`` serves ``/metrics`` on ``metricsPromExporterHost:metricsPromExporterPort``.

The HTTP server is prometheus_client's, in its own thread. What it reports is the event loop's
state, which only the loop may read: a scrape asks the loop for a snapshot
(``call_soon_threadsafe``) and waits for it a bounded time, so the request path pays nothing
and a busy loop makes a scrape late (or, past ``SNAPSHOT_TIMEOUT_S``, report
``rocketstore_scrape_ok 0``), never wrong.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Any

log = logging.getLogger("rocketstore.remoting")

#: metricsExporterType's values (RocketMQ 5's MetricsExporterType); PROM is the one served here
EXPORTER_TYPES = ("DISABLE", "OTLP_GRPC", "PROM", "LOG")
SNAPSHOT_TIMEOUT_S = 5.0

Snapshot = Callable[[], Iterable[Any]]


def check_exporter_type(value: str) -> str:
    """metricsExporterType, checked (ValueError names the setting)."""
    if value.upper() not in EXPORTER_TYPES:
        raise ValueError(f"metricsExporterType must be one of {', '.join(EXPORTER_TYPES)}, got {value!r}")
    return value.upper()


class LoopSnapshotCollector:
    """A prometheus_client collector whose metric families are made on the event loop.

    ``snapshot`` runs on ``loop`` and returns finished metric families (plain objects the
    HTTP thread only serialises)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, snapshot: Snapshot,
                 timeout_s: float = SNAPSHOT_TIMEOUT_S) -> None:
        self.loop = loop
        self.snapshot = snapshot
        self.timeout_s = timeout_s

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        done: concurrent.futures.Future[list[Any]] = concurrent.futures.Future()

        def take() -> None:
            if done.set_running_or_notify_cancel():
                try:
                    done.set_result(list(self.snapshot()))
                except BaseException as exc:  # noqa: BLE001 - told to the scrape
                    done.set_exception(exc)

        families: list[Any] = []
        ok = 0
        try:
            self.loop.call_soon_threadsafe(take)
            families = done.result(self.timeout_s)
            ok = 1
        except concurrent.futures.TimeoutError:
            done.cancel()
            log.warning("metrics: the event loop gave no snapshot within %.1f s", self.timeout_s)
        except RuntimeError as exc:     # the loop is closed
            log.info("metrics: no snapshot: %s", exc)
        except Exception:
            log.exception("metrics: the snapshot failed")
        yield from families
        yield GaugeMetricFamily("rocketstore_scrape_ok",
                                "1 when the event loop gave this scrape its snapshot in time", ok)


class PrometheusExporter:
    """``/metrics`` over HTTP in a thread of its own (prometheus_client's server)."""

    def __init__(self, collector: LoopSnapshotCollector, host: str = "127.0.0.1",
                 port: int = 5557) -> None:
        try:
            from prometheus_client import CollectorRegistry
        except ImportError as exc:  # the extra is not installed
            raise RuntimeError("metricsExporterType=PROM needs prometheus-client: "
                               "pip install 'rocketstore[metrics]'") from exc
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(collector)  # type: ignore[arg-type]
        self.host = host
        self.port = port
        self._server: Any = None
        self._thread: Any = None

    def start(self) -> None:
        from prometheus_client import start_http_server

        self._server, self._thread = start_http_server(self.port, self.host, registry=self.registry)
        self.port = self._server.server_address[1]
        log.info("metrics served on http://%s:%d/metrics", self.host, self.port)

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(5.0)
            self._thread = None


def connection_family(labels: dict[str, str], connections: int) -> Any:
    """The open remoting connections of a server."""
    from prometheus_client.core import GaugeMetricFamily

    gauge = GaugeMetricFamily("rocketstore_connections", "open remoting connections",
                              labels=list(labels))
    gauge.add_metric(list(labels.values()), connections)
    return gauge


def request_family(labels: dict[str, str]) -> Any:
    """The requests this process served, by request code and result: the reply's response
    code, or ONEWAY (counted where the reply is written; rocketstore.remoting._pump)."""
    from prometheus_client.core import CounterMetricFamily

    from rocketstore.remoting._pump import RESULT_ONEWAY, request_counts
    from rocketstore.remoting.codes import RequestCode, ResponseCode

    counter = CounterMetricFamily(
        "rocketstore_requests", "remoting requests served, by request code and result",
        labels=[*labels, "code", "request", "response_code", "result"])
    for (code, result), count in sorted(request_counts().items()):
        request = RequestCode(code).name if code in RequestCode._value2member_map_ else str(code)
        if result == RESULT_ONEWAY:
            outcome = "ONEWAY"
        else:
            outcome = ResponseCode(result).name if result in ResponseCode._value2member_map_ else str(result)
        counter.add_metric([*labels.values(), str(code), request, str(result), outcome], count)
    return counter
