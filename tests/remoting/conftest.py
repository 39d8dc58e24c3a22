"""Fixtures of the remoting tests (helpers are in remoting_helpers.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest

from rocketstore.remoting.eventloop import run

T = TypeVar("T")


@pytest.fixture(params=["uvloop", "asyncio"])
def arun(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Any]:
    """Run a coroutine bounded in time, once on uvloop and once on asyncio's own loop (their
    transports differ: writelines, pause/resume, buffer sizes)."""
    if request.param == "uvloop":
        pytest.importorskip("uvloop")
        monkeypatch.delenv("ROCKETSTORE_NO_UVLOOP", raising=False)
    else:
        monkeypatch.setenv("ROCKETSTORE_NO_UVLOOP", "1")

    def runner(coro: Coroutine[Any, Any, T], timeout: float = 60.0) -> T:
        return run(asyncio.wait_for(coro, timeout))

    return runner
