"""Type stub of rocketstore/remoting/_pump.pyx: a connection's per-request loop."""

from typing import Any, Protocol, final, type_check_only

from typing_extensions import disjoint_base

from rocketstore.remoting._command import RemotingCommand
from rocketstore.remoting._frames import FrameWriter

@type_check_only
class PumpOwner(Protocol):
    """What a RequestPump calls on its connection (RemotingConnection): the slow paths."""

    def on_response(self, response: RemotingCommand) -> None: ...
    def on_unhandled_request(self, request: RemotingCommand) -> None: ...
    def on_async_result(self, request: RemotingCommand, result: Any) -> None: ...
    def on_handler_error(self, request: RemotingCommand, exc: BaseException) -> None: ...
    def on_malformed(self, error: Any) -> None: ...
    def send_error(self, request: RemotingCommand, code: int, remark: str) -> None: ...
    def flush(self) -> None: ...

@final
class RequestPump:
    paused: bool
    closed: bool
    def __init__(
        self, connection: PumpOwner, processors: Any, writer: FrameWriter, flush_bytes: int
    ) -> None: ...
    def dispatch(self, items: list[Any]) -> int:
        """Dispatch ``items`` in order; returns how many were taken."""

@disjoint_base
class DirectHandler:
    """A request handler that the pump may ask to write its reply into the connection's frame
    writer itself (native subclasses only); called like any other handler otherwise."""

RESULT_ONEWAY: int

def count_answer(request_code: int, response_code: int) -> None:
    """Count one request answered ``response_code`` (RESULT_ONEWAY: not answered, oneway)."""

def request_counts() -> dict[tuple[int, int], int]:
    """``{(request code, result): requests}`` served by this process since it started."""
