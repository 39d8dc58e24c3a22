"""One remoting connection, the same on both ends: frames in, commands dispatched, replies out.

A :class:`RemotingConnection` is the asyncio protocol of a socket, on the server's side or the
client's. It decodes frames, resolves the futures of its own requests by ``opaque``, hands
requests to the registered processors, and writes commands without joining large bodies. It is
also what a processor receives as its context: ``ctx.remote_address``, ``ctx.attributes``,
``await ctx.invoke(request)`` to ask the peer something, ``ctx.send_response(...)`` to answer
later (a held long-poll), ``ctx.close()``.

Back-pressure: when the transport's write buffer passes its high-water mark (replies not read
by the peer), or too many requests are being processed, the connection stops reading; it reads
again below the low-water mark. A connection that has neither read nor written anything for the
idle time is closed by its owner's :class:`ConnectionRegistry` sweep; a connection paused by a
peer that never reads makes no progress, so the same sweep drops it.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import sys
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, cast

from rocketstore.remoting._pump import ReplyFlusher, RequestPump, count_answer
from rocketstore.remoting.codec import MAX_FRAME_BYTES, FrameDecoder, FrameWriter
from rocketstore.remoting.codes import (
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    ResponseCode,
    SerializeType,
    describe_request,
)
from rocketstore.remoting.command import RemotingCommand, create_response
from rocketstore.remoting.errors import (
    FrameError,
    HeaderError,
    RemotingSendRequestError,
    RemotingTimeoutError,
)
from rocketstore.remoting.headers import HeaderFieldError
from rocketstore.remoting.response_table import ResponseTable

log = logging.getLogger(__name__)

HandlerResult = RemotingCommand | None | Awaitable[RemotingCommand | None]
#: A request processor: ``async def handler(ctx, request) -> RemotingCommand | None``. A plain
#: function works too and is cheaper (no task): it may return the response, None (no response
#: now: answer later with ``ctx.send_response``, or never for oneway requests), or an awaitable
#: of either (e.g. a future that the store's threads resolve).
RequestHandler = Callable[["RemotingConnection", RemotingCommand], HandlerResult]
#: ``guard(ctx, request)`` before every processor: None lets the request through, a response
#: refuses it (RocketMQ's server RPCHook.doBeforeRequest; the broker's ACL check)
RequestGuard = Callable[["RemotingConnection", RemotingCommand], "RemotingCommand | None"]
ConnectionListener = Callable[["RemotingConnection"], None]

_OPAQUE_MASK = 0x7FFFFFFF
_PAUSED_BY_WRITES = 1
_PAUSED_BY_INFLIGHT = 2


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """What bounds one connection's memory and life (set from the server or client config)."""

    max_frame_bytes: int = MAX_FRAME_BYTES
    write_buffer_high_water_mark: int = 1024 * 1024
    write_buffer_low_water_mark: int = 256 * 1024
    max_inflight_requests: int = 10_000
    idle_timeout: float = 120.0


class ProcessorTable:
    """Request code -> processor, with a default for codes nobody registered."""

    __slots__ = ("handlers", "_default", "_guard", "_unguarded")

    def __init__(self) -> None:
        #: Read by every connection on every request (the dict itself, not a copy).
        self.handlers: dict[int, RequestHandler] = {}
        self._default: RequestHandler | None = None
        self._guard: RequestGuard | None = None
        self._unguarded: dict[int, RequestHandler] = {}

    def register(self, code: int, handler: RequestHandler) -> None:
        if not callable(handler):
            raise TypeError(f"processor for {describe_request(code)} is not callable: {handler!r}")
        self._unguarded[int(code)] = handler
        self.handlers[int(code)] = self._guarded(handler)

    @property
    def default(self) -> RequestHandler | None:
        return self._default

    @default.setter
    def default(self, handler: RequestHandler | None) -> None:
        self._unguarded[-1] = handler  # type: ignore[assignment]
        self._default = None if handler is None else self._guarded(handler)

    def set_guard(self, guard: RequestGuard | None) -> None:
        """Run ``guard`` before every processor, those registered later too (None: no guard;
        without one a request costs nothing more)."""
        self._guard = guard
        for code, handler in self._unguarded.items():
            if code == -1:
                self._default = None if handler is None else self._guarded(handler)
            else:
                self.handlers[code] = self._guarded(handler)

    def _guarded(self, handler: RequestHandler) -> RequestHandler:
        guard = self._guard
        if guard is None:
            return handler

        def guarded(ctx: RemotingConnection, request: RemotingCommand) -> HandlerResult:
            refusal = guard(ctx, request)
            return handler(ctx, request) if refusal is None else refusal

        return guarded

    def get(self, code: int) -> RequestHandler | None:
        return self.handlers.get(code, self.default)


def _writelines_is_zero_copy(transport: asyncio.BaseTransport) -> bool:
    """uvloop's writelines is a writev, and so is CPython's selector transport's from 3.12 on;
    before that CPython's joins its buffers, so we write them one by one instead."""
    return type(transport).__module__.startswith("uvloop") or sys.version_info >= (3, 12)


def format_address(peer: Any) -> str:
    """``"127.0.0.1:10911"`` / ``"[::1]:10911"``, as RocketMQ prints channel addresses."""
    if isinstance(peer, tuple) and len(peer) >= 2:
        host, port = peer[0], peer[1]
        return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
    return str(peer)


#: one ReplyFlusher per loop: it writes every connection's replies given outside a read
_flushers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, ReplyFlusher] = \
    weakref.WeakKeyDictionary()


def _flusher_of(loop: asyncio.AbstractEventLoop) -> ReplyFlusher:
    flusher = _flushers.get(loop)
    if flusher is None:
        flusher = _flushers[loop] = ReplyFlusher(loop)
    return flusher


class RemotingConnection(asyncio.Protocol):
    """One socket speaking RocketMQ's remoting protocol (see the module's docstring)."""

    def __init__(
        self,
        processors: ProcessorTable,
        limits: ConnectionLimits,
        *,
        on_open: ConnectionListener | None = None,
        on_close: ConnectionListener | None = None,
    ) -> None:
        self._limits = limits
        self._on_open = on_open
        self._on_close = on_close
        self._decoder = FrameDecoder(limits.max_frame_bytes)
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._zero_copy_writelines = False
        self._opaques = itertools.count(1)
        self._pending = ResponseTable(self._loop, lambda: self.remote_address)
        self._tasks: set[asyncio.Future[Any]] = set()
        self._paused_reading = 0
        self._closed = False
        #: why the stream was given up, told to the requests still waiting on it
        self._close_reason = ""
        self._writer = FrameWriter()
        self._high_water_mark = limits.write_buffer_high_water_mark
        # replies go to the transport every quarter of the high-water mark: it pauses this
        # connection once past the mark, so at most a quarter (and a reply) more is buffered
        self._flush_bytes = max(1, self._high_water_mark // 4)
        #: dispatches requests; keeps the in-flight count and the reply-flush state
        self._pump = RequestPump(self, processors, self._writer, self._flush_bytes,
                                 limits.max_inflight_requests, _flusher_of(self._loop))
        self._backlog: list[RemotingCommand | HeaderError] = []
        #: Clear while the peer is not reading what we write: new requests wait for it.
        self._writable = asyncio.Event()
        self._writable.set()
        self._write_paused = False
        self.remote_address = ""
        self.local_address = ""
        #: When something was last read or written (loop time): the idle sweep's clock.
        self.last_activity = self._loop.time()
        #: When the bytes of the requests being dispatched were read (loop time). Requests
        #: held back by a pause are dispatched later, so a processor can tell how long one
        #: waited (a broker answers a send that waited too long SYSTEM_BUSY).
        self.received_at = self.last_activity
        #: Free for the owner's use: a broker keeps a client's id, a name server its broker.
        self.attributes: dict[str, Any] = {}

    # ---- state ----

    @property
    def is_closed(self) -> bool:
        return self._closed

    @property
    def is_reading_paused(self) -> bool:
        return self._paused_reading != 0

    @property
    def pending_requests(self) -> int:
        """Our requests on this connection still waiting for their response."""
        return len(self._pending)

    @property
    def inflight_requests(self) -> int:
        """The peer's requests being processed here."""
        return self._pump.inflight

    @property
    def write_buffer_size(self) -> int:
        transport = self._transport
        return transport.get_write_buffer_size() if transport is not None else 0

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<RemotingConnection {self.local_address} -> {self.remote_address} {state}>"

    # ---- asyncio.Protocol ----

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, only alike.
        transport = cast(asyncio.Transport, transport)
        self._transport = transport
        self._zero_copy_writelines = _writelines_is_zero_copy(transport)
        transport.set_write_buffer_limits(
            high=self._limits.write_buffer_high_water_mark,
            low=self._limits.write_buffer_low_water_mark,
        )
        self.remote_address = format_address(transport.get_extra_info("peername"))
        self.local_address = format_address(transport.get_extra_info("sockname"))
        self.last_activity = self._loop.time()
        if self._on_open is not None:
            try:
                self._on_open(self)
            except Exception:
                log.exception("connection-open listener failed for %s", self.remote_address)

    def data_received(self, data: bytes) -> None:
        self.last_activity = self.received_at = self._loop.time()
        try:
            items = self._decoder.feed(data)
        except FrameError as exc:
            log.warning("closing %s: %s", self.remote_address, exc)
            self._close_reason = str(exc)
            self._close_after_error()
            return
        except Exception:  # a decoder bug: this connection's stream cannot be trusted
            log.exception("closing %s: its bytes could not be decoded", self.remote_address)
            self._close_after_error()
            return
        if self._backlog:  # earlier commands wait for a pause to end: these go after them
            self._backlog.extend(items)
            self._process_backlog()
        elif items:
            self._dispatch(items)

    def _dispatch(self, items: list[RemotingCommand | HeaderError]) -> None:
        """Dispatch decoded commands until done or paused: a pause stops even inside one read,
        so a burst of requests with large replies cannot queue more than about one high-water
        mark of replies. What is left waits in the backlog (one read's worth at most, as
        reading stops). Replies made meanwhile go out in one write at the end."""
        pump = self._pump
        pump.receiving = True
        try:
            taken = pump.dispatch(items)
            if taken < len(items) and not self._closed:
                self._backlog.extend(items[taken:])
        finally:
            pump.receiving = False
            if self._writer.nbytes:
                self.flush()

    def _process_backlog(self) -> None:
        items, self._backlog = self._backlog, []
        self._dispatch(items)

    def eof_received(self) -> bool:
        return False  # close our side too

    def pause_writing(self) -> None:
        self._write_paused = True
        self._writable.clear()
        self._pause_reading(_PAUSED_BY_WRITES)

    def resume_writing(self) -> None:
        self.last_activity = self._loop.time()
        self._write_paused = False
        self._writable.set()
        self._resume_reading(_PAUSED_BY_WRITES)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._closed and self._transport is None:
            return
        self._closed = self._pump.closed = True
        self._transport = None
        self._write_paused = False
        self._writable.set()  # waiters wake up to find the connection closed
        reason = f": {self._close_reason}" if self._close_reason else ""
        self._pending.fail_all(lambda: RemotingSendRequestError(f"connection to {self.remote_address} closed{reason}"))
        for task in list(self._tasks):
            task.cancel()
        if self._on_close is not None:
            try:
                self._on_close(self)
            except Exception:
                log.exception("connection-close listener failed for %s", self.remote_address)

    # ---- flow control ----

    def _pause_reading(self, reason: int) -> None:
        if not self._paused_reading and self._transport is not None:
            try:
                self._transport.pause_reading()
            except RuntimeError:  # closing
                pass
        self._paused_reading |= reason
        self._pump.paused = True
        self._pump.inflight_paused = bool(self._paused_reading & _PAUSED_BY_INFLIGHT)

    def _resume_reading(self, reason: int) -> None:
        if not self._paused_reading & reason:
            return
        self._paused_reading &= ~reason
        self._pump.paused = self._paused_reading != 0
        self._pump.inflight_paused = bool(self._paused_reading & _PAUSED_BY_INFLIGHT)
        if self._paused_reading or self._closed:
            return
        if self._backlog:
            self._process_backlog()  # may pause again
        if not self._paused_reading and self._transport is not None and not self._closed:
            try:
                self._transport.resume_reading()
            except RuntimeError:
                pass

    # ---- writing ----

    def _write(self, cmd: RemotingCommand) -> None:
        """Encode ``cmd`` and queue it; encoding errors propagate, a closed connection raises.

        Frames are written in batches: those made while a read is processed go out in one
        write when it ends, others at the next loop iteration. One syscall then carries many
        small replies, while large bodies still go to the socket without being copied.
        """
        if self._transport is None or self._closed:
            raise RemotingSendRequestError(f"connection to {self.remote_address} is closed")
        if self._writer.add(cmd) >= self._flush_bytes:
            self.flush()  # now: the transport then tells whether to pause
        else:
            pump = self._pump
            if not pump.receiving and not pump.flush_scheduled:
                pump.schedule_flush()

    def flush(self) -> None:
        """Write what is queued now."""
        self._pump.flush_scheduled = False
        transport = self._transport
        if transport is None or not self._writer.nbytes:
            return
        buffers = self._writer.take()
        self.last_activity = self._loop.time()
        if len(buffers) == 1:
            transport.write(buffers[0])
        elif self._zero_copy_writelines:
            transport.writelines(buffers)
        else:
            for buffer in buffers:
                transport.write(buffer)

    def send_response(self, request: RemotingCommand, response: RemotingCommand) -> None:
        """Answer ``request`` (now or later: a held long-poll). Nothing is sent for a oneway
        request or on a closed connection; a response that cannot be encoded is replaced by a
        SYSTEM_ERROR naming the reason."""
        if request.flag & FLAG_ONEWAY or self._closed:
            return
        response.opaque = request.opaque
        response.flag |= FLAG_RESPONSE
        response.serialize_type = request.serialize_type
        try:
            self._write(response)
            count_answer(request.code, response.code)
        except RemotingSendRequestError:
            pass
        except Exception as exc:  # ValueError, struct.error, orjson.JSONEncodeError
            self.send_error(request, ResponseCode.SYSTEM_ERROR, f"response not encodable: {exc}")

    def send_frame(self, request: RemotingCommand, frame: bytes) -> None:
        """Answer ``request`` with a SUCCESS reply already encoded as a whole frame (made from a
        template, its opaque and serialize type the request's); nothing is sent for a oneway
        request or on a closed connection."""
        if self._transport is not None:
            self._pump.add_frame(request, frame)

    def send_error(self, request: RemotingCommand, code: int, remark: str) -> None:
        """Answer ``request`` with ``code`` and ``remark`` (nothing for a oneway request or on
        a closed connection)."""
        if request.flag & FLAG_ONEWAY or self._closed:
            return
        response = create_response(request, code, remark)
        try:
            self._write(response)
            count_answer(request.code, code)
        except Exception:
            log.exception("could not send an error response to %s", self.remote_address)

    # ---- our requests ----

    def _next_opaque(self) -> int:
        opaque = next(self._opaques) & _OPAQUE_MASK
        while opaque in self._pending:  # only after 2**31 requests with one still waiting
            opaque = next(self._opaques) & _OPAQUE_MASK
        return opaque

    async def invoke(self, request: RemotingCommand, timeout: float = 3.0) -> RemotingCommand:
        """Send ``request`` and wait for its response (any response code: the caller judges).

        Raises RemotingTimeoutError after ``timeout`` seconds, RemotingSendRequestError when
        the connection is or becomes closed. The request's ``opaque`` is set here. While the
        peer does not read what we already wrote, the request waits (within its timeout)
        instead of growing the write buffer.
        """
        if self._write_paused:
            started = self._loop.time()
            try:
                await asyncio.wait_for(self._writable.wait(), timeout)
            except asyncio.TimeoutError:
                raise RemotingTimeoutError(
                    f"{self.remote_address} read none of our requests for {timeout:g} s"
                ) from None
            timeout -= self._loop.time() - started
        if self._closed:
            raise RemotingSendRequestError(f"connection to {self.remote_address} is closed")
        opaque = self._next_opaque()
        request.opaque = opaque
        request.flag &= ~(FLAG_RESPONSE | FLAG_ONEWAY)
        future: asyncio.Future[RemotingCommand] = self._loop.create_future()
        self._pending.add(opaque, future, timeout)
        try:
            self._write(request)
            return await future
        except BaseException:  # not written, cancelled, timed out: forget it
            self._pending.pop(opaque)
            raise

    def invoke_oneway(self, request: RemotingCommand) -> None:
        """Send ``request`` with the oneway flag; nothing comes back."""
        request.opaque = self._next_opaque()
        request.flag = (request.flag | FLAG_ONEWAY) & ~FLAG_RESPONSE
        self._write(request)

    def on_response(self, response: RemotingCommand) -> None:
        """The peer's reply to one of our requests."""
        future = self._pending.pop(response.opaque)
        if future is None:
            log.debug("response from %s to unknown opaque %d (timed out?)", self.remote_address, response.opaque)
        elif not future.done():
            future.set_result(response)

    # ---- the peer's requests ----

    # The pump (remoting/_pump.pyx) dispatches every request; these are what it hands back.

    def on_unhandled_request(self, request: RemotingCommand) -> None:
        """A request no processor serves: REQUEST_CODE_NOT_SUPPORTED."""
        self.send_error(
            request,
            ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
            f" request type {request.code} not supported",
        )

    def on_async_result(self, request: RemotingCommand, result: HandlerResult) -> None:
        """A processor's result other than None: a reply or an awaitable of one (the pump
        binds a DeferredReply itself)."""
        if isinstance(result, RemotingCommand):
            self.send_response(request, result)
            return
        try:
            future = asyncio.ensure_future(result)
        except TypeError as exc:
            self.on_handler_error(request, exc)
            return
        if future is not result:
            # Our task (the handler's coroutine): cancelled if the connection closes. A future
            # the handler handed back belongs to someone else (a group commit shared by many
            # requests) and is left alone.
            self._tasks.add(future)
        self._pump.request_started()
        future.add_done_callback(lambda done: self._handler_done(request, done))

    def pause_for_inflight(self) -> None:
        """The pump: max_inflight_requests are in flight; read no more until half are done."""
        self._pause_reading(_PAUSED_BY_INFLIGHT)

    def resume_after_inflight(self) -> None:
        """The pump: half the in-flight requests are done; read again."""
        self._resume_reading(_PAUSED_BY_INFLIGHT)

    def deferred_outcome(self, request: RemotingCommand, outcome: Any) -> None:
        """A DeferredReply's outcome other than a frame or None (the pump writes those)."""
        if isinstance(outcome, BaseException):
            self.on_handler_error(request, outcome)
        elif isinstance(outcome, RemotingCommand):
            self.send_response(request, outcome)
        else:
            self.on_handler_error(request, TypeError(f"processor returned {type(outcome).__name__}"))

    def _handler_done(self, request: RemotingCommand, done: asyncio.Future[Any]) -> None:
        self._tasks.discard(done)
        self._pump.request_done()
        if done.cancelled():
            return
        exc = done.exception()
        if exc is not None:
            self.on_handler_error(request, exc)
            return
        response = done.result()
        if response is None:
            return
        if not isinstance(response, RemotingCommand):
            self.on_handler_error(request, TypeError(f"processor returned {type(response).__name__}"))
            return
        self.send_response(request, response)

    def on_handler_error(self, request: RemotingCommand, exc: BaseException) -> None:
        """A processor raised: logged, and answered SYSTEM_ERROR naming the exception."""
        if isinstance(exc, HeaderFieldError):
            log.info("bad %s request from %s: %s", describe_request(request.code), self.remote_address, exc)
        else:
            log.error(
                "processor of %s failed for %s",
                describe_request(request.code),
                self.remote_address,
                exc_info=(type(exc), exc, exc.__traceback__),
            )
        self.send_error(request, ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")

    def on_malformed(self, error: HeaderError) -> None:
        """A frame whose header could not be decoded: answered when it can be, else the
        connection is closed."""
        flag = error.flag or 0
        if error.opaque is None:
            # Nobody can be answered: the peer is confused, drop it.
            log.warning("closing %s: %s", self.remote_address, error)
            self._close_after_error()
            return
        if flag & FLAG_RESPONSE:
            future = self._pending.pop(error.opaque)
            if future is not None and not future.done():
                future.set_exception(error)
            return
        if not flag & FLAG_ONEWAY:
            log.info("malformed request from %s: %s", self.remote_address, error)
            response = RemotingCommand(
                code=ResponseCode.SYSTEM_ERROR,
                opaque=error.opaque,
                flag=FLAG_RESPONSE,
                remark=f"malformed header: {error}",
                serialize_type=error.serialize_type if error.serialize_type in (0, 1) else SerializeType.JSON,
            )
            try:
                self._write(response)
            except Exception:
                log.exception("could not answer a malformed request from %s", self.remote_address)

    # ---- closing ----

    def _close_after_error(self) -> None:
        self.close()  # what was already answered is still sent

    def close(self) -> None:
        """Close after writing what is queued and buffered."""
        self._closed = self._pump.closed = True
        if self._transport is not None:
            self.flush()
            self._transport.close()

    def abort(self) -> None:
        """Close now, dropping what is queued and buffered (a peer that does not read)."""
        self._closed = self._pump.closed = True
        self._writer.clear()
        self._backlog.clear()
        if self._transport is not None:
            self._transport.abort()

    def close_if_idle(self, now: float, idle_timeout: float) -> bool:
        """Close the connection when nothing moved on it for ``idle_timeout`` seconds."""
        if now - self.last_activity < idle_timeout or self._transport is None:
            return False
        log.info("closing idle connection %s (%.1f s without traffic)", self.remote_address, now - self.last_activity)
        if self.write_buffer_size:
            self.abort()
        else:
            self.close()
        return True


class ConnectionRegistry:
    """The open connections of a server or client, and the sweep that closes idle ones."""

    def __init__(self, idle_timeout: float) -> None:
        if idle_timeout <= 0:
            raise ValueError(f"idle timeout must be positive, got {idle_timeout}")
        self.idle_timeout = idle_timeout
        self.connections: set[RemotingConnection] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._interval = min(max(idle_timeout / 4, 0.05), 10.0)

    def start(self) -> None:
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self._interval, self._sweep)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _sweep(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        for connection in list(self.connections):
            connection.close_if_idle(now, self.idle_timeout)
        self._timer = loop.call_later(self._interval, self._sweep)

    async def close_all(self, grace: float = 1.0) -> None:
        """Close every connection, and abort those still open after ``grace`` seconds."""
        connections = list(self.connections)
        for connection in connections:
            connection.close()
        deadline = asyncio.get_running_loop().time() + grace
        while self.connections and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)
        for connection in list(self.connections):
            connection.abort()
        # connection_lost runs on the next loop iterations after an abort.
        for _ in range(10):
            if not self.connections:
                break
            await asyncio.sleep(0)
