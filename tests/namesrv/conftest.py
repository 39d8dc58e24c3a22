"""Fixtures of the name server tests."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest

from rocketstore.remoting.eventloop import run

T = TypeVar("T")


@pytest.fixture
def arun() -> Callable[..., Any]:
    """Run a coroutine on our event loop, bounded in time."""

    def runner(coro: Coroutine[Any, Any, T], timeout: float = 60.0) -> T:
        return run(asyncio.wait_for(coro, timeout))

    return runner
