"""The event loop thread behind the synchronous clients.

Each synchronous client (Producer, PushConsumer, PullConsumer, AdminClient) runs its asyncio
core on a loop of its own, in a daemon thread: a blocking call submits a coroutine to it and
waits for the result. Calling back into a client from its own loop thread would deadlock, so
it raises instead.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Generic, Protocol, TypeVar

from rocketstore.client.errors import MQClientError
from rocketstore.remoting.eventloop import loop_factory

T = TypeVar("T")


class AsyncCore(Protocol):
    async def start(self) -> None: ...
    async def shutdown(self) -> None: ...


CoreT = TypeVar("CoreT", bound=AsyncCore)
ClientT = TypeVar("ClientT", bound="BlockingClient[Any]")


class LoopThread:
    def __init__(self, name: str) -> None:
        self.name = name
        self.loop: asyncio.AbstractEventLoop = loop_factory()()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._ready = threading.Event()
        self._stopped = False

    def start(self) -> None:
        self._thread.start()
        self._ready.wait()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._ready.set)
        try:
            self.loop.run_forever()
        finally:
            try:
                tasks = [t for t in asyncio.all_tasks(self.loop) if not t.done()]
                for task in tasks:
                    task.cancel()
                if tasks:
                    self.loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
                self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            finally:
                self.loop.close()

    @property
    def in_loop_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        if self._stopped or not self._thread.is_alive():
            coro.close()
            raise RuntimeError(f"{self.name}: the client is not running")
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop and wait for it (``timeout`` seconds at most)."""
        if self.in_loop_thread:
            coro.close()
            raise RuntimeError(f"{self.name}: a blocking call from the client's own event loop thread "
                               "would deadlock; use the asyncio client there")
        future = self.submit(coro)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"{self.name}: no result within {timeout:g} s") from None

    def stop(self, timeout: float = 10.0) -> None:
        if self._stopped:
            return
        self._stopped = True
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            if not self.in_loop_thread:
                self._thread.join(timeout)


class BlockingClient(Generic[CoreT]):
    """A synchronous client: its asyncio core on a LoopThread of its own, started by start()
    (or ``with``) and stopped by shutdown()."""

    #: MQClientError text for a call before start() or after shutdown()
    not_running_text = "the client is not running: call start() first"
    #: how long shutdown() waits for the core to stop, seconds
    shutdown_timeout = 30.0

    def __init__(self, core: CoreT, thread_name: str) -> None:
        self._core = core
        self._thread_name = thread_name
        self._loop: LoopThread | None = None

    @property
    def core(self) -> CoreT:
        return self._core

    def start(self) -> None:
        if self._loop is not None:
            return
        loop = LoopThread(self._thread_name)
        loop.start()
        try:
            loop.run(self._core.start())
        except BaseException:
            loop.stop()
            raise
        self._loop = loop

    def shutdown(self) -> None:
        loop, self._loop = self._loop, None
        if loop is None:
            return
        try:
            loop.run(self._core.shutdown(), timeout=self.shutdown_timeout)
        finally:
            loop.stop()

    def __enter__(self: ClientT) -> ClientT:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def _loop_or_fail(self) -> LoopThread:
        if self._loop is None:
            raise MQClientError(self.not_running_text)
        return self._loop

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run coro on the loop and wait for it (MQClientError when not running)."""
        if self._loop is None:
            coro.close()
            raise MQClientError(self.not_running_text)
        return self._loop.run(coro, timeout)

    def _on_loop(self, fn: Callable[..., T], *args: Any) -> T:
        """fn(*args) on the loop thread once started (the core's state belongs to it), here
        before."""
        if self._loop is None:
            return fn(*args)

        async def call() -> T:
            return fn(*args)

        return self._loop.run(call())
