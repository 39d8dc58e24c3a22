"""The record vocabulary and the C header the native code is built from."""
from __future__ import annotations

from pathlib import Path

from rocketstore.common import record, topics
from rocketstore.common.record import SysFlag

HEADER = Path(__file__).resolve().parents[2] / "src" / "rs_vocabulary.h"


def test_codes_and_bits() -> None:
    assert record.MESSAGE_MAGIC_CODE >> 24 == record.MESSAGE_MAGIC_CODE_V2 >> 24
    assert record.MESSAGE_MAGIC_CODE != record.BLANK_MAGIC_CODE
    assert record.MIN_RECORD_SIZE == 91
    assert SysFlag.transaction_type(SysFlag.TRANSACTION_ROLLBACK | SysFlag.BORNHOST_V6) == 0xC
    assert record.COMPRESSION_TYPE_MASK == 0x700
    assert {record.COMPRESSION_LZ4, record.COMPRESSION_ZSTD, record.COMPRESSION_ZLIB} <= set(
        range(0x100, 0x800, 0x100))


def test_the_generated_header_says_what_common_says() -> None:
    if not HEADER.exists():      # a wheel's tests run without the source tree's build products
        return
    text = HEADER.read_text(encoding="ascii")
    assert record.c_header() in text and topics.c_header() in text
    assert f"#define RS_MESSAGE_MAGIC_CODE {record.MESSAGE_MAGIC_CODE:#x}u" in text
