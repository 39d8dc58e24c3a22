"""RocketMQ's bloom filter over consumer groups (org.apache.rocketmq.filter.util.BloomFilter):
each (group, topic) gets k bit positions in an m-bit map, from Guava's murmur3_128 of
``group + "#" + topic`` (UTF-8) combined as Kirsch-Mitzenmacher double hashing. A message's
filter bitmap has the positions of every group whose SQL92 expression it matched; a group
whose positions are not all set cannot match it.

k and m come from the error rate f (percent, maxErrorRateOfBloomFilter, default 20) and the
number of groups expected n (expectConsumerNumUseFilter, default 32): k = ceil(log0.5(f/100)),
m = ceil(n * log2(100/f) * log2(e)) rounded up to whole bytes (3 and 112 by default)."""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

_MASK64 = (1 << 64) - 1
_C1, _C2 = 0x87C37B91114253D5, 0x4CF5AD432745937F


def _rotl64(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _MASK64


def _fmix64(k: int) -> int:
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & _MASK64
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & _MASK64
    return k ^ (k >> 33)


def murmur3_128_as_long(data: bytes, seed: int = 0) -> int:
    """MurmurHash3 x64 128 of data; its first 8 bytes as a signed little-endian long
    (Guava's ``Hashing.murmur3_128().hashBytes(data).asLong()``)."""
    h1 = h2 = seed & _MASK64
    n = len(data)
    blocks = n // 16
    for i in range(blocks):
        k1 = int.from_bytes(data[i * 16:i * 16 + 8], "little")
        k2 = int.from_bytes(data[i * 16 + 8:i * 16 + 16], "little")
        k1 = (_rotl64((k1 * _C1) & _MASK64, 31) * _C2) & _MASK64
        h1 ^= k1
        h1 = (_rotl64(h1, 27) + h2) & _MASK64
        h1 = (h1 * 5 + 0x52DCE729) & _MASK64
        k2 = (_rotl64((k2 * _C2) & _MASK64, 33) * _C1) & _MASK64
        h2 ^= k2
        h2 = (_rotl64(h2, 31) + h1) & _MASK64
        h2 = (h2 * 5 + 0x38495AB5) & _MASK64
    tail = data[blocks * 16:]
    if len(tail) > 8:
        k2 = int.from_bytes(tail[8:], "little")
        h2 ^= (_rotl64((k2 * _C2) & _MASK64, 33) * _C1) & _MASK64
    if tail:
        k1 = int.from_bytes(tail[:8], "little")
        h1 ^= (_rotl64((k1 * _C1) & _MASK64, 31) * _C2) & _MASK64
    h1 ^= n
    h2 ^= n
    h1 = (h1 + h2) & _MASK64
    h2 = (h2 + h1) & _MASK64
    h1 = _fmix64(h1)
    h2 = _fmix64(h2)
    h1 = (h1 + h2) & _MASK64
    return h1 - (1 << 64) if h1 >> 63 else h1


def _int32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x >> 31 else x


@dataclass(frozen=True)
class BloomFilterData:
    """A group's bit positions (RocketMQ's BloomFilterData: bitPos, bitNum)."""
    bit_pos: tuple[int, ...]
    bit_num: int


@dataclass(frozen=True)
class BloomFilter:
    """RocketMQ's BloomFilter.createByFn(f, n): f the error rate in percent (1..99), n the
    number of keys expected."""
    f: int = 20
    n: int = 32

    def __post_init__(self) -> None:
        if not 1 <= self.f < 100:
            raise ValueError(f"maxErrorRateOfBloomFilter must be in [1, 100), got {self.f}")
        if self.n < 1:
            raise ValueError(f"expectConsumerNumUseFilter must be positive, got {self.n}")

    @functools.cached_property
    def k(self) -> int:
        """Hash functions (bit positions per key)."""
        return math.ceil(math.log(self.f / 100.0) / math.log(0.5))

    @functools.cached_property
    def m(self) -> int:
        """Bits in a map, a multiple of 8."""
        bits = math.ceil(self.n * (math.log(100.0 / self.f) / math.log(2))
                         * (math.log(math.e) / math.log(2)))
        return 8 * math.ceil(bits / 8.0)

    def bit_positions(self, key: str) -> tuple[int, ...]:
        """calcBitPositions: k positions in [0, m) for key."""
        hash64 = murmur3_128_as_long(key.encode("utf-8"))
        hash1, hash2 = _int32(hash64), _int32(hash64 >> 32)
        m = self.m
        out = []
        for i in range(1, self.k + 1):
            combined = _int32(hash1 + i * hash2)
            if combined < 0:
                combined = ~combined
            out.append(combined % m)
        return tuple(out)

    def generate(self, group: str, topic: str) -> BloomFilterData:
        """The BloomFilterData of a group's subscription to topic (key ``group#topic``)."""
        return BloomFilterData(self.bit_positions(f"{group}#{topic}"), self.m)

    def hash_to(self, data: BloomFilterData, bits: bytearray) -> None:
        """Set data's positions in bits (bit i is byte i/8, mask 1 << i%8: BitsArray)."""
        for pos in data.bit_pos:
            bits[pos >> 3] |= 1 << (pos & 7)

    def is_hit(self, data: BloomFilterData, bits: bytes) -> bool:
        return all(bits[pos >> 3] & (1 << (pos & 7)) for pos in data.bit_pos)
