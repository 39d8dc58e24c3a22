"""Native codec: CRC32, Java hash, hosts and ids, and full-field round trips through a real
store, cross-checked against the independent pure-Python reference codec (refcodec)."""

from __future__ import annotations

import base64
import ipaddress
import os
import random
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest
import refcodec
from helpers import SCHEDULE_TOPIC, STORE_HOST, make_config, native_dict, ref_dict
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketstore import CorruptRecordError, Message, MessageStore, PutMessageStatus, StoreConfig
from rocketstore._native import hashes, hosts, record

SETTINGS = settings(
    deadline=None,
    max_examples=80,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
EXTRA_FIELDS = {"seq", "note", "inConsumeQueue", "indexed"}
TOPIC_ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-%|"
INT32 = st.integers(-(2**31), 2**31 - 1)

# ---------------------------------------------------------------------------- CRC32


def test_crc32_every_length_and_alignment() -> None:
    rng = random.Random(20240601)
    data = rng.randbytes(2048 + 16)
    for length in range(0, 2049):
        for align in range(8):
            chunk = memoryview(data)[align : align + length]
            expected = zlib.crc32(chunk)
            assert hashes.crc32(chunk) == expected, (length, align)
    for length in (0, 1, 7, 100, 2048):
        assert hashes.body_crc(data[:length]) == zlib.crc32(data[:length]) & 0x7FFFFFFF


def test_crc32_large_buffers_unaligned_and_chained() -> None:
    rng = random.Random(7)
    big = rng.randbytes(5 * 1024 * 1024 + 13)
    for start, length in ((0, len(big)), (3, 3 * 1024 * 1024 + 5), (1, 65536), (5, 65535)):
        view = memoryview(big)[start : start + length]
        assert hashes.crc32(view) == zlib.crc32(view), (start, length)
    # continuing from a previous value, like zlib.crc32(data, value)
    head, tail = big[: 1 << 20], big[1 << 20 :]
    assert hashes.crc32(tail, hashes.crc32(head)) == zlib.crc32(big)
    assert hashes.crc32(b"", 12345) == 12345
    assert hashes.crc32(bytearray(b"abc")) == zlib.crc32(b"abc")
    assert hashes.CRC32_IMPL  # names the implementation in use


def test_crc32_rejects_bad_buffers_cleanly() -> None:
    with pytest.raises((BufferError, ValueError)):
        hashes.crc32(memoryview(b"abcdef")[::2])
    with pytest.raises(TypeError):
        hashes.crc32("text")


@SETTINGS
@given(st.binary(max_size=4096), st.integers(0, 2**32 - 1))
def test_crc32_hypothesis(data: bytes, start: int) -> None:
    assert hashes.crc32(data, start) == zlib.crc32(data, start)


# ---------------------------------------------------------------------------- Java hash


@SETTINGS
@given(st.text(alphabet=st.characters(), max_size=200))
def test_java_hash_matches_reference(text: str) -> None:
    # st.characters() includes astral characters and lone surrogates (UTF-16 code units)
    assert hashes.java_hash(text) == refcodec.java_hash(text)


@pytest.mark.parametrize(
    "text, expected",
    [("", 0), ("a", 97), ("Aa", 2112), ("BB", 2112), ("📦", 1772617), ("订单", 1129459)],
)
def test_java_hash_known_values(text: str, expected: int) -> None:
    assert hashes.java_hash(text) == expected == refcodec.java_hash(text)


def test_java_hash_wraps_int32() -> None:
    text = "polygenelubricants"  # Java hashCode is Integer.MIN_VALUE
    assert hashes.java_hash(text) == -(2**31) == refcodec.java_hash(text)
    with pytest.raises(TypeError):
        hashes.java_hash(None)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- hosts and ids

PORTS = st.integers(0, 65535)
IPV4 = st.ip_addresses(v=4)
IPV6 = st.ip_addresses(v=6)


def host_text(addr: ipaddress.IPv4Address | ipaddress.IPv6Address, port: int) -> str:
    return f"[{addr}]:{port}" if addr.version == 6 else f"{addr}:{port}"


@SETTINGS
@given(st.one_of(IPV4, IPV6), PORTS, st.integers(0, 2**63 - 1))
def test_hosts_and_msg_ids(addr: Any, port: int, offset: int) -> None:
    text = host_text(addr, port)
    raw, p = hosts.parse_host(text)
    assert raw == addr.packed and p == port
    assert hosts.format_host(raw, port) == refcodec.format_host(raw, port)
    assert hosts.parse_host(hosts.format_host(raw, port)) == (raw, port)
    mid = hosts.make_msg_id(text, offset)
    assert mid == refcodec.msg_id(raw, port, offset)
    assert len(mid) == (32 if addr.version == 4 else 56)
    host_back, off_back = hosts.parse_msg_id(mid)
    assert hosts.parse_host(host_back) == (raw, port) and off_back == offset


@pytest.mark.parametrize(
    "bad", ["1.2.3.4", "host:80", "1.2.3.4:x", "[::1", "[::1]80", "1.2.3.4:-1", "[::1]:"]
)
def test_parse_host_rejects_with_value_error(bad: str) -> None:
    with pytest.raises(ValueError):
        hosts.parse_host(bad)


@pytest.mark.parametrize("bad", ["", "XYZ", "00" * 15, "G" * 32,
                                 "C0A8000A" + "00010000" + "00" * 8])   # port 65536
def test_parse_msg_id_rejects(bad: str) -> None:
    with pytest.raises(ValueError):
        hosts.parse_msg_id(bad)


# ---------------------------------------------------------------------------- round trips


class RoundTrip:
    """One store shared by the round-trip tests of this module, with a queue-offset model."""

    def __init__(self, root: Path) -> None:
        self.config = make_config(root, mapped_file_size_commit_log=16 * 1024 * 1024)
        self.store = MessageStore.open(root, self.config)
        self.next_qoff: dict[tuple[str, int], int] = {}

    def check(self, msg: Message, queue_id: int, expect: dict[str, Any]) -> None:
        store = self.store
        before_props = dict(msg.properties)
        r = store.put_message(msg, queue_id)
        assert r.ok, r
        assert r.status == PutMessageStatus.PUT_OK
        # UNIQ_KEY: kept when given, generated (and kept on the Message) when absent
        if "UNIQ_KEY" in before_props:
            assert msg.uniq_key == before_props["UNIQ_KEY"]
        else:
            assert isinstance(msg.uniq_key, str) and len(msg.uniq_key) == 32
            int(msg.uniq_key, 16)
        assert r.uniq_key == msg.uniq_key
        expected_props = {**before_props, "UNIQ_KEY": msg.uniq_key}
        assert msg.properties == expected_props

        key = (msg.topic, queue_id)
        tran = msg.sys_flag & 0xC
        if tran in (0x4, 0xC):
            expected_qoff = 0
        else:
            expected_qoff = self.next_qoff.get(key, 0)
            self.next_qoff[key] = expected_qoff + 1
        assert r.queue_offset == expected_qoff

        ext = store.look_message_by_offset(r.commitlog_offset)
        assert ext is not None
        store_host = expect["store_host"]
        born_host = expect["born_host"]
        sys_flag = msg.sys_flag
        if len(hosts.parse_host(born_host)[0]) == 16:
            sys_flag |= 0x10
        if len(hosts.parse_host(store_host)[0]) == 16:
            sys_flag |= 0x20
        assert ext.topic == msg.topic
        assert bytes(ext.body) == msg.body
        assert ext.queue_id == queue_id
        assert ext.queue_offset == expected_qoff
        assert ext.commitlog_offset == r.commitlog_offset
        assert ext.store_size == r.wrote_bytes == len(ext.record)
        assert ext.body_crc == zlib.crc32(msg.body) & 0x7FFFFFFF
        assert ext.flag == msg.flag
        assert ext.sys_flag == sys_flag
        assert ext.transaction_type == tran
        born_ts = msg.born_timestamp if msg.born_timestamp is not None else r.store_timestamp
        assert ext.born_timestamp == born_ts
        assert ext.store_timestamp == r.store_timestamp
        assert ext.reconsume_times == msg.reconsume_times
        assert ext.prepared_transaction_offset == msg.prepared_transaction_offset
        assert hosts.parse_host(ext.born_host) == hosts.parse_host(born_host)
        assert hosts.parse_host(ext.store_host) == hosts.parse_host(store_host)
        assert ext.properties == expected_props
        assert ext.tags == msg.tags
        assert ext.keys == msg.keys
        assert ext.uniq_key == msg.uniq_key
        tags = expected_props.get("TAGS")
        assert ext.tags_code == (hashes.java_hash(tags) if tags else 0)
        assert ext.msg_id == r.msg_id == hosts.make_msg_id(store_host, r.commitlog_offset)
        size = ext.store_size
        assert size == (
            91
            + len(msg.body)
            + len(msg.topic.encode())
            + len(ext.properties_string.encode())
            + 12 * bool(sys_flag & 0x10)
            + 12 * bool(sys_flag & 0x20)
        )

        raw = bytes(ext.record)
        assert bytes(store.commit_log.get_message(r.commitlog_offset, size)) == raw
        # the independent decoder agrees on every field
        ref = refcodec.decode_record(raw)
        if msg.topic != SCHEDULE_TOPIC:
            assert native_dict(ext) == ref_dict(ref)
        assert ref.properties == expected_props
        assert refcodec.parse_properties(ext.properties_string) == expected_props
        assert not ext.properties_string.endswith("\x02")
        # and encoding the same fields independently gives the very same bytes
        assert ref.encode() == raw
        again = refcodec.encode_record(
            topic=msg.topic,
            queueId=queue_id,
            queueOffset=expected_qoff,
            commitLogOffset=r.commitlog_offset,
            body=msg.body,
            properties=ext.properties_string,
            flag=msg.flag,
            sysFlag=msg.sys_flag,
            bornTimestamp=born_ts,
            bornHost=born_host,
            storeTimestamp=r.store_timestamp,
            storeHost=store_host,
            reconsumeTimes=msg.reconsume_times,
            preparedTransactionOffset=msg.prepared_transaction_offset,
        )
        assert again == raw
        # the buffer decoder sees the same record
        d2 = record.decode_message(raw, check_crc=True)
        assert native_dict(d2) == native_dict(ext)
        assert record.record_status(raw, 0, check_crc=True, expected_phy=r.commitlog_offset) == (
            "ok",
            size,
            None,
        )


@pytest.fixture(scope="module")
def roundtrip(tmp_path_factory: pytest.TempPathFactory):
    rt = RoundTrip(tmp_path_factory.mktemp("roundtrip"))
    yield rt
    # everything written in this module scans back clean, in order
    offsets = [m.commitlog_offset for m in rt.store.scan(check_crc=True)]
    assert offsets == sorted(offsets) and len(offsets) == len(set(offsets))
    rt.store.shutdown()


PROP_CHARS = st.characters(codec="utf-8", exclude_characters="\x00\x01\x02")
PROP_TEXT = st.text(PROP_CHARS, min_size=1, max_size=20)
TOPICS = st.text(st.sampled_from(TOPIC_ALPHABET), min_size=1, max_size=127).filter(
    lambda t: t != SCHEDULE_TOPIC
)
KEYS = st.one_of(
    st.none(),
    st.lists(
        st.text(st.characters(codec="utf-8", exclude_characters="\x00\x01\x02 "), max_size=12),
        max_size=4,
    ),
    st.text(st.characters(codec="utf-8", exclude_characters="\x00\x01\x02"), max_size=30),
)
HOSTS = st.one_of(st.none(), st.builds(host_text, IPV4, PORTS), st.builds(host_text, IPV6, PORTS))
SYS_FLAGS = st.builds(
    lambda tran, low: tran | low, st.sampled_from([0, 4, 8, 12]), st.sampled_from([0, 1, 2, 3])
)


@st.composite
def messages(draw: st.DrawFn, body: st.SearchStrategy[bytes] | None = None) -> dict[str, Any]:
    return {
        "topic": draw(TOPICS),
        "body": draw(body if body is not None else st.binary(max_size=2048)),
        "tags": draw(st.one_of(st.none(), st.text(PROP_CHARS, max_size=16))),
        "keys": draw(KEYS),
        "properties": draw(st.one_of(st.none(), st.dictionaries(PROP_TEXT, PROP_TEXT, max_size=6))),
        "flag": draw(INT32),
        "born_timestamp": draw(st.one_of(st.none(), st.integers(0, 2**63 - 1))),
        "born_host": draw(HOSTS),
        "store_host": draw(HOSTS),
        "sys_flag": draw(SYS_FLAGS),
        "reconsume_times": draw(st.integers(0, 2**31 - 1)),
        "prepared_transaction_offset": draw(st.integers(-(2**63), 2**63 - 1)),
        "uniq_key": draw(st.one_of(st.none(), PROP_TEXT)),
        "delay_level": draw(st.one_of(st.none(), st.integers(0, 18))),
        "queue_id": draw(st.integers(0, 40)),
    }


def build(fields: dict[str, Any]) -> tuple[Message, int, dict[str, Any]]:
    f = dict(fields)
    queue_id = f.pop("queue_id")
    msg = Message(**f)
    expect = {
        "store_host": f["store_host"] or STORE_HOST,
        # without a born host the writer uses the store host (an embedded producer)
        "born_host": f["born_host"] or STORE_HOST,
    }
    return msg, queue_id, expect


@SETTINGS
@given(messages())
def test_round_trip_every_field(roundtrip: RoundTrip, fields: dict[str, Any]) -> None:
    msg, queue_id, expect = build(fields)
    roundtrip.check(msg, queue_id, expect)


@settings(deadline=None, max_examples=12, suppress_health_check=list(HealthCheck))
@given(messages(body=st.sampled_from([0, 1, 65_536, 1 << 20, (4 << 20) - 1, 4 << 20])))
def test_round_trip_large_bodies(roundtrip: RoundTrip, fields: dict[str, Any]) -> None:
    size = fields["body"]
    fields["body"] = random.Random(size).randbytes(size)
    msg, queue_id, expect = build(fields)
    roundtrip.check(msg, queue_id, expect)


@pytest.mark.parametrize("size", [0, 1, 1 << 20, 4 << 20])
def test_round_trip_large_body_sizes_explicitly(roundtrip: RoundTrip, size: int) -> None:
    body = os.urandom(size)
    msg = Message("big-bodies", body, tags="big", keys=["k1", "k2"], born_host="[::1]:7")
    roundtrip.check(msg, 3, {"store_host": STORE_HOST, "born_host": "[::1]:7"})


def test_round_trip_extremes(roundtrip: RoundTrip) -> None:
    cases = [
        Message("T" * 127, b"", flag=-(2**31), born_timestamp=0, sys_flag=0x4),
        Message(
            "x",
            b"\x00",
            flag=2**31 - 1,
            born_timestamp=2**63 - 1,
            sys_flag=0xC,
            reconsume_times=2**31 - 1,
            prepared_transaction_offset=-1,
        ),
        Message(
            "%RETRY%cg1",
            b"body",
            tags="📦",
            keys="订单-1 🔑2  sp",
            properties={"地区": "华东", "note": "🌍-eu"},
            born_host="[fd00::a]:1",
            store_host="[2001:db8::100]:10911",
            sys_flag=0x8,
        ),
        Message(
            "a|b-c_d",
            b"z" * 3,
            tags="café",
            uniq_key="MY-UNIQ",
            delay_level=3,
            born_host="10.0.0.1:65535",
            store_host="10.9.8.7:0",
        ),
    ]
    for i, msg in enumerate(cases):
        store_host = msg.store_host or STORE_HOST
        born_host = msg.born_host or STORE_HOST
        roundtrip.check(msg, i, {"store_host": store_host, "born_host": born_host})


# ---------------------------------------------------------------------------- decoder details


def _blank_record(**changes: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "topic": "t",
        "queueId": 1,
        "queueOffset": 2,
        "commitLogOffset": 0,
        "body": b"body",
        "properties": "",
        "bornTimestamp": 1,
        "bornHost": "1.2.3.4:5",
        "storeTimestamp": 2,
        "storeHost": "5.6.7.8:9",
    }
    fields.update(changes)
    return fields


def test_decoder_accepts_trailing_separator_and_drops_empty_values() -> None:
    raw = refcodec.encode_record(
        **_blank_record(properties="A\x011\x02B\x01\x02\x01x\x02TAGS\x01t\x02")
    )
    m = record.decode_message(raw, check_crc=True)
    assert m.properties == {"A": "1", "TAGS": "t"} == refcodec.decode_record(raw).properties
    assert m.tags_code == hashes.java_hash("t")


def test_duplicate_tags_property_tags_code_uses_the_parsed_value() -> None:
    # RocketMQ's string2messageProperties keeps the LAST pair of a name; so must tags_code
    raw = refcodec.encode_record(**_blank_record(properties="TAGS\x01a\x02TAGS\x01b"))
    m = record.decode_message(raw)
    ref = refcodec.decode_record(raw)
    assert m.tags == ref.tags == "b"
    assert m.tags_code == ref.tagsCode == hashes.java_hash("b")


def test_topic_length_over_127_is_corrupt() -> None:
    # RocketMQ reads TOPICLENGTH as a signed byte: a length over 127 fails the record
    rec = refcodec.encode_record(**_blank_record(topic="x", body=b"ab"))
    prefix = rec[: -(1 + 1 + 2)]  # everything before TOPICLENGTH
    raw = bytearray(prefix + bytes([200]) + b"a" * 200 + struct.pack(">h", 0))
    struct.pack_into(">i", raw, 0, len(raw))
    with pytest.raises(refcodec.RefDecodeError):
        refcodec.decode_record(bytes(raw))
    assert record.record_status(bytes(raw), 0, check_crc=True)[0] == "corrupt"


def test_decode_message_errors() -> None:
    raw = refcodec.encode_record(**_blank_record())
    with pytest.raises(CorruptRecordError):
        record.decode_message(b"")
    with pytest.raises(CorruptRecordError):
        record.decode_message(raw[:-1])
    with pytest.raises(ValueError):
        record.decode_message(raw, len(raw) + 1)
    with pytest.raises(ValueError):
        record.decode_message(raw, -1)
    blank = struct.pack(">iI", 100, refcodec.BLANK_MAGIC) + bytes(92)
    with pytest.raises(CorruptRecordError, match="END_FILE"):
        record.decode_message(blank)
    assert record.record_status(blank) == ("blank", 100, "an END_FILE blank, not a message")
    assert record.record_status(bytes(100))[0] == "end"
    assert record.record_status(raw, len(raw)) == ("end", 0, None)
    flipped = bytearray(raw)
    body_at = 84 + 4
    flipped[body_at] ^= 0x01
    assert record.record_status(bytes(flipped), check_crc=False)[0] == "ok"
    status, _, reason = record.record_status(bytes(flipped), check_crc=True)
    assert status == "corrupt" and "CRC" in reason
    with pytest.raises(CorruptRecordError):
        record.decode_message(bytes(flipped), check_crc=True)
    # the record's PHYSICALOFFSET must match where it is found when asked
    assert record.record_status(raw, expected_phy=0)[0] == "ok"
    assert record.record_status(raw, expected_phy=1000)[0] == "corrupt"


# ---------------------------------------------------------------------------- RocketMQ fixture


def _fixture_expected(line: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in line.items() if k not in EXTRA_FIELDS}


def test_native_decode_of_rocketmq_fixture(
    rocketmq_store: Path, fixture_messages: list[dict[str, Any]]
) -> None:
    segments = {int(p.name): p.read_bytes() for p in (rocketmq_store / "commitlog").iterdir()}
    seg_size = 65536
    for line in fixture_messages:
        base = line["commitLogOffset"] - line["commitLogOffset"] % seg_size
        data = segments[base]
        m = record.decode_message(data, line["commitLogOffset"] - base, check_crc=True)
        got = m.to_dict()
        expected = _fixture_expected(line)
        assert got == expected, f"seq {line['seq']}"
        assert list(got["properties"]) == list(expected["properties"]), f"seq {line['seq']}"
        assert base64.b64decode(line["body_b64"]) == bytes(m.body)
        assert m.tags_code == line["tagsCode"]
        assert m.keys == ([k for k in line["keys"].split(" ") if k] if line["keys"] else [])


def test_scan_region_of_rocketmq_fixture(
    rocketmq_store: Path, fixture_messages: list[dict[str, Any]]
) -> None:
    by_base: dict[int, list[int]] = {}
    for line in fixture_messages:
        off = line["commitLogOffset"]
        by_base.setdefault(off - off % 65536, []).append(off)
    paths = sorted((rocketmq_store / "commitlog").iterdir())
    assert len(paths) == 10
    for i, path in enumerate(paths):
        base = int(path.name)
        data = path.read_bytes()
        res = record.scan_region(data, 0, check_crc=True, base_offset=base)
        assert [base + o for o in res.offsets.tolist()] == by_base[base]
        assert res.stop_status == ("blank" if i < 9 else "end"), (path.name, res)
        if res.stop_status == "blank":
            remaining, magic = struct.unpack_from(">iI", data, res.stop_position)
            assert magic == refcodec.BLANK_MAGIC and remaining == 65536 - res.stop_position


def test_store_opens_rocketmq_fixture(
    rocketmq_store: Path,
    fixture_messages: list[dict[str, Any]],
    fixture_manifest: dict[str, Any],
) -> None:
    sizes = fixture_manifest["config"]
    config = StoreConfig(
        store_path_root_dir=str(rocketmq_store),
        mapped_file_size_commit_log=sizes["mappedFileSizeCommitLog"],
        mapped_file_size_consume_queue=sizes["mappedFileSizeConsumeQueue"],
        max_hash_slot_num=sizes["maxHashSlotNum"],
        max_index_num=sizes["maxIndexNum"],
        store_host="192.168.0.10:10911",
    )
    with MessageStore.open(rocketmq_store, config, read_only=True) as store:
        got = [m.to_dict() for m in store.scan(check_crc=True)]
        assert store.get_max_phy_offset() == 635_655
        assert store.recovery is not None and store.recovery.end_offset == 635_655
        assert store.recovery.stop_status == "end"
        for line in fixture_messages:
            m = store.look_message_by_offset(line["commitLogOffset"])
            assert m is not None and m.to_dict() == _fixture_expected(line)
    assert got == [_fixture_expected(line) for line in fixture_messages]
