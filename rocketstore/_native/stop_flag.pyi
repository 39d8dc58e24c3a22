"""Type stub of rocketstore/_native/stop_flag.pyx: a flag native loops poll."""

from typing_extensions import disjoint_base

@disjoint_base
class StopFlag:
    """A flag polled by native loops that run without the GIL."""

    def set(self) -> None: ...
    def clear(self) -> None: ...
    def is_set(self) -> bool: ...
