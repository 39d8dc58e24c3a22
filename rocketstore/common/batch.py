"""A batch's body (SEND_BATCH_MESSAGE 320; docs/remoting.md, 8.1), as RocketMQ's
MessageDecoder.encodeMessages writes it: per message TOTALSIZE, MAGICCODE 0, BODYCRC 0, FLAG,
BODYLENGTH, BODY, PROPERTIESLENGTH (2 bytes), PROPERTIES (the properties text, UTF-8).

The producer encodes, the broker decodes; properties travel as their text, which each side
turns into a dict with its own properties parser.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import NamedTuple

#: TOTALSIZE MAGICCODE BODYCRC FLAG BODYLENGTH
_HEAD = struct.Struct(">iiiii")
_PROPERTIES_LENGTH = struct.Struct(">h")
#: PROPERTIESLENGTH is a signed short.
MAX_PROPERTIES_BYTES = 32767


class BatchBodyError(ValueError):
    """A batch body whose lengths do not fit; the message names the byte where."""


class BatchEntry(NamedTuple):
    flag: int
    body: bytes
    properties: bytes  # the properties text, UTF-8 encoded


def encode_batch_body(entries: Iterable[tuple[int, bytes, bytes]]) -> bytes:
    """A batch body of (flag, body, properties text as UTF-8) entries."""
    parts: list[bytes] = []
    for flag, body, properties in entries:
        if len(properties) > MAX_PROPERTIES_BYTES:
            raise ValueError(f"message properties are {len(properties)} bytes; "
                             f"at most {MAX_PROPERTIES_BYTES} fit")
        total = _HEAD.size + len(body) + _PROPERTIES_LENGTH.size + len(properties)
        parts.append(_HEAD.pack(total, 0, 0, flag, len(body)))
        parts.append(body)
        parts.append(_PROPERTIES_LENGTH.pack(len(properties)))
        parts.append(properties)
    return b"".join(parts)


def decode_batch_body(body: bytes | bytearray | memoryview) -> list[BatchEntry]:
    """The entries of a batch body; every length is checked against what is left."""
    out = []
    view = memoryview(body)
    pos, end = 0, len(view)
    while pos < end:
        if end - pos < _HEAD.size:
            raise BatchBodyError(f"batch body truncated at byte {pos}")
        total, _magic, _crc, flag, body_len = _HEAD.unpack_from(view, pos)
        if total < _HEAD.size + _PROPERTIES_LENGTH.size or total > end - pos:
            raise BatchBodyError(f"batch message at byte {pos} has a bad size {total}")
        if body_len < 0 or _HEAD.size + body_len + _PROPERTIES_LENGTH.size > total:
            raise BatchBodyError(f"batch message at byte {pos} has a bad body length {body_len}")
        at = pos + _HEAD.size
        message_body = bytes(view[at:at + body_len])
        at += body_len
        (properties_len,) = _PROPERTIES_LENGTH.unpack_from(view, at)
        at += _PROPERTIES_LENGTH.size
        if properties_len < 0 or at + properties_len != pos + total:
            raise BatchBodyError(
                f"batch message at byte {pos} has a bad properties length {properties_len}")
        out.append(BatchEntry(flag, message_body, bytes(view[at:at + properties_len])))
        pos += total
    return out
