"""The remoting frame codec in plain Python: the reference the native codec (``_frames``, what
connections use through :mod:`rocketstore.remoting.codec`) is tested against, with the same
functions. An unusual JSON header goes to the checked decoder both share,
:mod:`rocketstore.remoting.json_header`.

A frame (docs/remoting.md, section 2 "Frame")::

    int32 length                      bytes that follow this field
    int32 serializeType << 24 | headerLength
    header                            JSON (type 0) or RocketMQ binary (type 1)
    body                              length - 4 - headerLength bytes

Every length read from the network is checked before it is used. A frame whose length is
impossible or over ``max_frame_bytes`` (counted with its length field, as Netty's
LengthFieldBasedFrameDecoder counts it) raises :class:`FrameError`: the stream is lost and the
connection must close. A frame with sound bounds but an undecodable header becomes a
:class:`HeaderError` value in the decoder's output, so the stream goes on and the request can be
answered.
"""

from __future__ import annotations

import struct
from typing import Any

import orjson

from rocketstore.common.text import quote
from rocketstore.remoting.codes import LanguageCode, SerializeType
from rocketstore.remoting.command import Buffer, RemotingCommand
from rocketstore.remoting.errors import FrameError, HeaderError
from rocketstore.remoting.json_header import decode_json_header_checked, normalize_ext

#: RocketMQ's default frame limit (``com.rocketmq.remoting.frameMaxLength``): 16 MiB.
MAX_FRAME_BYTES = 16 * 1024 * 1024
#: A body up to this size is joined with its header into one buffer (one write, one syscall);
#: a larger one is written as it is, never copied.
JOIN_BODY_BELOW = 16 * 1024

_MAX_HEADER_LENGTH = 0xFFFFFF  # 24 bits beside the serialize type
_INT32_MAX = 2**31 - 1

_PREFIX = struct.Struct(">II")  # frame length, serializeType << 24 | headerLength
_LENGTH = struct.Struct(">I")
_BINARY_FIXED = struct.Struct(">hBhii")  # code, language, version, opaque, flag
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_BINARY_MIN_HEADER = _BINARY_FIXED.size + 4 + 4  # plus remark and extFields lengths

_LANGUAGE_BY_NAME: dict[Any, int] = {member.name: member.value for member in LanguageCode}
_json_loads = orjson.loads
_LANGUAGE_NAMES = {member.value: member.name for member in LanguageCode}


# --------------------------------------------------------------------------------------------
# Encoding
# --------------------------------------------------------------------------------------------


def encode_json_header(cmd: RemotingCommand) -> bytes:
    """The header as RocketMQ's Java side writes it: fastjson's alphabetical key order, null
    fields left out, the language by name."""
    header: dict[str, Any] = {"code": cmd.code}
    if cmd.ext_fields:
        header["extFields"] = cmd.ext_fields
    header["flag"] = cmd.flag
    header["language"] = _LANGUAGE_NAMES.get(cmd.language, cmd.language)
    header["opaque"] = cmd.opaque
    if cmd.remark is not None:
        header["remark"] = cmd.remark
    header["serializeTypeCurrentRPC"] = "JSON"
    header["version"] = cmd.version
    return orjson.dumps(header)


def encode_binary_header(cmd: RemotingCommand) -> bytes:
    """RocketMQ's own header serialization (RocketMQSerializable)."""
    remark = cmd.remark.encode("utf-8") if cmd.remark else b""
    parts = [
        _BINARY_FIXED.pack(cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag),
        _INT32.pack(len(remark)),
        remark,
    ]
    ext: list[bytes] = []
    for key, value in cmd.ext_fields.items():
        if key is None or value is None:
            continue
        key_bytes = str(key).encode("utf-8")
        value_bytes = str(value).encode("utf-8")
        if len(key_bytes) > 0x7FFF:
            raise ValueError(f"extFields key {key[:40]!r}... is over 32767 bytes")
        ext += (_INT16.pack(len(key_bytes)), key_bytes, _INT32.pack(len(value_bytes)), value_bytes)
    ext_bytes = b"".join(ext)
    parts += (_INT32.pack(len(ext_bytes)), ext_bytes)
    return b"".join(parts)


def _buffer_length(buffer: Buffer) -> int:
    return buffer.nbytes if isinstance(buffer, memoryview) else len(buffer)


def encode_frame(cmd: RemotingCommand) -> list[Buffer]:
    """The frame as buffers to write in order: prefix and header first, then the body's own
    buffers untouched when it is large (zero-copy), or everything joined when it is small."""
    serialize_type = cmd.serialize_type
    if serialize_type == 0:
        header = encode_json_header(cmd)
    elif serialize_type == 1:
        header = encode_binary_header(cmd)
    else:
        raise ValueError(f"serialize_type must be 0 (JSON) or 1 (ROCKETMQ), got {serialize_type}")
    header_length = len(header)
    if header_length > _MAX_HEADER_LENGTH:
        raise ValueError(f"header is {header_length} bytes, over the protocol's 16 MiB - 1")
    body = cmd.body
    if body is None:
        return [_PREFIX.pack(4 + header_length, (serialize_type << 24) | header_length) + header]
    if type(body) is bytes:  # the common case, kept short
        body_length = len(body)
        prefix = _PREFIX.pack(4 + header_length + body_length, (serialize_type << 24) | header_length)
        if body_length < JOIN_BODY_BELOW:
            return [b"".join((prefix, header, body))]
        return [prefix + header, body]
    body_parts: list[Buffer] = (
        [body] if isinstance(body, (bytearray, memoryview)) else list(body)  # type: ignore[arg-type]
    )
    body_length = 0
    for part in body_parts:
        body_length += _buffer_length(part)
    frame_length = 4 + header_length + body_length
    if frame_length > _INT32_MAX:
        raise ValueError(f"frame of {frame_length} bytes does not fit the int32 length field")
    prefix = _PREFIX.pack(frame_length, (serialize_type << 24) | header_length)
    if body_length < JOIN_BODY_BELOW:
        return [b"".join((prefix, header, *body_parts))]
    return [prefix + header, *body_parts]


def encode(cmd: RemotingCommand) -> bytes:
    """The whole frame as one ``bytes`` (tests and small messages)."""
    return b"".join(encode_frame(cmd))


# --------------------------------------------------------------------------------------------
# Decoding
# --------------------------------------------------------------------------------------------


def decode_json_header(header_bytes: Buffer) -> RemotingCommand:
    try:
        header = _json_loads(header_bytes)
    except orjson.JSONDecodeError as exc:
        raise HeaderError(f"header is not valid JSON: {exc}") from None
    if type(header) is dict:
        # Fast path: what well-behaved peers send. Anything unusual takes the checked path.
        code = header.get("code")
        opaque = header.get("opaque", 0)
        flag = header.get("flag", 0)
        version = header.get("version", 0)
        language_name = header.get("language")
        language = _LANGUAGE_BY_NAME.get(language_name) if type(language_name) is str else None
        remark = header.get("remark")
        ext = header.get("extFields")
        if ext is None:  # Java leaves out an empty map
            ext = {}
        if (
            type(code) is int
            and type(opaque) is int
            and type(flag) is int
            and type(version) is int
            and language is not None
            and (remark is None or type(remark) is str)
            and type(ext) is dict
            and -0x80000000 <= code <= 0x7FFFFFFF
            and -0x80000000 <= opaque <= 0x7FFFFFFF
            and -0x80000000 <= flag <= 0x7FFFFFFF
            and -0x80000000 <= version <= 0x7FFFFFFF
        ):
            for value in ext.values():
                if type(value) is not str:
                    try:
                        ext = normalize_ext(ext)
                    except HeaderError:
                        return decode_json_header_checked(header)  # the error with opaque and flag
                    break
            return RemotingCommand(code, language, version, opaque, flag, remark, ext, None, 0)
    return decode_json_header_checked(header)


def decode_binary_header(header: Buffer) -> RemotingCommand:
    size = _buffer_length(header)
    if size < _BINARY_MIN_HEADER:
        raise HeaderError(
            f"binary header is {size} bytes, shorter than the {_BINARY_MIN_HEADER} every one has",
            serialize_type=SerializeType.ROCKETMQ,
        )
    code, language, version, opaque, flag = _BINARY_FIXED.unpack_from(header, 0)
    pos = _BINARY_FIXED.size

    def fail(message: str) -> HeaderError:
        return HeaderError(message, opaque=opaque, flag=flag, serialize_type=SerializeType.ROCKETMQ)

    (remark_length,) = _INT32.unpack_from(header, pos)
    pos += 4
    if remark_length < 0 or remark_length > size - pos - 4:
        raise fail(f"binary header: remark length {remark_length} does not fit the header ({size} bytes)")
    remark = bytes(header[pos : pos + remark_length]).decode("utf-8", "replace") if remark_length else None
    pos += remark_length
    (ext_length,) = _INT32.unpack_from(header, pos)
    pos += 4
    if ext_length < 0 or ext_length > size - pos:
        raise fail(f"binary header: extFields length {ext_length} does not fit the header ({size} bytes)")
    ext: dict[str, str] = {}
    end = pos + ext_length
    while pos < end:
        if end - pos < 2:
            raise fail("binary header: extFields entry cut inside its key length")
        (key_length,) = _INT16.unpack_from(header, pos)
        pos += 2
        if key_length < 0 or key_length > end - pos - 4:
            raise fail(f"binary header: extFields key length {key_length} does not fit")
        key = bytes(header[pos : pos + key_length]).decode("utf-8", "replace")
        pos += key_length
        (value_length,) = _INT32.unpack_from(header, pos)
        pos += 4
        if value_length < 0 or value_length > end - pos:
            raise fail(f"binary header: extFields value length {value_length} of {key!r:.40} does not fit")
        ext[key] = bytes(header[pos : pos + value_length]).decode("utf-8", "replace")
        pos += value_length
    return RemotingCommand(
        code=code,
        language=language,
        version=version,
        opaque=opaque,
        flag=flag,
        remark=remark,
        ext_fields=ext,
        serialize_type=SerializeType.ROCKETMQ,
    )


def _decode_frame_at(source: bytes | bytearray, start: int, end: int) -> RemotingCommand:
    """Decode the frame in ``source[start:end]`` (after its length field). Raises HeaderError.

    Header and body are copied out (slicing): no view of the decoder's buffer outlives the
    call, so the buffer can be compacted, and a command never pins a network buffer.
    """
    (word,) = _LENGTH.unpack_from(source, start)
    serialize_type = word >> 24
    header_length = word & _MAX_HEADER_LENGTH
    header_start = start + 4
    body_start = header_start + header_length
    if body_start > end:
        raise HeaderError(
            f"header length {header_length} is over the frame's {end - header_start} bytes",
            serialize_type=serialize_type if serialize_type <= 1 else 0,
        )
    if serialize_type == 0:
        cmd = decode_json_header(source[header_start:body_start])
    elif serialize_type == 1:
        cmd = decode_binary_header(bytes(source[header_start:body_start]))
    else:
        raise HeaderError(f"unknown serialize type {serialize_type}")
    if body_start < end:
        if type(source) is bytes:
            cmd.body = source[body_start:end]
        else:
            with memoryview(source) as view:
                cmd.body = bytes(view[body_start:end])
    return cmd


def decode_frame(frame: Buffer) -> RemotingCommand:
    """Decode one frame given without its length field. Raises HeaderError."""
    data = frame if isinstance(frame, (bytes, bytearray)) else bytes(frame)
    if len(data) < 4:
        raise HeaderError(f"frame of {len(data)} bytes has no header length")
    return _decode_frame_at(data, 0, len(data))


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


class FrameDecoder:
    """Splits a byte stream into commands: give it whatever ``data_received`` got.

    ``feed`` returns the commands completed by the new bytes, in order, with a
    :class:`HeaderError` in place of each frame whose header could not be decoded. It raises
    :class:`FrameError` when the stream itself is corrupt; the decoder is then useless.
    Partial frames are kept (in one buffer, compacted once per ``feed``), never more than one
    frame's worth, which ``max_frame_bytes`` bounds.
    """

    __slots__ = ("max_frame_bytes", "_pending")

    def __init__(self, max_frame_bytes: int = MAX_FRAME_BYTES) -> None:
        if max_frame_bytes < 8:
            raise ValueError(f"max_frame_bytes must be at least 8, got {max_frame_bytes}")
        self.max_frame_bytes = max_frame_bytes
        self._pending = bytearray()

    @property
    def buffered(self) -> int:
        """Bytes held of a frame not yet complete."""
        return len(self._pending)

    def feed(self, data: Buffer) -> list[RemotingCommand | HeaderError]:
        pending = self._pending
        if pending:
            pending += data
            source: bytes | bytearray = pending
        elif type(data) is bytes:
            source = data
        else:
            source = bytes(data)
        out: list[RemotingCommand | HeaderError] = []
        max_frame = self.max_frame_bytes
        unpack_length = _LENGTH.unpack_from
        size = len(source)
        pos = 0
        while size - pos >= 4:
            (length,) = unpack_length(source, pos)
            if length < 4:
                raise FrameError(f"frame length {length} is under the 4 bytes of its header length")
            if length + 4 > max_frame:
                length_bytes = bytes(source[pos:pos + 4])
                if all(0x20 <= b <= 0x7E for b in length_bytes):     # text: another protocol
                    raise FrameError(f"not a RocketMQ server or client: it sent "
                                     f"{quote(bytes(source[pos:pos + 48]))} where a remoting "
                                     f"frame's length belongs")
                raise FrameError(f"frame of {length + 4} bytes is over the {max_frame}-byte limit")
            end = pos + 4 + length
            if end > size:
                break
            try:
                out.append(_decode_frame_at(source, pos + 4, end))
            except HeaderError as exc:
                out.append(exc.with_traceback(None))
            pos = end
        if pending:
            del pending[:pos]
        elif pos < size:
            pending += memoryview(source)[pos:]
        return out
