from collections.abc import Callable
from typing import final

from rocketstore.remoting import DeferredReply

@final
class StoredWait(DeferredReply):
    """One send waiting for its flush and its slave (see rocketstore.broker._stored_wait)."""
    pending: int
    flush: int
    slave: int
    def __init__(self, on_done: Callable[[int], object]) -> None: ...
    def flush_done(self, durable: bool) -> None: ...
    def slave_done(self, acknowledged: bool) -> None: ...
    def part_done(self) -> None: ...
