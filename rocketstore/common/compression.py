"""Message body codecs, as RocketMQ 4.9.8's ``org.apache.rocketmq.common.compression``.

A compressed body has SYSFLAG bit 0 (COMPRESSED) and its codec in bits 8-10
(:func:`rocketstore.common.record.compression_name`): ZLIB is a zlib stream (``Deflater``), LZ4
an LZ4 frame (lz4-java's ``LZ4FrameOutputStream``), ZSTD a zstd frame (zstd-jni's
``ZstdOutputStream``). RocketMQ's producer names the codec with ``rocketmq.message.compressType``
(ZLIB by default) and the level with ``rocketmq.message.compressLevel`` (5; the LZ4 codec has no
level).
"""

from __future__ import annotations

import zlib

from rocketstore.common.record import COMPRESSION_FLAGS, SysFlag, compression_name

__all__ = ["COMPRESSION_TYPES", "BodyCodecError", "compress_body", "compression_flags",
           "decompress_body"]

#: The codec names, as ``rocketmq.message.compressType`` takes them.
COMPRESSION_TYPES = tuple(COMPRESSION_FLAGS)


class BodyCodecError(ValueError):
    """A body that its codec does not take (or a codec that does not exist)."""


def compression_flags(compress_type: str) -> int:
    """The SYSFLAG bits of a body compressed with ``compress_type``: COMPRESSED and the codec
    (RocketMQ's producer sets both, so a ZLIB body is 0x301)."""
    flags = COMPRESSION_FLAGS.get(compress_type.strip().upper())
    if flags is None:
        raise ValueError(f"compress_type must be one of {', '.join(COMPRESSION_TYPES)}, "
                         f"got {compress_type!r}")
    return int(SysFlag.COMPRESSED) | flags


def compress_body(body: bytes, compress_type: str, level: int) -> bytes:
    """``body`` compressed with the named codec, as RocketMQ's compressor of that name writes it."""
    name = compress_type.strip().upper()
    if name == "ZLIB":
        return zlib.compress(body, level)
    if name == "LZ4":
        import lz4.frame
        # lz4-java's LZ4FrameInputStream reads only frames of independent blocks
        return lz4.frame.compress(body, block_linked=False)
    if name == "ZSTD":
        import zstandard
        return zstandard.ZstdCompressor(level=level).compress(body)
    raise ValueError(f"compress_type must be one of {', '.join(COMPRESSION_TYPES)}, "
                     f"got {compress_type!r}")


def decompress_body(body: bytes, sys_flag: int) -> bytes:
    """The body of a record whose SYSFLAG has the COMPRESSED bit, decoded with the codec bits
    8-10 name; BodyCodecError when it does not decode (the error says which codec)."""
    try:
        name = compression_name(sys_flag)
    except ValueError as exc:
        raise BodyCodecError(str(exc)) from None
    try:
        if name == "ZLIB":
            return zlib.decompress(body)
        if name == "LZ4":
            import lz4.frame
            return lz4.frame.decompress(body)
        import zstandard
        # a streamed frame (zstd-jni's ZstdOutputStream) need not state its content size
        reader = zstandard.ZstdDecompressor().decompressobj()
        out = reader.decompress(body)
        if not reader.eof:
            raise zstandard.ZstdError("the zstd frame is cut short")
        return out
    except Exception as exc:  # noqa: BLE001 - each codec raises its own error types
        raise BodyCodecError(f"{name} body does not decode: {exc}") from None
