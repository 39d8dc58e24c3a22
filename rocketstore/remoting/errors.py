"""Exceptions of the remoting layer (RocketMQ's RemotingException family)."""

from __future__ import annotations


class RemotingError(Exception):
    """Base of every error this package raises about the network or the protocol."""


class FrameError(RemotingError, ValueError):
    """The byte stream cannot be split into frames (bad or oversized length): the connection
    it came from cannot be trusted any further and is closed."""


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
