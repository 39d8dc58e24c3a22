from collections.abc import Callable
from typing import final

from rocketstore.ha._acks import SlaveAcks
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

@final
class StoredWaits:
    """What a waiting send waits for (see rocketstore.broker._stored_wait)."""
    sync_master: bool
    slave_timeout_s: float
    acks: SlaveAcks | None
    def __init__(self, sync_master: bool, slave_timeout_s: float,
                 watch_flush: Callable[[int, Callable[[bool], object]], None] | None) -> None: ...
    def when_stored(self, next_offset: int, on_done: Callable[[int], object]) -> StoredWait: ...
