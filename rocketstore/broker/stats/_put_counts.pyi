from collections.abc import Callable
from typing import Any, final

from typing_extensions import disjoint_base

@disjoint_base
class Counter:
    """A counter (``value``) and how many times it was added to (``times``), 64-bit."""

    value: int
    times: int
    def add(self, value: int, times: int = 1) -> None: ...

@final
class PutCounts:
    """TOPIC_PUT_* and QUEUE_PUT_* of one stored send, counted natively."""

    def __init__(self, topics: dict[str, Any], new_topic: Callable[[str], Any],
                 new_queue: Callable[[str, int, list[Any]], Any], queue_stats: bool) -> None: ...
    def record(self, topic: str, queue_id: int, messages: int, size: int) -> None: ...
