"""The console's Starlette application: its settings, its state (one admin client, one
producer for DLQ resends, the chart history) and its routes."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import jinja2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from rocketstore.client import AsyncAdmin, AsyncProducer, ClientConfig, MQBrokerError, MQClientError
from rocketstore.client.config import ProducerConfig
from rocketstore.common.text import quote
from rocketstore.console import pages
from rocketstore.console.charts import line_chart
from rocketstore.console.history import History, sample_forever
from rocketstore.console.messages import format_ms

log = logging.getLogger("rocketstore.console")

HERE = Path(__file__).resolve().parent
#: the producer group DLQ resends are sent with
RESEND_PRODUCER_GROUP = "rocketstore-console"


@dataclass(frozen=True)
class ConsoleSettings:
    """What ``rocketstore console`` is given."""

    namesrv_addr: str
    access_key: str | None = None
    secret_key: str | None = None
    #: seconds between the chart samples (broker TPS, watched groups' lag)
    sample_interval_s: float = 10.0
    #: seconds an admin request may take
    timeout_s: float = 5.0


class ConsoleState:
    """What the request handlers share, made when the application starts."""

    def __init__(self, settings: ConsoleSettings) -> None:
        self.settings = settings
        self.client_config = ClientConfig(namesrv_addr=settings.namesrv_addr, access_key=settings.access_key,
                                          secret_key=settings.secret_key, instance_name="rocketstore-console")
        self.admin = AsyncAdmin(config=self.client_config, timeout=settings.timeout_s)
        self.history = History()
        self._producer: AsyncProducer | None = None
        self._producer_lock = asyncio.Lock()

    async def producer(self) -> AsyncProducer:
        """The producer of DLQ resends, started on first use."""
        async with self._producer_lock:
            if self._producer is None:
                config = ProducerConfig(producer_group=RESEND_PRODUCER_GROUP,
                                        namesrv_addr=self.settings.namesrv_addr,
                                        access_key=self.settings.access_key,
                                        secret_key=self.settings.secret_key,
                                        instance_name="rocketstore-console")
                producer = AsyncProducer(config=config)
                await producer.start()
                self._producer = producer
            return self._producer

    async def close(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            await producer.shutdown()
        await self.admin.shutdown()


def _render_error(request: Request, status: int, message: str) -> Response:
    templates: Jinja2Templates = request.app.state.templates
    return templates.TemplateResponse(request, "error.jinja", {"error": message, "active": ""},
                                      status_code=status)


async def _bad_input(request: Request, exc: Exception) -> Response:
    log.info("console: %s %s: %s", request.method, quote(str(request.url.path)), quote(str(exc)))
    return _render_error(request, 400, str(exc))


async def _cluster_error(request: Request, exc: Exception) -> Response:
    log.info("console: %s %s: %s", request.method, quote(str(request.url.path)), quote(str(exc)))
    return _render_error(request, 502, f"{type(exc).__name__}: {exc}")


async def _favicon(_request: Request) -> Response:
    return Response(status_code=204)


async def _index(_request: Request) -> Response:
    return RedirectResponse("/cluster", status_code=302)


def create_app(settings: ConsoleSettings) -> Starlette:
    """The console for the cluster behind ``settings.namesrv_addr``."""
    state = ConsoleState(settings)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await state.admin.start()
        sampler = asyncio.create_task(sample_forever(
            state.history, lambda history: pages.sample(history, state.admin), settings.sample_interval_s))
        sampler.set_name("rocketstore-console-sampler")
        app.state.console = state
        try:
            yield
        finally:
            sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sampler
            await state.close()

    routes = [
        Route("/", _index),
        Route("/favicon.ico", _favicon),
        Route("/cluster", pages.cluster),
        Route("/topics", pages.topics, methods=["GET", "POST"]),
        Route("/topics/{topic}", pages.topic, methods=["GET"]),
        Route("/topics/{topic}/delete", pages.delete_topic, methods=["POST"]),
        Route("/groups", pages.groups),
        Route("/groups/{group}", pages.group),
        Route("/groups/{group}/reset", pages.reset_offsets, methods=["POST"]),
        Route("/messages", pages.messages),
        Route("/messages/{msg_id}", pages.message),
        Route("/dlq", pages.dlq),
        Route("/dlq/resend", pages.resend, methods=["POST"]),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={
        ValueError: _bad_input, MQClientError: _cluster_error, MQBrokerError: _cluster_error,
        OSError: _cluster_error, TimeoutError: _cluster_error})
    # every value escaped: message bodies, keys and properties are whatever producers sent
    templates = Jinja2Templates(env=jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True))
    templates.env.globals["chart"] = line_chart
    templates.env.filters["ms"] = format_ms
    app.state.templates = templates
    app.state.console = state
    return app

