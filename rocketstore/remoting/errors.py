"""Exceptions of the remoting layer (RocketMQ's RemotingException family)."""

from __future__ import annotations

from rocketstore.common.text import quote

#: Bytes of a stream quoted when they turn out not to be RocketMQ's protocol.
FOREIGN_QUOTE_BYTES = 48


class RemotingError(Exception):
    """Base of every error this package raises about the network or the protocol."""


class FrameError(RemotingError, ValueError):
    """The byte stream cannot be split into frames (bad or oversized length): the connection
    it came from cannot be trusted any further and is closed."""


def oversized_frame_text(frame_bytes: int, limit: int, sample: bytes) -> str:
    """Why a frame length over the limit is refused. A length whose four bytes are printable
    ASCII is text: the peer speaks another protocol (an HTTP server's b'HTTP' reads as a
    1,213,486,164-byte frame)."""
    if len(sample) >= 4 and all(0x20 <= b <= 0x7E for b in sample[:4]):
        return (f"not a RocketMQ server or client: it sent {quote(sample)} where a remoting "
                f"frame's length belongs")
    return f"frame of {frame_bytes} bytes is over the {limit}-byte limit"


class HeaderError(RemotingError, ValueError):
    """A frame whose header cannot be decoded. The frame's bounds were sound, so the stream
    goes on; ``opaque`` and ``flag`` are filled in when they could be read, so that a request
    can still be answered with an error."""

    def __init__(
        self,
        message: str,
        *,
        opaque: int | None = None,
        flag: int | None = None,
        serialize_type: int = 0,
    ) -> None:
        super().__init__(message)
        self.opaque = opaque
        self.flag = flag
        self.serialize_type = serialize_type


class RemotingConnectError(RemotingError, ConnectionError):
    """Could not connect to the address."""


class RemotingSendRequestError(RemotingError, ConnectionError):
    """The connection closed before the request was sent or before its response arrived."""


class RemotingTimeoutError(RemotingError, TimeoutError):
    """No response within the timeout."""
