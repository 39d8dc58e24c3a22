"""Type stub of rocketstore/_native/hashes.pyx: CRC-32 and Java's String.hashCode."""

from typing import Final

from typing_extensions import Buffer

CRC32_IMPL: Final[str]
"""Which CRC-32 implementation the C helper selected at import (e.g. a SIMD one)."""

def crc32(data: Buffer, value: int = 0) -> int:
    """CRC-32 (zlib's) of a contiguous buffer, continuing from value."""

def body_crc(data: Buffer) -> int:
    """BODYCRC as RocketMQ stores it: CRC-32 & 0x7FFFFFFF."""

def java_hash(s: str) -> int:
    """Java String.hashCode of s (int32, over UTF-16 code units)."""

def utf8_java_hash(data: bytes | bytearray | memoryview, hash_from: int = 0) -> int:
    """Java hashCode of new String(data, UTF_8), continuing from hash_from."""
