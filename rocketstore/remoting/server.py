"""RemotingServer: accepts connections and serves requests with registered processors."""

from __future__ import annotations

import asyncio
import logging
import socket
from types import TracebackType

from rocketstore.remoting.config import RemotingServerConfig
from rocketstore.remoting.connection import (
    ConnectionListener,
    ConnectionRegistry,
    ProcessorTable,
    RemotingConnection,
    RequestGuard,
    RequestHandler,
)

log = logging.getLogger(__name__)


class RemotingServer:
    """An asyncio server of RocketMQ's remoting protocol.

    ::

        server = RemotingServer(RemotingServerConfig(listen_port=0))
        server.register_processor(RequestCode.GET_ROUTEINFO_BY_TOPIC, route_handler)
        await server.start()
        ... server.port ...
        await server.stop()

    A processor gets the :class:`RemotingConnection` (the context) and the request; see
    :data:`rocketstore.remoting.connection.RequestHandler`. Codes with no processor go to the
    default processor, or are answered REQUEST_CODE_NOT_SUPPORTED. A processor that raises is
    answered SYSTEM_ERROR with the exception as the remark; the connection goes on.
    """

    def __init__(self, config: RemotingServerConfig | None = None) -> None:
        self.config = config or RemotingServerConfig()
        self._processors = ProcessorTable()
        self._registry = ConnectionRegistry(self.config.server_channel_max_idle_time_seconds)
        self._open_listeners: list[ConnectionListener] = []
        self._close_listeners: list[ConnectionListener] = []
        self._server: asyncio.AbstractServer | None = None
        self._address: tuple[str, int] | None = None

    # ---- set-up ----

    def register_processor(self, code: int, handler: RequestHandler) -> None:
        self._processors.register(code, handler)

    def register_default_processor(self, handler: RequestHandler | None) -> None:
        self._processors.default = handler

    def set_request_guard(self, guard: RequestGuard | None) -> None:
        """Check every request with ``guard`` before its processor (see RequestGuard)."""
        self._processors.set_guard(guard)

    def add_connection_listener(
        self,
        on_open: ConnectionListener | None = None,
        on_close: ConnectionListener | None = None,
    ) -> None:
        """Call ``on_open(ctx)`` for each accepted connection, ``on_close(ctx)`` when it is gone
        (closed by either side, idle, or corrupt): the name server drops a broker so."""
        if on_open is not None:
            self._open_listeners.append(on_open)
        if on_close is not None:
            self._close_listeners.append(on_close)

    # ---- life ----

    @property
    def is_serving(self) -> bool:
        return self._server is not None

    @property
    def address(self) -> tuple[str, int]:
        """(host, port) actually bound: with ``listen_port=0`` the port the system chose."""
        if self._address is None:
            raise RuntimeError("the server is not started")
        return self._address

    @property
    def port(self) -> int:
        return self.address[1]

    @property
    def connections(self) -> frozenset[RemotingConnection]:
        return frozenset(self._registry.connections)

    async def start(self) -> None:
        if self._server is not None:
            raise RuntimeError("the server is already started")
        loop = asyncio.get_running_loop()
        limits = self.config.connection_limits()
        self._server = await loop.create_server(
            lambda: RemotingConnection(
                self._processors, limits, on_open=self._opened, on_close=self._closed
            ),
            host=self.config.bind_address,
            port=self.config.listen_port,
            family=socket.AF_UNSPEC,
            backlog=self.config.server_socket_backlog,
            reuse_address=True,
        )
        sockname = self._server.sockets[0].getsockname()
        self._address = (sockname[0], sockname[1])
        self._registry.start()
        log.info("remoting server listening on %s:%d", *self._address)

    async def stop(self, grace: float = 1.0) -> None:
        """Stop accepting, close every connection (flushing for up to ``grace`` seconds)."""
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        self._registry.stop()
        await self._registry.close_all(grace)
        await server.wait_closed()

    async def __aenter__(self) -> RemotingServer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    # ---- connection bookkeeping ----

    def _opened(self, connection: RemotingConnection) -> None:
        self._registry.connections.add(connection)
        for listener in self._open_listeners:
            try:
                listener(connection)
            except Exception:
                log.exception("connection-open listener failed")

    def _closed(self, connection: RemotingConnection) -> None:
        self._registry.connections.discard(connection)
        for listener in self._close_listeners:
            try:
                listener(connection)
            except Exception:
                log.exception("connection-close listener failed")
