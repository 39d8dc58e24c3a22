"""The event loop our servers and clients run on: uvloop when it is installed.

Set ``ROCKETSTORE_NO_UVLOOP=1`` to run on asyncio's own loop (debugging, comparisons).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def uvloop_enabled() -> bool:
    if os.environ.get("ROCKETSTORE_NO_UVLOOP"):
        return False
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return False
    return True


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    """A factory of new event loops: uvloop's when enabled, asyncio's otherwise."""
    if uvloop_enabled():
        import uvloop

        return uvloop.new_event_loop
    return asyncio.new_event_loop


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on the loop :func:`loop_factory` makes."""
    loop = loop_factory()()
    try:
        asyncio.set_event_loop(loop)
        return loop.run_until_complete(main)
    finally:
        try:
            _cancel_all_tasks(loop)
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            asyncio.set_event_loop(None)
            loop.close()


def _cancel_all_tasks(loop: asyncio.AbstractEventLoop) -> None:
    tasks = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in tasks:
        task.cancel()
    if tasks:
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
