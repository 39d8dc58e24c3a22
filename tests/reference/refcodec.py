"""Independent reference codec for RocketMQ 4.9 store files (tests only).

Pure Python (``struct`` + ``zlib`` + ``ipaddress``); deliberately imports nothing from
``rocketstore`` so the native codec can be checked against it. Follows docs/format.md and
RocketMQ 4.9.8's CommitLog / MessageDecoder / ConsumeQueue / IndexFile / IndexService code.
"""

from __future__ import annotations

import base64
import ipaddress
import re
import struct
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MESSAGE_MAGIC = 0xDAA320A7  # v1 record
BLANK_MAGIC = 0xCBD43194  # END_FILE marker
MIN_RECORD_SIZE = 91  # v1 record with IPv4 hosts, empty body/topic/properties
SYSFLAG_BORN_V6 = 0x10
SYSFLAG_STORE_V6 = 0x20
CQ_UNIT = struct.Struct(">qiq")  # commitLogOffset, size, tagsCode
INDEX_HEADER = struct.Struct(">qqqqii")  # begin/end timestamp, begin/end phyOffset, slots, count
INDEX_ITEM = struct.Struct(">iqii")  # keyHash, phyOffset, timeDiff, prevIndex
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
# fmt: off
# MessageStoreConfig.messageDelayLevel default, in ms, level 1..18
DELAY_LEVELS_MS = [
    1_000, 5_000, 10_000, 30_000, 60_000, 120_000, 180_000, 240_000, 300_000, 360_000,
    420_000, 480_000, 540_000, 600_000, 1_200_000, 1_800_000, 3_600_000, 7_200_000,
]

# messages.jsonl fields reproduced by RefRecord.to_json_dict (seq/note/inConsumeQueue/indexed
# are the fixture generator's extras).
JSON_FIELDS = (
    "topic", "queueId", "queueOffset", "commitLogOffset", "storeSize", "msgId", "tags",
    "tagsCode", "keys", "uniqKey", "properties", "propertiesString", "bodyCRC", "bodyLen",
    "flag", "sysFlag", "reconsumeTimes", "preparedTransactionOffset", "bornTimestamp",
    "bornHost", "storeTimestamp", "storeHost", "body_b64",
)
# fmt: on


TOPIC_RE = re.compile(r"[%|a-zA-Z0-9_-]{1,127}")


class RefDecodeError(ValueError):
    """The bytes are not a consistent v1 record / store file."""


# ---------------------------------------------------------------------------------- hashing


def java_hash(s: str) -> int:
    """Java ``String.hashCode()``: over UTF-16 code units, int32 wrap-around, signed."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for (unit,) in struct.iter_unpack(">H", data):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def index_key_hash(key: str) -> int:
    """IndexFile.indexKeyHashMethod: abs(hashCode), Integer.MIN_VALUE -> 0."""
    h = java_hash(key)
    return 0 if h == -(1 << 31) else abs(h)


def body_crc(body: bytes) -> int:
    return zlib.crc32(body) & 0x7FFFFFFF


# ---------------------------------------------------------------------- properties / hosts


def parse_properties(s: str) -> dict[str, str]:
    """MessageDecoder.string2messageProperties: pairs on \\x02, name/value on the first \\x01;
    pairs with an empty name or value (or no \\x01) are dropped; later duplicates win."""
    out: dict[str, str] = {}
    for pair in s.split("\x02"):
        name, sep, value = pair.partition("\x01")
        if sep and name and value:
            out[name] = value
    return out


def format_host(raw: bytes, port: int) -> str:
    if len(raw) == 4:
        return f"{ipaddress.IPv4Address(raw)}:{port}"
    if len(raw) == 16:
        addr = ipaddress.IPv6Address(raw)
        if addr.ipv4_mapped is not None:    # RFC 5952 section 5 (Python >= 3.13 does this)
            return f"[::ffff:{addr.ipv4_mapped}]:{port}"
        return f"[{addr.compressed}]:{port}"
    raise ValueError(f"host address must be 4 or 16 bytes, got {len(raw)}")


def parse_host(host: str) -> tuple[bytes, int]:
    """Inverse of format_host: "a.b.c.d:port" or "[v6]:port" -> (packed address, port)."""
    addr, _, port = host.rpartition(":")
    return ipaddress.ip_address(addr.strip("[]")).packed, int(port)


def msg_id(store_host_raw: bytes, port: int, offset: int) -> str:
    """offsetMsgId: store IP + port (int32) + CommitLog offset (int64), uppercase hex."""
    return (store_host_raw + struct.pack(">iq", port, offset)).hex().upper()


def tags_code(topic: str, props: Mapping[str, str], store_timestamp: int) -> int:
    """What CommitLog.checkMessageAndReturnSize puts in the ConsumeQueue unit."""
    tags = props.get("TAGS")
    code = java_hash(tags) if tags else 0
    delay = props.get("DELAY")
    if topic == SCHEDULE_TOPIC and delay is not None:
        level = min(int(delay), len(DELAY_LEVELS_MS))
        if level > 0:
            code = store_timestamp + DELAY_LEVELS_MS[level - 1]
    return code


# ----------------------------------------------------------------------------- records


@dataclass
class RefRecord:
    topic: str
    queueId: int
    queueOffset: int
    commitLogOffset: int
    storeSize: int
    msgId: str
    tags: str | None
    tagsCode: int
    keys: str | None
    uniqKey: str | None
    properties: dict[str, str]
    propertiesString: str
    bodyCRC: int
    bodyLen: int
    flag: int
    sysFlag: int
    reconsumeTimes: int
    preparedTransactionOffset: int
    bornTimestamp: int
    bornHost: str
    storeTimestamp: int
    storeHost: str
    body: bytes = field(repr=False)
    magic: int = MESSAGE_MAGIC

    def to_json_dict(self) -> dict[str, Any]:
        """The messages.jsonl line (minus the generator's extras); properties sorted by name
        in Java String order (UTF-16 code units)."""
        d = {k: getattr(self, k) for k in JSON_FIELDS if k != "body_b64"}
        d["properties"] = dict(
            sorted(
                self.properties.items(), key=lambda kv: kv[0].encode("utf-16-be", "surrogatepass")
            )
        )
        d["body_b64"] = base64.b64encode(self.body).decode("ascii")
        return d

    def encode(self) -> bytes:
        """Re-encode with encode_record (exact stored properties text and stored CRC)."""
        return encode_record(
            topic=self.topic,
            queueId=self.queueId,
            queueOffset=self.queueOffset,
            commitLogOffset=self.commitLogOffset,
            body=self.body,
            properties=self.propertiesString,
            flag=self.flag,
            sysFlag=self.sysFlag,
            bornTimestamp=self.bornTimestamp,
            bornHost=self.bornHost,
            storeTimestamp=self.storeTimestamp,
            storeHost=self.storeHost,
            reconsumeTimes=self.reconsumeTimes,
            preparedTransactionOffset=self.preparedTransactionOffset,
            bodyCRC=self.bodyCRC,
        )


def decode_record(buf: bytes, pos: int = 0, *, check_crc: bool = True) -> RefRecord:
    """Decode the v1 record at ``buf[pos:]``; RefDecodeError on any inconsistency."""
    if pos < 0 or len(buf) - pos < 8:
        raise RefDecodeError(f"no record header at {pos}")
    total, magic = struct.unpack_from(">iI", buf, pos)
    if magic != MESSAGE_MAGIC:
        raise RefDecodeError(f"bad magic {magic:#010x} at {pos}")
    if total < MIN_RECORD_SIZE or total > len(buf) - pos:
        raise RefDecodeError(f"TOTALSIZE {total} out of range at {pos}")
    rec = memoryview(buf)[pos : pos + total]
    cur = 8

    def take(fmt: str) -> tuple[Any, ...]:
        nonlocal cur
        size = struct.calcsize(fmt)
        if cur + size > total:
            raise RefDecodeError(f"field {fmt!r} overflows the {total}-byte record at {pos}")
        vals = struct.unpack_from(fmt, rec, cur)
        cur += size
        return vals

    def take_bytes(n: int, what: str) -> bytes:
        nonlocal cur
        if n < 0 or cur + n > total:
            raise RefDecodeError(f"{what} length {n} overflows the {total}-byte record at {pos}")
        cur += n
        return bytes(rec[cur - n : cur])

    def text(raw: bytes, what: str) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise RefDecodeError(f"{what} is not UTF-8 at {pos}: {e}") from None

    crc, queue_id, flag, queue_offset, phys, sys_flag, born_ts = take(">iiiqqiq")
    born_raw = take_bytes(16 if sys_flag & SYSFLAG_BORN_V6 else 4, "born host")
    (born_port,) = take(">i")
    (store_ts,) = take(">q")
    store_raw = take_bytes(16 if sys_flag & SYSFLAG_STORE_V6 else 4, "store host")
    (store_port,) = take(">i")
    reconsume, prepared, body_len = take(">iqi")
    body = take_bytes(body_len, "body")
    (topic_len,) = take(">B")
    if topic_len > 127:
        raise RefDecodeError(f"topic length {topic_len} > 127 at {pos}")
    topic = text(take_bytes(topic_len, "topic"), "topic")
    (props_len,) = take(">h")
    props_str = text(take_bytes(props_len, "properties"), "properties")
    if cur != total:
        raise RefDecodeError(f"TOTALSIZE {total} != sum of the parts {cur} at {pos}")
    if props_str.endswith("\x00"):     # rocketstore's rule: a NUL-ended tail is a torn record
        raise RefDecodeError(f"properties end in NUL (torn record) at {pos}")
    # the header fields the CRC does not cover must be what a writer can write
    if not 0 <= born_port <= 65535 or not 0 <= store_port <= 65535:
        raise RefDecodeError(f"host port {born_port}/{store_port} out of range at {pos}")
    if not TOPIC_RE.fullmatch(topic):
        raise RefDecodeError(f"illegal topic {topic!r} at {pos}")
    if queue_id < 0 or queue_offset < 0:
        raise RefDecodeError(f"negative queue id or offset at {pos}")
    if check_crc and crc != body_crc(body):
        raise RefDecodeError(f"BODYCRC {crc} != {body_crc(body)} at {pos}")
    props = parse_properties(props_str)
    return RefRecord(
        topic=topic,
        queueId=queue_id,
        queueOffset=queue_offset,
        commitLogOffset=phys,
        storeSize=total,
        msgId=msg_id(store_raw, store_port, phys),
        tags=props.get("TAGS"),
        tagsCode=tags_code(topic, props, store_ts),
        keys=props.get("KEYS"),
        uniqKey=props.get("UNIQ_KEY"),
        properties=props,
        propertiesString=props_str,
        bodyCRC=crc,
        bodyLen=body_len,
        flag=flag,
        sysFlag=sys_flag,
        reconsumeTimes=reconsume,
        preparedTransactionOffset=prepared,
        bornTimestamp=born_ts,
        bornHost=format_host(born_raw, born_port),
        storeTimestamp=store_ts,
        storeHost=format_host(store_raw, store_port),
        body=body,
        magic=magic,
    )


def encode_record(
    *,
    topic: str,
    queueId: int,
    queueOffset: int,
    commitLogOffset: int,
    body: bytes,
    properties: str | Mapping[str, str] = "",
    flag: int = 0,
    sysFlag: int = 0,
    bornTimestamp: int,
    bornHost: str,
    storeTimestamp: int,
    storeHost: str,
    reconsumeTimes: int = 0,
    preparedTransactionOffset: int = 0,
    bodyCRC: int | None = None,
) -> bytes:
    """Encode one v1 CommitLog record. ``properties`` is the exact stored text, or a mapping
    joined in its iteration order without a trailing \\x02. The 0x10/0x20 sysFlag bits are
    set from the host kinds (a given bit that contradicts its host is an error)."""
    born_raw, born_port = parse_host(bornHost)
    store_raw, store_port = parse_host(storeHost)
    for bit, raw, what in (
        (SYSFLAG_BORN_V6, born_raw, "born"),
        (SYSFLAG_STORE_V6, store_raw, "store"),
    ):
        if len(raw) == 16:
            sysFlag |= bit
        elif sysFlag & bit:
            raise ValueError(f"sysFlag has the IPv6 {what}-host bit but {what} host is IPv4")
    if not isinstance(properties, str):
        properties = "\x02".join(f"{k}\x01{v}" for k, v in properties.items())
    topic_b, props_b = topic.encode("utf-8"), properties.encode("utf-8")
    if len(topic_b) > 127:
        raise ValueError(f"topic is {len(topic_b)} bytes (max 127)")
    if len(props_b) > 32767:
        raise ValueError(f"properties are {len(props_b)} bytes (max 32767)")
    total = MIN_RECORD_SIZE + len(body) + len(topic_b) + len(props_b)
    total += (len(born_raw) - 4) + (len(store_raw) - 4)
    crc = body_crc(body) if bodyCRC is None else bodyCRC
    out = b"".join(
        (
            struct.pack(
                ">iIiiiqqiq",
                total,
                MESSAGE_MAGIC,
                crc,
                queueId,
                flag,
                queueOffset,
                commitLogOffset,
                sysFlag,
                bornTimestamp,
            ),
            born_raw,
            struct.pack(">iq", born_port, storeTimestamp),
            store_raw,
            struct.pack(">iiqi", store_port, reconsumeTimes, preparedTransactionOffset, len(body)),
            body,
            struct.pack(">B", len(topic_b)),
            topic_b,
            struct.pack(">h", len(props_b)),
            props_b,
        )
    )
    assert len(out) == total
    return out


# ------------------------------------------------------------------------------- files


def _segments(directory: str | Path) -> list[Path]:
    """The segment files (named by their start offset); not a file being created beside them
    (".<name>.creating", made by a running store's allocate service)."""
    return sorted((p for p in Path(directory).iterdir() if p.is_file() and p.name.isdigit()),
                  key=lambda p: p.name)


def iter_commitlog(store_dir: str | Path) -> Iterator[RefRecord]:
    """Every record of ``<store_dir>/commitlog`` in offset order. A BLANK magic ends a segment;
    a zero TOTALSIZE (or a segment too short for a header) ends the data."""
    for seg in _segments(Path(store_dir) / "commitlog"):
        base, data, pos = int(seg.name), seg.read_bytes(), 0
        while True:
            if len(data) - pos < 8:
                return
            total, magic = struct.unpack_from(">iI", data, pos)
            if magic == BLANK_MAGIC:
                break
            if total == 0:
                return
            rec = decode_record(data, pos)
            if rec.commitLogOffset != base + pos:
                raise RefDecodeError(
                    f"PHYSICALOFFSET {rec.commitLogOffset} != file position {base + pos}"
                )
            yield rec
            pos += rec.storeSize


@dataclass
class LogWalk:
    """What walk_commitlog found: the valid records, the damaged ranges between them, and
    where the valid data ends (bytes after it are the torn tail)."""

    records: list[RefRecord]
    damaged: list[tuple[int, int]]
    end: int


def _valid_at(data: bytes, base: int, pos: int, segment: int, check_crc: bool) -> str | None:
    """'record' or 'blank' when a valid record (PHYSICALOFFSET == its position) or an END_FILE
    blank that fills the segment exactly starts at pos, else None."""
    if len(data) - pos < 8:
        return None
    total, magic = struct.unpack_from(">iI", data, pos)
    if magic == BLANK_MAGIC:
        return "blank" if total == segment - pos else None
    if magic != MESSAGE_MAGIC:
        return None
    try:
        rec = decode_record(data, pos, check_crc=check_crc)
    except RefDecodeError:
        return None
    return "record" if rec.commitLogOffset == base + pos else None


def walk_commitlog(store_dir: str | Path, segment: int | None = None,
                   check_crc: bool = True) -> LogWalk:
    """Every valid record of ``<store_dir>/commitlog`` under rocketstore's damage policy:
    where a record is invalid (or zeros stand where one should start), the walk goes on at
    the next position holding a valid record or a blank that ends the segment; a bad region
    followed by valid data is damage, bad bytes after the last valid record are the tail.
    segment: the segment size (default: the largest file's)."""
    segs = _segments(Path(store_dir) / "commitlog")
    if segment is None:
        segment = max((p.stat().st_size for p in segs), default=0)
    records: list[RefRecord] = []
    damaged: list[tuple[int, int]] = []
    pending: list[tuple[int, int]] = []
    end = int(segs[0].name) if segs else 0
    expected = end
    for seg in segs:
        base, data = int(seg.name), seg.read_bytes()
        if base > expected:
            pending.append((expected, base))
        expected = base + segment
        pos = 0
        while pos < len(data):
            kind = _valid_at(data, base, pos, segment, check_crc)
            if kind == "blank":
                damaged += pending
                pending = []
                end = base + segment
                pos = len(data)
                break
            if kind == "record":
                rec = decode_record(data, pos, check_crc=check_crc)
                records.append(rec)
                damaged += pending
                pending = []
                pos += rec.storeSize
                end = base + pos
                continue
            # resynchronise: the next position where a valid record or blank starts
            q = pos + 1
            while True:
                candidates = [i - 4 for i in (data.find(struct.pack(">I", MESSAGE_MAGIC), q + 4),
                                              data.find(struct.pack(">I", BLANK_MAGIC), q + 4))
                              if i >= 0]
                if not candidates:
                    q = -1
                    break
                q = min(candidates)
                if _valid_at(data, base, q, segment, check_crc):
                    break
                q += 1
            if q < 0:
                pending.append((base + pos, base + segment))
                break
            pending.append((base + pos, base + q))
            pos = q
        else:
            if len(data) < segment:
                pending.append((base + len(data), base + segment))
    merged: list[tuple[int, int]] = []
    for a, b in damaged:
        if merged and merged[-1][1] >= a:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return LogWalk(records, merged, end)


def read_consume_queue(queue_dir: str | Path) -> list[tuple[int, int, int]]:
    """(commitLogOffset, size, tagsCode) of the valid units, in logical order from the first
    segment's start (logical offset of item 0 = first segment name / 20); stops at the first
    invalid unit (commitLogOffset < 0 or size <= 0, e.g. all zero)."""
    units: list[tuple[int, int, int]] = []
    for seg in _segments(queue_dir):
        data = seg.read_bytes()
        for offset, size, code in CQ_UNIT.iter_unpack(data[: len(data) - len(data) % 20]):
            if offset < 0 or size <= 0:
                return units
            units.append((offset, size, code))
    return units


def read_index_file(
    path: str | Path, hash_slot_num: int = 5_000_000, index_num: int = 20_000_000
) -> tuple[dict[str, int], list[int], list[tuple[int, int, int, int]]]:
    """(header, slots, items) of one IndexFile. ``items[n]`` is item n for n < indexCount
    (item 0 is the unused placeholder) as (keyHash, phyOffset, timeDiff, prevIndex)."""
    data = Path(path).read_bytes()
    expected = INDEX_HEADER.size + hash_slot_num * 4 + index_num * INDEX_ITEM.size
    if len(data) != expected:
        raise RefDecodeError(f"{path}: {len(data)} bytes, expected {expected}")
    names = (
        "beginTimestamp",
        "endTimestamp",
        "beginPhyOffset",
        "endPhyOffset",
        "hashSlotCount",
        "indexCount",
    )
    header = dict(zip(names, INDEX_HEADER.unpack_from(data, 0), strict=True))
    slots = list(struct.unpack_from(f">{hash_slot_num}i", data, INDEX_HEADER.size))
    items_at = INDEX_HEADER.size + hash_slot_num * 4
    count = min(max(header["indexCount"], 0), index_num)
    items = [INDEX_ITEM.unpack_from(data, items_at + n * INDEX_ITEM.size) for n in range(count)]
    return header, slots, items


def _select_phy_offsets(
    out: list[int],
    header: dict[str, int],
    slots: list[int],
    items: list[tuple[int, int, int, int]],
    key_hash: int,
    max_num: int,
    begin: int,
    end: int,
) -> None:
    """IndexFile.selectPhyOffset (4.9.8)."""
    count = header["indexCount"]
    slot_value = slots[key_hash % len(slots)]
    if slot_value <= 0 or slot_value > count or count <= 1:
        return
    cur = slot_value
    while len(out) < max_num:
        hash_read, phy, time_diff, prev = items[cur]
        if time_diff < 0:
            break
        time_read = header["beginTimestamp"] + time_diff * 1000
        if hash_read == key_hash and begin <= time_read <= end:
            out.append(phy)
        if prev <= 0 or prev > count or prev == cur or time_read < begin:
            break
        cur = prev


def ref_query_offsets(
    index_dir: str | Path,
    topic: str,
    key: str,
    max_num: int,
    begin: int,
    end: int,
    hash_slot_num: int = 5_000_000,
    index_num: int = 20_000_000,
) -> list[int]:
    """IndexService.queryOffset (4.9.8): newest file first, each chain newest item first.
    ``max_num`` must already be capped by maxMsgsNumBatch (64 by default)."""
    key_hash = index_key_hash(f"{topic}#{key}")
    out: list[int] = []
    for path in reversed(_segments(index_dir)):
        header, slots, items = read_index_file(path, hash_slot_num, index_num)
        fb, fe = header["beginTimestamp"], header["endTimestamp"]
        if (begin < fb and end > fe) or fb <= begin <= fe or fb <= end <= fe:
            _select_phy_offsets(out, header, slots, items, key_hash, max_num, begin, end)
        if fb < begin or len(out) >= max_num:
            break
    return out


def ref_query(
    index_dir: str | Path,
    topic: str,
    key: str,
    max_num: int,
    begin: int,
    end: int,
    hash_slot_num: int = 5_000_000,
    index_num: int = 20_000_000,
) -> list[int]:
    """The offsets DefaultMessageStore.queryMessage returns: queryOffset's list sorted
    ascending (Collections.sort), duplicates kept, no topic/key re-check."""
    return sorted(
        ref_query_offsets(index_dir, topic, key, max_num, begin, end, hash_slot_num, index_num)
    )


def read_checkpoint(path: str | Path) -> dict[str, int]:
    data = Path(path).read_bytes()
    if len(data) < 24:
        raise RefDecodeError(f"{path}: checkpoint is {len(data)} bytes")
    phys, logics, index = struct.unpack_from(">qqq", data, 0)
    return {"physicMsgTimestamp": phys, "logicsMsgTimestamp": logics, "indexMsgTimestamp": index}
