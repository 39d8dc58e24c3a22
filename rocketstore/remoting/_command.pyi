"""Type stub of rocketstore/remoting/_command.pyx: RemotingCommand and its constructors."""

from collections.abc import Sequence
from typing import Any, final

from typing_extensions import Buffer

_Body = Buffer | Sequence[Buffer] | None

@final
class RemotingCommand:
    """One request or response of RocketMQ's remoting protocol (the int fields are int32)."""

    code: int
    language: int
    version: int
    opaque: int
    flag: int
    remark: str | None
    body: _Body
    serialize_type: int
    send_header: Any
    @property
    def ext_fields(self) -> dict[str, str]: ...
    @ext_fields.setter
    def ext_fields(self, value: dict[str, Any]) -> None: ...
    def __init__(
        self,
        code: int,
        language: int = 0,
        version: int = 409,
        opaque: int = 0,
        flag: int = 0,
        remark: str | None = None,
        ext_fields: dict[str, Any] | None = None,
        body: _Body = None,
        serialize_type: int = 0,
    ) -> None: ...
    @property
    def is_response(self) -> bool: ...
    @property
    def is_oneway(self) -> bool: ...
    def mark_response(self) -> None: ...
    def mark_oneway(self) -> None: ...
    @property
    def body_length(self) -> int: ...
    def body_bytes(self) -> bytes: ...

def create_request(
    code: int,
    ext_fields: dict[str, Any] | None = None,
    body: _Body = None,
    *,
    remark: str | None = None,
    serialize_type: int = 0,
    oneway: bool = False,
) -> RemotingCommand:
    """A request. Its ``opaque`` is set by the connection that sends it."""

def create_response(
    request: RemotingCommand,
    code: int = 0,
    remark: str | None = None,
    ext_fields: dict[str, Any] | None = None,
    body: _Body = None,
) -> RemotingCommand:
    """The reply to ``request``: its opaque and serialize type, the response flag set."""
