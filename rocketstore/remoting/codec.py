"""Frames of RocketMQ's remoting protocol: encoding, decoding, and a streaming decoder.

A frame (docs/remoting.md, section 2)::

    int32 length                      bytes that follow this field
    int32 serializeType << 24 | headerLength
    header                            JSON (type 0) or RocketMQ binary (type 1)
    body                              length - 4 - headerLength bytes

The work is native (``_frames``): every length read from the network is checked before it is
used; a frame whose length is impossible or over ``max_frame_bytes`` (counted with its length
field, as Netty's LengthFieldBasedFrameDecoder counts it) raises :class:`FrameError`, and the
connection must close. A frame with sound bounds but an undecodable header becomes a
:class:`HeaderError` value in the decoder's output, so the stream goes on and the request can
be answered. JSON headers are parsed by orjson (unusual ones by
:mod:`rocketstore.remoting.json_header`). ``tests/reference/frame_codec.py`` is the same codec in
plain Python, the reference the native one is tested against.
"""

from __future__ import annotations

from rocketstore.remoting._frames import (
    JOIN_BODY_BELOW,
    MAX_FRAME_BYTES,
    FrameDecoder,
    FrameWriter,
    decode_binary_header,
    decode_frame,
    decode_json_header,
    encode,
    encode_binary_header,
    encode_frame,
    encode_json_header,
)
from rocketstore.remoting.command import Buffer, RemotingCommand
from rocketstore.remoting.errors import FrameError, HeaderError

__all__ = [
    "JOIN_BODY_BELOW", "MAX_FRAME_BYTES", "FrameDecoder", "FrameWriter", "decode",
    "decode_binary_header", "decode_frame", "decode_json_header", "encode",
    "encode_binary_header", "encode_frame", "encode_json_header",
]


def decode(data: Buffer, max_frame_bytes: int = MAX_FRAME_BYTES) -> RemotingCommand:
    """Decode exactly one whole frame, length field included (tests and tools)."""
    decoder = FrameDecoder(max_frame_bytes)
    items = decoder.feed(data)
    if len(items) != 1 or decoder.buffered:
        raise FrameError(f"expected one whole frame, got {len(items)} and {decoder.buffered} bytes left")
    item = items[0]
    if isinstance(item, HeaderError):
        raise item
    return item
