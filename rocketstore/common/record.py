"""The CommitLog record's vocabulary: magic codes, layout sizes and offsets, sysFlag bits
(docs/format.md, "CommitLog record (v1)").

setup.py writes the numeric constants here into a C header for the native code, so they have
this one home.
"""
from __future__ import annotations

import enum

#: MAGICCODE of a message record (RocketMQ 4.x, 1-byte topic length).
MESSAGE_MAGIC_CODE = 0xDAA320A7
#: MAGICCODE of RocketMQ 5's records with a 2-byte topic length.
MESSAGE_MAGIC_CODE_V2 = 0xDAA320AB
#: MAGICCODE of the END_FILE blank that fills the rest of a CommitLog segment.
BLANK_MAGIC_CODE = 0xCBD43194

#: A blank needs TOTALSIZE and MAGICCODE.
END_FILE_MIN_BLANK_LENGTH = 8
#: The smallest v1 record: IPv4 hosts, empty body, topic and properties.
MIN_RECORD_SIZE = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 8 + 4 + 1 + 2
#: The topic length is one (signed, in Java) byte.
MAX_TOPIC_LENGTH = 127
#: The properties length is a signed short.
MAX_PROPERTIES_LENGTH = 32767

# Field offsets of a v1 record from its start, up to the first host (fixed for every record).
TOTALSIZE_OFFSET = 0
MAGICCODE_OFFSET = 4
BODYCRC_OFFSET = 8
QUEUEID_OFFSET = 12
FLAG_OFFSET = 16
QUEUEOFFSET_OFFSET = 20
PHYSICALOFFSET_OFFSET = 28
SYSFLAG_OFFSET = 36
BORNTIMESTAMP_OFFSET = 40
BORNHOST_OFFSET = 48


class SysFlag(enum.IntFlag):
    """SYSFLAG bits of a CommitLog record (MessageSysFlag)."""

    COMPRESSED = 0x1
    MULTI_TAGS = 0x2
    TRANSACTION_NOT_TYPE = 0x0
    TRANSACTION_PREPARED = 0x4
    TRANSACTION_COMMIT = 0x8
    TRANSACTION_ROLLBACK = 0xC
    BORNHOST_V6 = 0x10
    STOREHOST_V6 = 0x20

    @staticmethod
    def transaction_type(sys_flag: int) -> int:
        return sys_flag & TRANSACTION_TYPE_MASK


#: The two transaction bits of SYSFLAG.
TRANSACTION_TYPE_MASK = 0xC
#: Bits 8-10 of SYSFLAG: the codec of a compressed body (MessageSysFlag's COMPRESSION_*_TYPE,
#: RocketMQ 4.9.8). 0 (older clients) means zlib, as 3 does; 4-7 name no codec.
COMPRESSION_TYPE_MASK = 0x7 << 8
COMPRESSION_LZ4 = 0x1 << 8
COMPRESSION_ZSTD = 0x2 << 8
COMPRESSION_ZLIB = 0x3 << 8
#: The codec names of RocketMQ's CompressionType (``rocketmq.message.compressType``) and the
#: SYSFLAG bits each sets beside COMPRESSED.
COMPRESSION_FLAGS = {"LZ4": COMPRESSION_LZ4, "ZSTD": COMPRESSION_ZSTD, "ZLIB": COMPRESSION_ZLIB}
#: The IPv6 host bits: the store sets them from the record's hosts.
HOST_V6_FLAGS = int(SysFlag.BORNHOST_V6 | SysFlag.STOREHOST_V6)
#: The bits a message carries from its producer, kept as sent (RocketMQ's broker stores the
#: request's sysFlag whole: compressed, multi tags, transaction type, codec, and any other):
#: every bit but the host bits.
MESSAGE_SYS_FLAGS = ~HOST_V6_FLAGS


def compression_name(sys_flag: int) -> str:
    """The codec of a compressed body with this SYSFLAG ("ZLIB", "LZ4" or "ZSTD"), as RocketMQ's
    MessageSysFlag.getCompressionType reads bits 8-10; ValueError for 4-7, which name none."""
    value = (sys_flag & COMPRESSION_TYPE_MASK) >> 8
    if value in (0, 3):
        return "ZLIB"
    if value == 1:
        return "LZ4"
    if value == 2:
        return "ZSTD"
    raise ValueError(f"sysFlag {sys_flag & 0xFFFFFFFF:#x}: compression type {value} (bits 8-10) "
                     "is none of LZ4 1, ZSTD 2, ZLIB 3")


def c_header() -> str:
    """These constants as C macros (``RS_<NAME>``), for the native code's generated header.
    The magic codes are unsigned (uint32_t); the rest are plain ints, as C enum values are."""
    codes = ("MESSAGE_MAGIC_CODE", "MESSAGE_MAGIC_CODE_V2", "BLANK_MAGIC_CODE")
    sizes = ("END_FILE_MIN_BLANK_LENGTH", "MIN_RECORD_SIZE", "MAX_TOPIC_LENGTH",
             "MAX_PROPERTIES_LENGTH", "TRANSACTION_TYPE_MASK", "COMPRESSION_TYPE_MASK",
             "MESSAGE_SYS_FLAGS", "HOST_V6_FLAGS",
             *(name for name in globals() if name.endswith("_OFFSET")))
    lines = [f"#define RS_{name} {globals()[name]:#x}u" for name in codes]
    lines += [f"#define RS_{name} ({int(globals()[name])})" for name in sizes]
    lines += [f"#define RS_SYSFLAG_{name} {flag.value}"
              for name, flag in SysFlag.__members__.items()]
    # the first (most significant) byte of each magic code, which a scan looks for
    lines += [f"#define RS_MESSAGE_MAGIC_BYTE0 {MESSAGE_MAGIC_CODE >> 24}",
              f"#define RS_BLANK_MAGIC_BYTE0 {BLANK_MAGIC_CODE >> 24}"]
    return "\n".join(lines) + "\n"
