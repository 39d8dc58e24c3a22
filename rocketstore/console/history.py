"""What the console's charts draw: put/get TPS per broker and lag per consumer group, sampled
on the console's event loop every ``interval_s`` seconds into bounded rings."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

log = logging.getLogger("rocketstore.console")

#: samples kept per series (an hour at the default 10 s)
SERIES_LENGTH = 360
#: a group's lag is sampled while someone looked at it within this many seconds
WATCH_S = 3600.0


@dataclass
class Series:
    """(unix seconds, value) pairs, oldest first."""

    points: deque[tuple[float, float]] = field(default_factory=lambda: deque(maxlen=SERIES_LENGTH))

    def add(self, value: float, at: float | None = None) -> None:
        self.points.append((time.time() if at is None else at, value))


class History:
    """Series by name: ``put:<broker addr>``, ``get:<broker addr>``, ``lag:<group>``."""

    def __init__(self) -> None:
        self.series: dict[str, Series] = {}
        self.watched_groups: dict[str, float] = {}

    def add(self, name: str, value: float, at: float | None = None) -> None:
        self.series.setdefault(name, Series()).add(value, at)

    def points(self, name: str) -> list[tuple[float, float]]:
        found = self.series.get(name)
        return list(found.points) if found else []

    def watch(self, group: str) -> None:
        self.watched_groups[group] = time.monotonic()

    def groups_to_sample(self) -> list[str]:
        now = time.monotonic()
        for group in [g for g, at in self.watched_groups.items() if now - at > WATCH_S]:
            del self.watched_groups[group]
        return sorted(self.watched_groups)


async def sample_forever(history: History, sample: Callable[[History], Awaitable[None]],
                         interval_s: float) -> None:
    """Call ``sample`` every ``interval_s`` seconds until cancelled; a failed sample is logged
    and the next one tried."""
    while True:
        try:
            await sample(history)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a cluster that is down now may be back later
            log.info("console: sampling failed: %s", exc)
        await asyncio.sleep(interval_s)
