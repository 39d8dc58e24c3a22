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
from collections.abc import Coroutine
from typing import Any, TypeVar

from rocketstore.remoting.eventloop import loop_factory

T = TypeVar("T")


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
