"""The store's clock: what its parts read of time, a seam tests replace with a clock of their
own (MessageStore.open(..., clock=...))."""
from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """Wall-clock ms (file ages against their modification times, the hour of the day, the
    names of new IndexFiles) and monotonic ms (how long a deletion has waited)."""

    def wall_ms(self) -> int: ...

    def monotonic_ms(self) -> float: ...


class SystemClock:
    def wall_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic_ms(self) -> float:
        return time.monotonic() * 1000.0
