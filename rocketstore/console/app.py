"""The console's Starlette application: its settings, its state (one admin client, one
producer for DLQ resends, the chart history) and its routes."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import jinja2
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates
from starlette.types import ASGIApp, Receive, Scope, Send

from rocketstore.client import AsyncAdmin, AsyncProducer, ClientConfig, MQBrokerError, MQClientError
from rocketstore.client.config import ProducerConfig
from rocketstore.common.text import quote
from rocketstore.console import pages
from rocketstore.console.charts import line_chart
from rocketstore.console.history import History, sample_forever
from rocketstore.console.login import (
    COOKIE,
    SESSION_S,
    Account,
    LoginRequired,
    Sessions,
    load_accounts,
    safe_next,
)
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
    #: a plain_acl.yml: people sign in with its accounts, and their requests are signed with them
    acl_file: str | None = None
    #: ``--store PATH``: the store directory served read-only by the broker at
    #: store_broker_addr; the pages show no controls that change anything and POSTs are refused
    store_path: str | None = None
    #: the one broker serving store_path: offset message ids name the store host that wrote
    #: the record, so they are looked up here
    store_broker_addr: str | None = None

    @property
    def read_only(self) -> bool:
        return self.store_path is not None


class ConsoleState:
    """What the request handlers share, made when the application starts: the console's own
    admin client (and the sampler's), and one admin client and DLQ producer per signed-in
    account (started on first use), signing with it."""

    def __init__(self, settings: ConsoleSettings) -> None:
        self.settings = settings
        self.admin = self._new_admin(settings.access_key, settings.secret_key)
        self.history = History()
        self._admins: dict[str, AsyncAdmin] = {}
        self._producers: dict[str | None, AsyncProducer] = {}
        self._lock = asyncio.Lock()

    def _new_admin(self, access_key: str | None, secret_key: str | None) -> AsyncAdmin:
        config = ClientConfig(namesrv_addr=self.settings.namesrv_addr, access_key=access_key,
                              secret_key=secret_key, instance_name="rocketstore-console")
        return AsyncAdmin(config=config, timeout=self.settings.timeout_s)

    @staticmethod
    def _account(request: Request) -> Account | None:
        account: Account | None = getattr(request.state, "account", None)
        return account

    async def admin_of(self, request: Request) -> AsyncAdmin:
        """The admin client of the request's signed-in account, else the console's own."""
        account = self._account(request)
        if account is None:
            return self.admin
        async with self._lock:
            admin = self._admins.get(account.access_key)
            if admin is None:
                admin = self._new_admin(account.access_key, account.secret_key)
                await admin.start()
                self._admins[account.access_key] = admin
            return admin

    async def producer_of(self, request: Request) -> AsyncProducer:
        """The producer of DLQ resends for the request's account, started on first use."""
        account = self._account(request)
        key = account.access_key if account is not None else None
        async with self._lock:
            producer = self._producers.get(key)
            if producer is None:
                config = ProducerConfig(
                    producer_group=RESEND_PRODUCER_GROUP, namesrv_addr=self.settings.namesrv_addr,
                    access_key=account.access_key if account else self.settings.access_key,
                    secret_key=account.secret_key if account else self.settings.secret_key,
                    instance_name="rocketstore-console")
                producer = AsyncProducer(config=config)
                await producer.start()
                self._producers[key] = producer
            return producer

    async def close(self) -> None:
        producers, self._producers = list(self._producers.values()), {}
        admins, self._admins = list(self._admins.values()), {}
        for producer in producers:
            await producer.shutdown()
        for admin in [*admins, self.admin]:
            await admin.shutdown()


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


async def login_page(sessions: Sessions, request: Request) -> Response:
    """GET: the form; POST: an account's accessKey and secretKey, checked against the ACL file."""
    templates: Jinja2Templates = request.app.state.templates
    target = safe_next(request.query_params.get("next", "/cluster"))
    if request.method == "POST":
        form = await pages.form_of(request)
        account = sessions.check_password(form.get("accessKey", ""), form.get("secretKey", ""))
        if account is not None:
            response = RedirectResponse(target, status_code=303)
            response.set_cookie(COOKIE, sessions.cookie(account), max_age=SESSION_S, httponly=True,
                                samesite="strict")
            return response
        log.info("console: sign-in refused for %s", quote(form.get("accessKey", "")))
        return templates.TemplateResponse(request, "login.jinja", {
            "active": "", "next": target, "error": "wrong accessKey or secretKey"})
    return templates.TemplateResponse(request, "login.jinja", {"active": "", "next": target, "error": ""})


async def logout(_request: Request) -> Response:
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(COOKIE)
    return response


class ReadOnlyGuard:
    """``--store``: every POST but signing in and out is refused with a page saying the store
    is opened read-only (the pages show no such forms; this holds for hand-made requests)."""

    ALLOWED = frozenset(("/login", "/logout"))

    def __init__(self, app: ASGIApp, store_path: str) -> None:
        self.app = app
        self.store_path = store_path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] not in ("GET", "HEAD") \
                and scope["path"] not in self.ALLOWED:
            request = Request(scope, receive)
            log.info("console: %s %s refused: the store is opened read-only", scope["method"],
                     quote(scope["path"]))
            response = _render_error(request, 403, f"The store {self.store_path} is opened read-only "
                                     "(rocketstore console --store): nothing can be created, "
                                     "updated, deleted, reset or resent.")
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


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
    middleware = []
    if settings.store_path is not None:
        middleware.append(Middleware(ReadOnlyGuard, store_path=settings.store_path))
    if settings.acl_file is not None:
        sessions = Sessions(load_accounts(settings.acl_file))
        routes += [Route("/login", partial(login_page, sessions), methods=["GET", "POST"]),
                   Route("/logout", logout, methods=["POST"])]
        middleware.append(Middleware(LoginRequired, sessions=sessions))
    app = Starlette(routes=routes, lifespan=lifespan, middleware=middleware, exception_handlers={
        ValueError: _bad_input, MQClientError: _cluster_error, MQBrokerError: _cluster_error,
        OSError: _cluster_error, TimeoutError: _cluster_error})
    # every value escaped: message bodies, keys and properties are whatever producers sent
    templates = Jinja2Templates(env=jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True))
    templates.env.globals["chart"] = line_chart
    templates.env.globals["read_only"] = settings.store_path or ""
    templates.env.filters["ms"] = format_ms
    app.state.templates = templates
    app.state.console = state
    return app

