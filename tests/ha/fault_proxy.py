"""A TCP proxy on 127.0.0.1 that a test controls, for network faults between brokers (a
slave's HAClient and its master's HA port, a broker and its controller).

The proxy runs its own event loop in a daemon thread; the test changes each direction's
behaviour from its own thread at any moment:

- ``drop``: stop forwarding and discard what arrives (the connection stays open; what is lost
  is lost: the receiver sees a gap when forwarding resumes). With a framer, dropping starts and
  ends at frame boundaries (whole frames go missing, as messages on a lossy link);
- ``delay_ms``: forward each chunk that long after it arrived (order kept);
- ``cut_mid_frame(n)``: close the connection after forwarding the first n bytes of the next
  frame longer than n (frames as ``framer`` delimits them: :func:`ha_frame_length`,
  :func:`ha_report_length`, :func:`remoting_frame_length`);
- a one-way partition is ``drop`` on one direction only (:meth:`FaultProxy.partition`);
- ``inject(direction, data)``: write bytes of the test's own into every open connection, between
  the forwarded chunks (bad frames for fuzzing).

``refuse`` closes new connections at once (no peer connected), ``reset()`` closes the current
ones; ``heal()`` lifts every fault. Directions are named from the proxy's view: ``up`` is
client -> target (a slave's reports, a broker's requests), ``down`` target -> client (a
master's frames, a controller's answers).
"""

from __future__ import annotations

import asyncio
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

#: Given the first bytes of a frame (at least ``header`` of them), its whole length.
Framer = Callable[[bytes], int]


@dataclass(frozen=True)
class FrameFormat:
    header: int
    length: Framer


def _ha_frame(head: bytes) -> int:
    return 12 + max(0, struct.unpack_from(">i", head, 8)[0])


def _remoting_frame(head: bytes) -> int:
    return 4 + max(0, struct.unpack_from(">i", head, 0)[0])


#: master -> slave on an HA connection: phyOffset int64, bodySize int32, body
ha_frame_length = FrameFormat(12, _ha_frame)
#: slave -> master: a bare int64
ha_report_length = FrameFormat(8, lambda head: 8)
#: RocketMQ remoting: length int32, then that many bytes
remoting_frame_length = FrameFormat(4, _remoting_frame)


@dataclass
class Direction:
    """One direction's faults and what went through it."""

    framer: FrameFormat | None = None
    drop: bool = False
    delay_ms: int = 0
    #: close after forwarding this many bytes of the next frame longer than it (None: off)
    cut_at: int | None = None
    forwarded: int = 0
    dropped: int = 0
    cuts: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


class _Frames:
    """Where one connection's direction is in its frames."""

    def __init__(self, framer: FrameFormat) -> None:
        self.framer = framer
        self.head = b""         # the current frame's header bytes seen so far
        self.length = -1        # the current frame's whole length (-1: header not complete)
        self.at = 0             # bytes of the current frame seen

    def feed(self, data: bytes, cut_at: int | None) -> tuple[list[int], int | None]:
        """Feed data: the indexes in data where frames start, and the index after which the
        stream must be closed (cut_at bytes into the first frame longer than that) or None."""
        starts: list[int] = []
        i = 0
        while i < len(data):
            if self.length < 0:
                if not self.head:
                    starts.append(i)
                take = data[i:i + self.framer.header - len(self.head)]
                self.head += take
                if len(self.head) == self.framer.header:
                    self.length = self.framer.length(self.head)
            else:
                take = data[i:i + self.length - self.at]
            if cut_at is not None and self.length > cut_at \
                    and self.at < cut_at <= self.at + len(take):
                return starts, i + cut_at - self.at
            self.at += len(take)
            i += len(take)
            if self.length >= 0 and self.at >= self.length:
                self.head, self.length, self.at = b"", -1, 0
        return starts, None


class FaultProxy:
    """Listens on 127.0.0.1 (``port``), forwards each connection to ``target`` ("host:port").
    ``start()`` / ``stop()``, or use it as a context manager."""

    def __init__(self, target: str, *, up: FrameFormat | None = None,
                 down: FrameFormat | None = None) -> None:
        host, _, port = target.rpartition(":")
        self.target = (host, int(port))
        self.up = Direction(framer=up)
        self.down = Direction(framer=down)
        self.refuse = False
        self.port = 0
        self.accepted = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        #: each open connection's (client side, target side)
        self._pairs: list[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = []
        self._ready = threading.Event()
        self._stopped: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._main, daemon=True, name="fault-proxy")

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    # ---- control (any thread) ----------------------------------------------------------------
    def partition(self, direction: str) -> None:
        """Forward only the other direction ("up" or "down" is discarded)."""
        getattr(self, direction).drop = True

    def cut_mid_frame(self, direction: str, at: int) -> None:
        """Close the connection once ``at`` bytes of the next frame longer than that went
        through ``direction``."""
        d: Direction = getattr(self, direction)
        if d.framer is None:
            raise ValueError(f"the {direction} direction has no framer: cannot cut mid-frame")
        d.cut_at = at

    def heal(self) -> None:
        for d in (self.up, self.down):
            d.drop, d.delay_ms, d.cut_at = False, 0, None
        self.refuse = False

    def inject(self, direction: str, data: bytes) -> int:
        """Write data into ``direction`` of every open connection; how many got it."""
        loop = self._loop
        if loop is None:
            return 0
        sent: list[int] = []
        done = threading.Event()

        def write() -> None:
            for client_w, target_w in self._pairs:
                writer = target_w if direction == "up" else client_w
                if not writer.transport.is_closing():
                    writer.write(data)
                    sent.append(1)
            done.set()
        loop.call_soon_threadsafe(write)
        done.wait(5)
        return len(sent)

    def reset(self) -> None:
        """Close every current connection (both ends)."""
        loop = self._loop
        if loop is not None:
            done = threading.Event()

            def close_all() -> None:
                for writer in list(self._writers):
                    writer.transport.abort()
                done.set()
            loop.call_soon_threadsafe(close_all)
            done.wait(5)

    @property
    def connections(self) -> int:
        """Connections open now (each has two sockets)."""
        return len(self._writers) // 2

    # ---- life --------------------------------------------------------------------------------
    def start(self) -> FaultProxy:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the fault proxy did not start")
        return self

    def stop(self) -> None:
        loop, stopped = self._loop, self._stopped
        if loop is not None and stopped is not None and self._thread.is_alive():
            loop.call_soon_threadsafe(stopped.set)
            self._thread.join(10)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _main(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopped = asyncio.Event()
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        await self._stopped.wait()
        self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        await self._server.wait_closed()

    async def _accept(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        self.accepted += 1
        if self.refuse:
            client_w.transport.abort()
            return
        try:
            target_r, target_w = await asyncio.wait_for(
                asyncio.open_connection(*self.target), 5)
        except (OSError, asyncio.TimeoutError):
            client_w.transport.abort()
            return
        pair = {client_w, target_w}
        self._writers |= pair
        self._pairs.append((client_w, target_w))
        try:
            await asyncio.gather(self._pump(client_r, target_w, self.up, pair),
                                 self._pump(target_r, client_w, self.down, pair),
                                 return_exceptions=True)
        finally:
            for writer in pair:
                writer.transport.abort()
            self._writers -= pair
            self._pairs.remove((client_w, target_w))

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    d: Direction, pair: set[asyncio.StreamWriter]) -> None:
        """Forward one direction of one connection until either end closes."""
        frames = _Frames(d.framer) if d.framer is not None else None
        dropping = False    # with frames: whether the current frame is discarded
        queue: asyncio.Queue[tuple[float, bytes, bool]] = asyncio.Queue()
        sender = asyncio.ensure_future(self._send(queue, writer, pair))
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                if frames is None:
                    pieces, close = ([] if d.drop else [data]), False
                    d.dropped += len(data) if d.drop else 0
                else:
                    # drops begin and end at frame boundaries: the receiver sees whole frames
                    # missing, never a frame made of two
                    cut_at = d.cut_at
                    starts, cut = frames.feed(data, cut_at)
                    close = cut is not None
                    if close:
                        data = data[:cut]
                        starts = [i for i in starts if i < cut]
                        d.cut_at = None
                        d.cuts += 1
                    pieces = []
                    bounds = [0, *starts, len(data)]
                    for a, b in zip(bounds, bounds[1:], strict=False):
                        if a == b:
                            continue
                        if a in starts:
                            dropping = d.drop
                        if dropping:
                            d.dropped += b - a
                        else:
                            pieces.append(data[a:b])
                out = b"".join(pieces)
                d.forwarded += len(out)
                if out or close:
                    await queue.put((time.monotonic() + d.delay_ms / 1000, out, close))
                if close:
                    break
        finally:
            await queue.put((0.0, b"", True))
            await asyncio.gather(sender, return_exceptions=True)

    @staticmethod
    async def _send(queue: asyncio.Queue[tuple[float, bytes, bool]], writer: asyncio.StreamWriter,
                    pair: set[asyncio.StreamWriter]) -> None:
        while True:
            due, data, close = await queue.get()
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            if data:
                writer.write(data)
                await writer.drain()
            if close:
                for w in pair:      # a cut or an end: the whole connection goes (what was
                    w.close()       # written still reaches the peer)
                return
