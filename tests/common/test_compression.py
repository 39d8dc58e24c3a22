"""The sysFlag codec bits (RocketMQ 4.9.8's MessageSysFlag / CompressionType) and the body codecs."""

from __future__ import annotations

import zlib

import lz4.frame
import pytest
import zstandard

from rocketstore.client.config import ProducerConfig
from rocketstore.client.records import decode_messages_py
from rocketstore.common.compression import (
    BodyCodecError,
    compress_body,
    compression_flags,
    decompress_body,
)
from rocketstore.common.record import (
    COMPRESSION_LZ4,
    COMPRESSION_TYPE_MASK,
    COMPRESSION_ZLIB,
    COMPRESSION_ZSTD,
    MESSAGE_SYS_FLAGS,
    compression_name,
)
from rocketstore.message import Message

BODY = bytes(range(256)) * 50


def test_codec_bits_read_as_rocketmq_reads_them() -> None:
    assert (COMPRESSION_LZ4, COMPRESSION_ZSTD, COMPRESSION_ZLIB, COMPRESSION_TYPE_MASK) == (
        0x100, 0x200, 0x300, 0x700)
    # no codec bits (clients before 4.9.8's codecs) is ZLIB, as CompressionType.findByValue(0)
    assert [compression_name(f) for f in (0x1, 0x101, 0x201, 0x301, 0x303 | 0x30 | 0xC)] == [
        "ZLIB", "LZ4", "ZSTD", "ZLIB", "ZLIB"]
    for value in range(4, 8):
        with pytest.raises(ValueError, match=f"compression type {value}"):
            compression_name(value << 8 | 1)
    assert [compression_flags(name) for name in ("ZLIB", "lz4", " Zstd ")] == [0x301, 0x101, 0x201]
    with pytest.raises(ValueError, match="compress_type"):
        compression_flags("SNAPPY")


def test_every_bit_but_the_host_bits_is_the_producers() -> None:
    assert MESSAGE_SYS_FLAGS & 0x7FF == 0x7CF
    assert Message("t", b"x", sys_flag=0x301 | 0x2 | 0x4).sys_flag == 0x307
    with pytest.raises(ValueError, match="IPv6 host bits"):
        Message("t", b"x", sys_flag=0x10)


def test_each_codec_writes_the_standard_format_and_reads_it_back() -> None:
    assert zlib.decompress(compress_body(BODY, "ZLIB", 5)) == BODY
    assert lz4.frame.decompress(compress_body(BODY, "LZ4", 5)) == BODY
    assert zstandard.ZstdDecompressor().decompress(compress_body(BODY, "ZSTD", 3)) == BODY
    for name in ("ZLIB", "LZ4", "ZSTD"):
        assert decompress_body(compress_body(BODY, name, 5), compression_flags(name)) == BODY
    assert decompress_body(zlib.compress(BODY), 0x1) == BODY
    # a streamed zstd frame without its content size (zstd-jni's ZstdOutputStream writes such)
    streamed = zstandard.ZstdCompressor(write_content_size=False).compressobj()
    frame = streamed.compress(BODY) + streamed.flush()
    assert decompress_body(frame, 0x201) == BODY


@pytest.mark.parametrize("sys_flag, body, error", [
    (0x101, zlib.compress(BODY), "LZ4 body does not decode"),
    (0x201, zlib.compress(BODY), "ZSTD body does not decode"),
    (0x301, lz4.frame.compress(BODY), "ZLIB body does not decode"),
    (0x201, zstandard.ZstdCompressor().compress(BODY)[:-9], "ZSTD body does not decode"),
    (0x101, lz4.frame.compress(BODY)[:-9], "LZ4 body does not decode"),
    (0x501, zlib.compress(BODY), "compression type 5"),
])
def test_a_body_its_codec_does_not_take_is_an_error_naming_the_codec(sys_flag: int, body: bytes,
                                                                     error: str) -> None:
    with pytest.raises(BodyCodecError, match=error):
        decompress_body(body, sys_flag)


def test_the_producer_config_names_the_codec() -> None:
    assert ProducerConfig().compress_type == "ZLIB"
    assert ProducerConfig(compress_type="LZ4").compress_type == "LZ4"
    with pytest.raises(ValueError, match="compress_type"):
        ProducerConfig(compress_type="GZIP")
    with pytest.raises(ValueError, match="compress_level"):
        ProducerConfig(compress_level=12)
    assert ProducerConfig(compress_type="ZSTD", compress_level=19).compress_level == 19


def test_the_native_and_python_decoders_agree_on_each_codec(tmp_path) -> None:
    from rocketstore import MessageStore, StoreConfig
    from rocketstore.client import decode_messages

    with MessageStore.open(tmp_path / "s", StoreConfig(mapped_file_size_commit_log=1 << 20)) as store:
        for name in ("ZLIB", "LZ4", "ZSTD"):
            store.put_message(Message("z", compress_body(BODY, name, 5), sys_flag=compression_flags(name)), 0)
        store.put_message(Message("z", b"not lz4", sys_flag=0x101), 0)
        records = b"".join(bytes(m.record) for m in store.scan())
    native = decode_messages(records)
    python = decode_messages_py(records)
    assert [(m.sys_flag, m.body) for m in native] == [(m.sys_flag, m.body) for m in python] == [
        (0x301, BODY), (0x101, BODY), (0x201, BODY), (0x101, b"not lz4")]
