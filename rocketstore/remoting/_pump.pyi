"""Type stub of rocketstore/remoting/_pump.pyx: a connection's per-request loop."""

from typing import Any, final

from typing_extensions import disjoint_base

from rocketstore.remoting._frames import FrameWriter

@final
class RequestPump:
    paused: bool
    closed: bool
    def __init__(
        self, connection: Any, processors: Any, writer: FrameWriter, high_water_mark: int
    ) -> None: ...
    def dispatch(self, items: list[Any]) -> int:
        """Dispatch ``items`` in order; returns how many were taken."""

@disjoint_base
class DirectHandler:
    """A request handler that the pump may ask to write its reply into the connection's frame
    writer itself (native subclasses only); called like any other handler otherwise."""
