"""RemotingCommand: one request or response of RocketMQ's remoting protocol."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from rocketstore.remoting.codes import (
    DEFAULT_LANGUAGE,
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    ROCKETMQ_VERSION_4_9_8,
    ResponseCode,
    SerializeType,
)

#: One contiguous buffer: what a frame's body may be made of.
Buffer = bytes | bytearray | memoryview
#: A body: nothing, one buffer, or several written back to back without being joined (a PULL
#: reply passes mapped-file memoryviews this way, straight to the socket).
Body = Buffer | Sequence[Buffer] | None


@dataclass(slots=True, eq=False)
class RemotingCommand:
    """A command as RocketMQ's ``RemotingCommand`` has it.

    ``code`` is a request code for requests and a response code for responses (both plain
    ints: see :mod:`rocketstore.remoting.codes`). ``ext_fields`` are the request's or reply's
    custom header fields, strings on both sides (decoding turns the C++ client's JSON numbers
    into their decimal text; :mod:`rocketstore.remoting.headers` reads them typed).
    ``serialize_type`` is how the header travels; a reply made by :func:`create_response`
    takes the request's. ``opaque`` matches a response to its request: the connection that
    sends a request gives it a fresh one.
    """

    # Plain ints, not the IntEnum members: an enum member hashes through a Python-level
    # property, and these are looked up on every frame.
    code: int
    language: int = int(DEFAULT_LANGUAGE)
    version: int = ROCKETMQ_VERSION_4_9_8
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: Body = None
    serialize_type: int = int(SerializeType.JSON)

    @property
    def is_response(self) -> bool:
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & FLAG_ONEWAY)

    def mark_response(self) -> None:
        self.flag |= FLAG_RESPONSE

    def mark_oneway(self) -> None:
        self.flag |= FLAG_ONEWAY

    @property
    def body_length(self) -> int:
        body = self.body
        if body is None:
            return 0
        if isinstance(body, (bytes, bytearray, memoryview)):
            return body.nbytes if isinstance(body, memoryview) else len(body)
        return sum(part.nbytes if isinstance(part, memoryview) else len(part) for part in body)

    def body_bytes(self) -> bytes:
        """The body as one ``bytes`` (joined and copied when it is several buffers)."""
        body = self.body
        if body is None:
            return b""
        if isinstance(body, bytes):
            return body
        if isinstance(body, (bytearray, memoryview)):
            return bytes(body)
        return b"".join(body)

    def __repr__(self) -> str:
        kind = "response" if self.is_response else ("oneway" if self.is_oneway else "request")
        return (
            f"RemotingCommand({kind} code={self.code} opaque={self.opaque} flag={self.flag} "
            f"remark={self.remark!r} ext_fields={self.ext_fields!r} "
            f"body={self.body_length} bytes serialize_type={self.serialize_type})"
        )


def create_request(
    code: int,
    ext_fields: dict[str, str] | None = None,
    body: Body = None,
    *,
    remark: str | None = None,
    serialize_type: int = int(SerializeType.JSON),
    oneway: bool = False,
) -> RemotingCommand:
    """A request. Its ``opaque`` is set by the connection that sends it."""
    return RemotingCommand(
        code=code,
        ext_fields=ext_fields if ext_fields is not None else {},
        body=body,
        remark=remark,
        serialize_type=serialize_type,
        flag=FLAG_ONEWAY if oneway else 0,
    )


def create_response(
    request: RemotingCommand,
    code: int = int(ResponseCode.SUCCESS),
    remark: str | None = None,
    ext_fields: dict[str, str] | None = None,
    body: Body = None,
) -> RemotingCommand:
    """The reply to ``request``: its opaque and serialize type, the response flag set."""
    return RemotingCommand(
        code=code,
        opaque=request.opaque,
        flag=FLAG_RESPONSE,
        remark=remark,
        ext_fields=ext_fields if ext_fields is not None else {},
        body=body,
        serialize_type=request.serialize_type,
    )
