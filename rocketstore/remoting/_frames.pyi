"""Type stub of rocketstore/remoting/_frames.pyx: the native frame codec."""

from typing import final

from typing_extensions import Buffer

from rocketstore.remoting._command import RemotingCommand
from rocketstore.remoting.errors import HeaderError

MAX_FRAME_BYTES: int
JOIN_BODY_BELOW: int

def decode_frame(frame: Buffer) -> RemotingCommand:
    """One frame without its length field. Raises HeaderError."""

def decode_json_header(header: Buffer) -> RemotingCommand:
    """A JSON header as a command without a body. Raises HeaderError."""

def decode_json_header_library(header: bytes) -> RemotingCommand:
    """A JSON header decoded without the SEND scanner (msgspec, orjson): its reference."""

def decode_binary_header(header: Buffer) -> RemotingCommand:
    """A RocketMQ binary header as a command without a body. Raises HeaderError."""

def encode_json_header(cmd: RemotingCommand) -> bytes: ...
def encode_binary_header(cmd: RemotingCommand) -> bytes: ...
def encode_frame(cmd: RemotingCommand) -> list[Buffer]:
    """Prefix and header first, then a large body's own buffers; one buffer when small."""

def encode(cmd: RemotingCommand) -> bytes: ...

@final
class FrameDecoder:
    """Splits a byte stream into commands (HeaderError in place of undecodable ones)."""

    @property
    def max_frame_bytes(self) -> int: ...
    def __init__(self, max_frame_bytes: int = ...) -> None: ...
    @property
    def buffered(self) -> int: ...
    def feed(self, data: Buffer) -> list[RemotingCommand | HeaderError]:
        """Raises FrameError when the stream is corrupt (bad or oversized length)."""

@final
class FrameWriter:
    """Frames waiting for one write: small ones joined, large bodies queued uncopied."""

    @property
    def nbytes(self) -> int: ...
    def __len__(self) -> int: ...
    def add(self, cmd: RemotingCommand) -> int:
        """Encode and queue ``cmd``; returns the bytes queued."""

    def add_frame(self, frame: bytes) -> int:
        """Queue a whole encoded frame; returns the bytes queued."""

    def take(self) -> list[Buffer]:
        """The queued buffers in order; the writer is empty after."""

    def clear(self) -> None: ...
