"""RemotingClient: connections to many addresses, requests and their responses."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from types import TracebackType
from typing import Any

from rocketstore.remoting.command import RemotingCommand
from rocketstore.remoting.config import RemotingClientConfig, parse_address
from rocketstore.remoting.connection import (
    ConnectionRegistry,
    ProcessorTable,
    RemotingConnection,
    RequestHandler,
)
from rocketstore.remoting.errors import RemotingConnectError, RemotingTimeoutError

log = logging.getLogger(__name__)

#: ``callback(response, error)``: exactly one of them is None.
InvokeCallback = Callable[[RemotingCommand | None, BaseException | None], None]
#: ``hook(request)`` before a request is sent (e.g. SessionCredentials signing it).
RequestHook = Callable[[RemotingCommand], None]
#: ``listener(address, connection)`` once a connection to ``address`` is gone.
ClientConnectionListener = Callable[[str, RemotingConnection], None]


def connected_to_itself(transport: asyncio.BaseTransport | None) -> bool:
    """Whether a TCP connection's two ends are one socket: a connect to a loopback port
    nobody listens on can be given that very port as its own (TCP simultaneous open). The
    connection then holds the port, so the server it was meant for cannot listen there again;
    it must be closed at once."""
    if transport is None:
        return False
    local, peer = transport.get_extra_info("sockname"), transport.get_extra_info("peername")
    return local is not None and local == peer


class RemotingClient:
    """A client of RocketMQ's remoting protocol, for any number of servers.

    Addresses are ``"host:port"`` strings, as RocketMQ writes them. Connections are opened on
    first use and kept (``connections_per_address`` of them, round robin) until they close or
    idle out. Processors registered here serve the requests servers send to us
    (NOTIFY_CONSUMER_IDS_CHANGED, CHECK_TRANSACTION_STATE, ...), with the same contract as the
    server's. Timeouts are in seconds.
    """

    def __init__(self, config: RemotingClientConfig | None = None, *,
                 rpc_hook: RequestHook | None = None) -> None:
        self.config = config or RemotingClientConfig()
        #: called with every request before it is sent (RocketMQ's RPCHook.doBeforeRequest):
        #: an ACL client's SessionCredentials add AccessKey and Signature
        self.rpc_hook = rpc_hook
        self._processors = ProcessorTable()
        self._registry = ConnectionRegistry(self.config.client_channel_max_idle_time_seconds)
        self._by_address: dict[str, list[RemotingConnection]] = {}
        self._connecting: dict[str, asyncio.Future[RemotingConnection]] = {}
        self._round_robin: dict[str, int] = {}
        self._close_listeners: list[ClientConnectionListener] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closed = False

    # ---- set-up ----

    def register_processor(self, code: int, handler: RequestHandler) -> None:
        self._processors.register(code, handler)

    def register_default_processor(self, handler: RequestHandler | None) -> None:
        self._processors.default = handler

    def add_connection_closed_listener(self, listener: ClientConnectionListener) -> None:
        self._close_listeners.append(listener)

    # ---- connections ----

    async def get_connection(self, address: str, timeout: float | None = None) -> RemotingConnection:
        """An open connection to ``address``, connecting when there is none (or too few)."""
        if self._closed:
            raise RemotingConnectError("the client is closed")
        connections = [c for c in self._by_address.get(address, ()) if not c.is_closed]
        if connections and len(connections) >= self.config.connections_per_address:
            index = self._round_robin.get(address, 0)
            self._round_robin[address] = index + 1
            return connections[index % len(connections)]
        pending = self._connecting.get(address)
        if pending is None:
            pending = asyncio.ensure_future(self._connect(address, timeout))
            self._connecting[address] = pending
            pending.add_done_callback(lambda _: self._connecting.pop(address, None))
        return await asyncio.shield(pending)

    async def _connect(self, address: str, timeout: float | None) -> RemotingConnection:
        host, port = parse_address(address)
        connect_timeout = self.config.connect_timeout_millis / 1000
        if timeout is not None:
            connect_timeout = min(connect_timeout, timeout)
        self._registry.start()
        loop = asyncio.get_running_loop()
        limits = self.config.connection_limits()

        def on_close(connection: RemotingConnection) -> None:
            self._forget(address, connection)

        try:
            transport, connection = await asyncio.wait_for(
                loop.create_connection(
                    lambda: RemotingConnection(self._processors, limits, on_close=on_close),
                    host=host,
                    port=port,
                ),
                connect_timeout,
            )
        except asyncio.TimeoutError:
            raise RemotingConnectError(f"connect to {address} timed out after {connect_timeout:g} s") from None
        except OSError as exc:
            raise RemotingConnectError(f"connect to {address} failed: {exc}") from exc
        if connected_to_itself(transport):
            connection.close()
            raise RemotingConnectError(f"connect to {address}: connected to itself (nothing "
                                       "listens there and the port is in the ephemeral range)")
        if self._closed:
            connection.close()
            raise RemotingConnectError("the client was closed while connecting")
        self._registry.connections.add(connection)
        self._by_address.setdefault(address, []).append(connection)
        return connection

    def _forget(self, address: str, connection: RemotingConnection) -> None:
        self._registry.connections.discard(connection)
        connections = self._by_address.get(address)
        if connections and connection in connections:
            connections.remove(connection)
            if not connections:
                del self._by_address[address]
        for listener in self._close_listeners:
            try:
                listener(address, connection)
            except Exception:
                log.exception("connection-closed listener failed")

    def close_connection(self, address: str) -> None:
        for connection in list(self._by_address.get(address, ())):
            connection.close()

    @property
    def addresses(self) -> list[str]:
        """Addresses with an open connection."""
        return list(self._by_address)

    # ---- requests ----

    async def invoke(self, address: str, request: RemotingCommand, timeout: float = 3.0) -> RemotingCommand:
        """Send ``request`` to ``address`` and return its response; ``timeout`` covers the
        connect too. Raises RemotingConnectError, RemotingTimeoutError or
        RemotingSendRequestError; a response with an error code is returned, not raised."""
        if self.rpc_hook is not None:
            self.rpc_hook(request)
        connections = self._by_address.get(address)
        if connections is not None and len(connections) >= self.config.connections_per_address:
            index = self._round_robin.get(address, 0)
            self._round_robin[address] = index + 1
            connection = connections[index % len(connections)]
            if not connection.is_closed:
                return await connection.invoke(request, timeout)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        connection = await self.get_connection(address, timeout)
        remaining = deadline - loop.time()
        if remaining <= 0:
            raise RemotingTimeoutError(f"connect to {address} used the whole {timeout:g} s timeout")
        return await connection.invoke(request, remaining)

    async def invoke_oneway(self, address: str, request: RemotingCommand, timeout: float = 3.0) -> None:
        """Send ``request`` with the oneway flag (``timeout`` bounds the connect)."""
        if self.rpc_hook is not None:
            self.rpc_hook(request)
        connection = await self.get_connection(address, timeout)
        connection.invoke_oneway(request)

    def invoke_async(
        self,
        address: str,
        request: RemotingCommand,
        timeout: float,
        callback: InvokeCallback,
    ) -> asyncio.Task[None]:
        """Send ``request`` now and call ``callback(response, None)`` or ``callback(None,
        error)`` later, on the event loop. Returns the task (cancel it to give up)."""

        async def run() -> None:
            try:
                response = await self.invoke(address, request, timeout)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                callback(None, exc)
            else:
                callback(response, None)

        task = asyncio.ensure_future(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # ---- life ----

    async def close(self, grace: float = 1.0) -> None:
        self._closed = True
        self._registry.stop()
        for pending in list(self._connecting.values()):
            pending.cancel()
        for task in list(self._tasks):
            task.cancel()
        await self._registry.close_all(grace)

    async def __aenter__(self) -> RemotingClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
