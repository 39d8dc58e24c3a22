"""The client's side of the record formats: stored records decoded, batches encoded.

A PULL, QUERY_MESSAGE or VIEW_MESSAGE_BY_ID reply carries CommitLog records back to back, as
stored (docs/format.md, 3.1 "Message record (v1)"); :func:`decode_messages` turns them into
:class:`MessageExt` and checks every length against what is left, so a broken body raises
:class:`CorruptMessageError` instead of yielding bogus messages. The per-message work is
native (``_records.pyx``); :func:`decode_messages_py` is the plain-Python reference the tests
hold it to. :func:`encode_batch` writes a
batch body (docs/remoting.md, 8.1) as RocketMQ's ``MessageDecoder.encodeMessages`` does.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Sequence

from rocketstore.client._records import decode_messages as _native_decode
from rocketstore.client.message import (
    Message,
    MessageExt,
    SysFlag,
    decode_properties,
    encode_properties,
)
from rocketstore.common.batch import BatchBodyError, decode_batch_body, encode_batch_body
from rocketstore.common.compression import BodyCodecError, decompress_body
from rocketstore.common.record import (
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    MIN_RECORD_SIZE,
)
from rocketstore.common.text import quote

#: TOTALSIZE MAGIC BODYCRC QUEUEID FLAG QUEUEOFFSET PHYSICALOFFSET SYSFLAG BORNTIMESTAMP
_HEAD = struct.Struct(">iIiiiqqiq")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I16 = struct.Struct(">h")


log = logging.getLogger(__name__)


class CorruptMessageError(ValueError):
    """A record that cannot be decoded: the message names the field and its position."""


def decompressed_or_stored(body: bytes, sys_flag: int, topic: str, queue_id: int,
                           queue_offset: int) -> bytes:
    """A compressed body decoded with the codec its SYSFLAG names, or, when it does not decode,
    the body as stored with one WARNING line: the message is delivered (its sys_flag still has
    the COMPRESSED bit), neither dropped nor stopping the queue behind it."""
    try:
        return decompress_body(body, sys_flag)
    except BodyCodecError as exc:
        log.warning("message %s-%d@%d: compressed body delivered as stored (%d bytes, sysFlag "
                    "%#x): %s", quote(topic), queue_id, queue_offset, len(body),
                    sys_flag, exc)
        return body


#: The fixed part of the common record (IPv4 hosts), up to BODYLENGTH, in one unpack.
_FIXED_V4 = struct.Struct(">iIiiiqqiq8sq8siqi")
# plain ints: an IntFlag's & costs more than the rest of a record's header
_COMPRESSED = int(SysFlag.COMPRESSED)
_BORN_V6 = int(SysFlag.BORNHOST_V6)
_STORE_V6 = int(SysFlag.STOREHOST_V6)
_V6_BITS = _BORN_V6 | _STORE_V6


def decode_message(data: memoryview, pos: int = 0, *, decompress: bool = True) -> tuple[MessageExt, int]:
    """The record at ``pos`` of ``data`` and the position after it."""
    left = len(data) - pos
    if left < 8:
        raise CorruptMessageError(f"record at {pos}: {left} bytes left, a record needs at least 8")
    total, magic = struct.unpack_from(">iI", data, pos)
    if magic not in (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2):
        raise CorruptMessageError(f"record at {pos}: MAGICCODE is {magic:#010x}")
    if total < MIN_RECORD_SIZE or total > left:
        raise CorruptMessageError(f"record at {pos}: TOTALSIZE {total} is outside [{MIN_RECORD_SIZE}, {left}]")
    end = pos + total
    sys_flag = _I32.unpack_from(data, pos + 36)[0]
    if not sys_flag & _V6_BITS:
        (_, _, body_crc, queue_id, flag, queue_offset, physical_offset, sys_flag, born_timestamp, born_host,
         store_timestamp, store_host, reconsume_times, prepared_offset, body_length) = _FIXED_V4.unpack_from(data, pos)
        p = pos + _FIXED_V4.size
    else:
        born_v6 = bool(sys_flag & _BORN_V6)
        store_v6 = bool(sys_flag & _STORE_V6)
        fixed = MIN_RECORD_SIZE + (12 if born_v6 else 0) + (12 if store_v6 else 0)
        if total < fixed:
            raise CorruptMessageError(f"record at {pos}: TOTALSIZE {total} is below {fixed} for its hosts")
        (_, _, body_crc, queue_id, flag, queue_offset, physical_offset, sys_flag,
         born_timestamp) = _HEAD.unpack_from(data, pos)
        p = pos + _HEAD.size
        size = 20 if born_v6 else 8
        born_host = bytes(data[p:p + size])
        p += size
        store_timestamp = _I64.unpack_from(data, p)[0]
        p += 8
        size = 20 if store_v6 else 8
        store_host = bytes(data[p:p + size])
        p += size
        reconsume_times, prepared_offset, body_length = struct.unpack_from(">iqi", data, p)
        p += 16
    if body_length < 0 or p + body_length > end - 3:
        raise CorruptMessageError(f"record at {pos}: BODYLENGTH {body_length} runs past the record")
    body = bytes(data[p:p + body_length])
    p += body_length
    if magic == MESSAGE_MAGIC_CODE:
        topic_length = data[p]
        p += 1
    else:
        topic_length = _I16.unpack_from(data, p)[0]
        p += 2
    if topic_length <= 0 or p + topic_length > end - 2:
        raise CorruptMessageError(f"record at {pos}: TOPICLENGTH {topic_length} runs past the record")
    try:
        topic = str(data[p:p + topic_length], "utf-8")
    except UnicodeDecodeError:
        raise CorruptMessageError(f"record at {pos}: TOPIC is not UTF-8") from None
    p += topic_length
    properties_length = _I16.unpack_from(data, p)[0]
    p += 2
    if properties_length < 0 or p + properties_length != end:
        raise CorruptMessageError(
            f"record at {pos}: PROPERTIESLENGTH {properties_length} does not end the record")
    try:
        properties = decode_properties(str(data[p:end], "utf-8")) if properties_length else {}
    except UnicodeDecodeError:
        raise CorruptMessageError(f"record at {pos}: PROPERTIES are not UTF-8") from None
    if decompress and sys_flag & _COMPRESSED and body:
        body = decompressed_or_stored(body, sys_flag, topic, queue_id, queue_offset)
    msg = MessageExt(topic, body, flag=flag, properties=properties)
    msg.queue_id = queue_id
    msg.store_size = total
    msg.queue_offset = queue_offset
    msg.sys_flag = sys_flag
    msg.born_timestamp = born_timestamp
    msg._born_host = born_host
    msg.store_timestamp = store_timestamp
    msg._store_host = store_host
    msg.commit_log_offset = physical_offset
    msg.body_crc = body_crc
    msg.reconsume_times = reconsume_times
    msg.prepared_transaction_offset = prepared_offset
    return msg, end


def decode_messages_py(body: bytes | bytearray | memoryview, *, decompress: bool = True,
                       broker_name: str | None = None) -> list[MessageExt]:
    """Every record of a pull, query or view reply body, in order: the plain-Python reference
    of the native :func:`decode_messages`."""
    data = memoryview(body).cast("B")
    messages: list[MessageExt] = []
    pos = 0
    end = len(data)
    while pos < end:
        msg, pos = decode_message(data, pos, decompress=decompress)
        msg.broker_name = broker_name
        messages.append(msg)
    return messages


def decode_messages(body: bytes | bytearray | memoryview | None, *, decompress: bool = True,
                    broker_name: str | None = None) -> list[MessageExt]:
    """Every record of a pull, query or view reply body, in order (native; the same checks
    and results as :func:`decode_messages_py`)."""
    return _native_decode(body, decompress, broker_name)


def encode_batch(messages: Sequence[Message]) -> bytes:
    """A batch body: each message as TOTALSIZE, MAGIC 0, BODYCRC 0, FLAG, BODY, PROPERTIES."""
    return encode_batch_body(
        (msg.flag, msg.body, encode_properties(msg.properties).encode("utf-8")) for msg in messages)


def decode_batch(body: bytes) -> list[Message]:
    """The messages of a batch body (tests and tools; topic left empty). Checks every length."""
    try:
        entries = decode_batch_body(body)
    except BatchBodyError as exc:
        raise CorruptMessageError(str(exc)) from None
    messages: list[Message] = []
    for flag, msg_body, properties in entries:
        msg = Message("", msg_body, flag=flag)
        msg.properties = decode_properties(properties.decode("utf-8"))
        messages.append(msg)
    return messages
