"""Helpers of the name server tests: a clock that moves when told, bounded waits."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest

from rocketstore.remoting.eventloop import run

# Test modules pick the fixture up with `arun = namesrv_helpers.arun` (a conftest.py here would
# shadow tests/conftest.py, which other tests import by name).

T = TypeVar("T")


@pytest.fixture
def arun() -> Callable[..., Any]:
    """Run a coroutine on our event loop, bounded in time."""

    def runner(coro: Coroutine[Any, Any, T], timeout: float = 60.0) -> T:
        return run(asyncio.wait_for(coro, timeout))

    return runner


class FakeClock:
    """Milliseconds that move only when told to."""

    def __init__(self, start_ms: float = 1_700_000_000_000) -> None:
        self.now_ms = start_ms

    def __call__(self) -> float:
        return self.now_ms

    def advance(self, seconds: float) -> None:
        self.now_ms += seconds * 1000


async def wait_until(predicate: Callable[[], bool], timeout: float, step: float = 0.01) -> bool:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(step)
    return True
