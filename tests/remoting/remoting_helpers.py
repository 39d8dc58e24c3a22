"""Helpers of the remoting tests: file limits, raw frames, bounded waits."""

from __future__ import annotations

import asyncio
import resource
import struct
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest

from rocketstore.remoting.eventloop import run

# Test modules pick the fixture up with `arun = remoting_helpers.arun` (a conftest.py here would
# shadow tests/conftest.py, which other tests import by name).

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


def raise_nofile_limit(wanted: int) -> int:
    """Raise the soft RLIMIT_NOFILE towards ``wanted`` (never over the hard limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        new_soft = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (new_soft, hard))
        soft = new_soft
    return soft


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    """One whole frame, length field included."""
    prefix = await reader.readexactly(4)
    (length,) = struct.unpack(">I", prefix)
    return prefix + await reader.readexactly(length)


async def wait_until(predicate: Callable[[], bool], timeout: float, step: float = 0.01) -> bool:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(step)
    return True

