"""The broker in this process, driven over the wire by a RemotingClient: sends (single, batch,
compressed, permissions, bad fields), pulls (records as stored, tags, long polling), offsets,
unknown codes."""

from __future__ import annotations

import asyncio
import struct
import zlib
from pathlib import Path

import broker_helpers
import orjson
import pytest
from broker_helpers import cluster, props, pull_fields, send_fields, wait_until

from rocketstore.common.batch import encode_batch_body
from rocketstore.common.perm import PERM_READ
from rocketstore.message import MessageProperty
from rocketstore.remoting import RemotingConnection, RequestCode, ResponseCode
from rocketstore.store.layout import CONFIG_DIR

arun = broker_helpers.arun

SEND = RequestCode.SEND_MESSAGE
PULL = RequestCode.PULL_MESSAGE


def records(body: bytes) -> list:
    """Decode pull bodies with the reference codec (independent of the store's decoder)."""
    import refcodec

    out = []
    pos = 0
    while pos < len(body):
        size = struct.unpack_from(">i", body, pos)[0]
        out.append(refcodec.decode_record(body[pos:pos + size]))
        pos += size
    return out


def test_send_then_pull_returns_the_stored_records(arun, tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster(tmp_path / "store") as cl:
            sent = []
            for i in range(5):
                r = await cl.call(SEND, send_fields("orders", i % 2, props(TAGS="paid", KEYS=f"o-{i}", UNIQ_KEY=f"U{i:031d}")),
                                  f"body-{i}".encode())
                assert r.code == ResponseCode.SUCCESS, r.remark
                assert r.ext_fields["queueId"] == str(i % 2)
                assert len(r.ext_fields["msgId"]) == 32
                sent.append(r.ext_fields)
            assert [s["queueOffset"] for s in sent] == ["0", "0", "1", "1", "2"]
            assert cl.broker.topics.select("orders").write_queue_nums == 4   # from TBW102, capped at 4
            await cl.dispatched()
            r = await cl.call(PULL, pull_fields("g1", "orders", 0, 0))
            assert r.code == ResponseCode.SUCCESS, r.remark
            assert r.ext_fields["nextBeginOffset"] == "3" and r.ext_fields["maxOffset"] == "3"
            got = records(r.body_bytes())
            assert [g.body for g in got] == [b"body-0", b"body-2", b"body-4"]
            assert got[0].properties["TAGS"] == "paid"
            assert got[0].properties[MessageProperty.CLUSTER] == "DefaultCluster"
            assert got[0].properties["UNIQ_KEY"] == "U" + "0" * 31
            # byte for byte what the store holds
            store = cl.broker.store
            stored = store.look_message_by_offset(got[0].commitLogOffset)
            assert bytes(stored.record) == r.body_bytes()[:stored.store_size]
            # the reply body is the mapped records themselves, not a joined copy
            ctx = next(iter(cl.broker.server.connections))
            from rocketstore.remoting import create_request

            reply = cl.broker.pull_processor.process(
                ctx, create_request(PULL, {k: str(v) for k, v in pull_fields("g1", "orders", 0, 0).items()}),
                allow_suspend=False)
            assert isinstance(reply.body, list) and all(isinstance(b, memoryview) for b in reply.body)
            # past the end without suspending: PULL_NOT_FOUND at once
            await cl.dispatched()
            r = await cl.call(PULL, pull_fields("g1", "orders", 0, 3))
            assert r.code == ResponseCode.PULL_NOT_FOUND
            # an offset far past the end: moved
            await cl.dispatched()
            r = await cl.call(PULL, pull_fields("g1", "orders", 0, 50))
            assert r.code == ResponseCode.PULL_OFFSET_MOVED

    arun(main())


def test_pull_filters_tags(arun, tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster(tmp_path / "store") as cl:
            for i, tag in enumerate(["A", "B", "C", "A", "B"]):
                r = await cl.call(SEND, send_fields("t", 0, props(TAGS=tag)), f"{tag}{i}".encode())
                assert r.code == 0
            await cl.dispatched()
            r = await cl.call(PULL, pull_fields("g", "t", 0, 0, subscription="A || C"))
            assert r.code == ResponseCode.SUCCESS
            assert [g.body for g in records(r.body_bytes())] == [b"A0", b"C2", b"A3"]
            # only non-matching messages left: retry immediately, past them
            await cl.dispatched()
            r = await cl.call(PULL, pull_fields("g", "t", 0, 4, subscription="A || C"))
            assert r.code == ResponseCode.PULL_RETRY_IMMEDIATELY
            assert r.ext_fields["nextBeginOffset"] == "5"

    arun(main())


def test_long_polling_holds_until_a_message_arrives_or_the_timeout(arun, tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster(tmp_path / "store") as cl:
            loop = asyncio.get_running_loop()
            assert (await cl.call(SEND, send_fields("lp", 1), b"first")).code == 0
            # held for its suspend time, then PULL_NOT_FOUND
            t0 = loop.time()
            await cl.dispatched()
            r = await cl.call(PULL, pull_fields("g", "lp", 1, 1, suspend_ms=600))
            assert r.code == ResponseCode.PULL_NOT_FOUND
            assert 0.5 <= loop.time() - t0 < 3
            # woken by an arrival long before its timeout
            waiting = asyncio.ensure_future(cl.call(PULL, pull_fields("g", "lp", 1, 1, suspend_ms=15000), timeout=20))
            await asyncio.sleep(0.3)
            assert not waiting.done()
            assert cl.broker.hold_service.held_count == 1
            # other requests keep flowing meanwhile
            assert (await cl.call(RequestCode.GET_MAX_OFFSET, {"topic": "lp", "queueId": 1})).ext_fields["offset"] == "1"
            t0 = loop.time()
            assert (await cl.call(SEND, send_fields("lp", 1), b"second")).code == 0
            r = await waiting
            assert loop.time() - t0 < 2
            assert r.code == ResponseCode.SUCCESS
            assert [g.body for g in records(r.body_bytes())] == [b"second"]
            assert cl.broker.hold_service.held_count == 0
            # an arrival of a message the pull's tags do not match keeps it held
            waiting = asyncio.ensure_future(cl.call(PULL, pull_fields("g", "lp", 1, 2, suspend_ms=1500, subscription="X"), timeout=10))
            await asyncio.sleep(0.2)
            assert (await cl.call(SEND, send_fields("lp", 1, props(TAGS="Y")), b"y")).code == 0
            await asyncio.sleep(0.5)
            assert not waiting.done()
            assert (await cl.call(SEND, send_fields("lp", 1, props(TAGS="X")), b"x")).code == 0
            r = await waiting
            assert r.code == ResponseCode.SUCCESS
            assert [g.body for g in records(r.body_bytes())] == [b"x"]

    arun(main())


def test_a_pull_commits_the_offset_it_carries(arun, tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster(tmp_path / "store") as cl:
            for i in range(3):
                await cl.call(SEND, send_fields("c", 0), b"m%d" % i)
            r = await cl.call(RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "g", "topic": "c", "queueId": 0})
            assert r.code == ResponseCode.SUCCESS and r.ext_fields["offset"] == "0"   # never committed: min
            await cl.dispatched()
            r = await cl.call(PULL, pull_fields("g", "c", 0, 2, commit_offset=2))
            assert r.code == ResponseCode.SUCCESS
            r = await cl.call(RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "g", "topic": "c", "queueId": 0})
            assert r.ext_fields["offset"] == "2"
            r = await cl.call(RequestCode.UPDATE_CONSUMER_OFFSET,
                              {"consumerGroup": "g", "topic": "c", "queueId": 0, "commitOffset": 3})
            assert r.code == ResponseCode.SUCCESS
            r = await cl.call(RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "g", "topic": "c", "queueId": 0})
            assert r.ext_fields["offset"] == "3"
            for code, field, expected in ((RequestCode.GET_MAX_OFFSET, "offset", "3"),
                                          (RequestCode.GET_MIN_OFFSET, "offset", "0")):
                r = await cl.call(code, {"topic": "c", "queueId": 0})
                assert r.ext_fields[field] == expected
            r = await cl.call(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {"topic": "c", "queueId": 0, "timestamp": 0})
            assert r.code == 0 and r.ext_fields["offset"] == "0"
            r = await cl.call(RequestCode.GET_EARLIEST_MSG_STORETIME, {"topic": "c", "queueId": 0})
            assert r.code == 0 and int(r.ext_fields["timestamp"]) > 1_600_000_000_000
            # the C++ client's numbers in extFields, a negative offset refused
            r = await cl.call(RequestCode.UPDATE_CONSUMER_OFFSET,
                              {"consumerGroup": "g", "topic": "c", "queueId": 0, "commitOffset": -5})
            assert r.code == ResponseCode.SYSTEM_ERROR
        # written at shutdown, read back at the next start
        data = orjson.loads((tmp_path / "store" / CONFIG_DIR / "consumerOffset.json").read_bytes())
        assert data["offsetTable"]["c@g"] == {"0": 3}
        async with cluster(tmp_path / "store") as cl:
            r = await cl.call(RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "g", "topic": "c", "queueId": 0})
            assert r.ext_fields["offset"] == "3"
            await cl.dispatched()
            r = await cl.call(PULL, pull_fields("g", "c", 0, 2))
            assert [g.body for g in records(r.body_bytes())] == [b"m2"]

    arun(main())


def test_batch_and_compressed_sends_are_stored_as_sent(arun, tmp_path: Path) -> None:
    def batch_entry(body: bytes, properties: str) -> bytes:
        p = properties.encode()
        size = 4 * 5 + len(body) + 2 + len(p)
        return struct.pack(">iiiii", size, 0, 0, 0, len(body)) + body + struct.pack(">h", len(p)) + p

    async def main() -> None:
        async with cluster(tmp_path / "store") as cl:
            body = b"".join(batch_entry(b"batch-%d" % i, props(KEYS=f"bk{i}", UNIQ_KEY=f"B{i:031d}"))
                            for i in range(3))
            r = await cl.call(SEND, send_fields("b", 2, props(WAIT="true"), batch="1"), body)
            assert r.code == ResponseCode.SUCCESS, r.remark
            assert len(r.ext_fields["msgId"].split(",")) == 3 and r.ext_fields["queueOffset"] == "0"
            await cl.dispatched()
            r = await cl.call(PULL, pull_fields("g", "b", 2, 0))
            got = records(r.body_bytes())
            assert [(g.body, g.queueOffset, g.properties["KEYS"]) for g in got] == [
                (b"batch-0", 0, "bk0"), (b"batch-1", 1, "bk1"), (b"batch-2", 2, "bk2")]
            # a broken batch body stores nothing
            r = await cl.call(SEND, send_fields("b", 2, batch="true"), body[:-3])
            assert r.code == ResponseCode.MESSAGE_ILLEGAL
            assert (await cl.call(RequestCode.GET_MAX_OFFSET, {"topic": "b", "queueId": 2})).ext_fields["offset"] == "3"
            # compressed with sysFlag 1: stored as sent
            payload = zlib.compress(b"x" * 5000)
            r = await cl.call(SEND, send_fields("z", 0, sysFlag=1), payload)
            assert r.code == 0
            await cl.dispatched()
            r = await cl.call(PULL, pull_fields("g", "z", 0, 0))
            (rec,) = records(r.body_bytes())
            assert rec.sysFlag & 1 and rec.body == payload

    arun(main())


def test_send_checks(arun, tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster(tmp_path / "store") as cl:
            r = await cl.call(SEND, send_fields("SCHEDULE_TOPIC_XXXX"), b"x")
            assert r.code == ResponseCode.NO_PERMISSION
            r = await cl.call(SEND, send_fields("nodefault", defaultTopic="NOPE"), b"x")
            assert r.code == ResponseCode.TOPIC_NOT_EXIST
            r = await cl.call(SEND, send_fields("bad topic!"), b"x")
            assert r.code == ResponseCode.SYSTEM_ERROR
            r = await cl.call(SEND, send_fields("q", 99), b"x")
            assert r.code == ResponseCode.SYSTEM_ERROR and "queueId" in r.remark
            fields = send_fields("q")
            fields["queueId"] = "zero"
            r = await cl.call(SEND, fields, b"x")
            assert r.code == ResponseCode.SYSTEM_ERROR and "queueId" in r.remark
            del fields["queueId"]
            r = await cl.call(SEND, fields, b"x")
            assert r.code == ResponseCode.SYSTEM_ERROR and "queueId" in r.remark
            r = await cl.call(RequestCode.UPDATE_AND_CREATE_TOPIC,
                              {"topic": "ro", "readQueueNums": 2, "writeQueueNums": 2, "perm": PERM_READ})
            assert r.code == 0
            r = await cl.call(SEND, send_fields("ro"), b"x")
            assert r.code == ResponseCode.NO_PERMISSION
            r = await cl.call(SEND, send_fields("big"), b"x" * (4 * 1024 * 1024 + 1))
            assert r.code == ResponseCode.MESSAGE_ILLEGAL
            # a transaction's half message: stored in the half topic, not in its own
            r = await cl.call(SEND, send_fields("tx", 0, props(TRAN_MSG="true")), b"x")
            assert r.code == ResponseCode.SUCCESS
            cl.broker.store.wait_dispatched()
            assert cl.broker.store.get_max_offset_in_queue("tx", 0) == 0
            assert cl.broker.store.get_max_offset_in_queue("RMQ_SYS_TRANS_HALF_TOPIC", 0) == 1
            r = await cl.call(SEND, send_fields("q", 0, props(TAGS="a\x00b")), b"x")
            assert r.code == ResponseCode.MESSAGE_ILLEGAL and "NUL" in r.remark
            r = await cl.call(SEND, send_fields("q", 0, flag=2**40), b"x")
            assert r.code == ResponseCode.MESSAGE_ILLEGAL
            r = await cl.call(9999, {})
            assert r.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
            # nothing of the refused sends was stored
            assert cl.broker.store.get_max_offset_in_queue("q", 0) == 0

    arun(main())


@pytest.mark.parametrize("native", [True, False])
def test_a_separator_in_a_property_value_is_message_illegal(arun, tmp_path: Path, caplog,
                                                            native: bool) -> None:
    """A value holding \\x01 (a name cannot: the text's first \\x01 in a pair ends it) in a
    SEND, a SEND_MESSAGE_V2 or a batch's message: MESSAGE_ILLEGAL naming the property (a long
    name quoted in part), one WARNING line without a traceback, nothing stored, and the
    connection goes on."""
    long_name = "N" * 5000
    v2 = {"a": "PG", "b": "q", "c": "TBW102", "d": 4, "e": 0, "f": 0, "g": 1, "h": 0}
    batch_fields = dict(v2, m="true")
    script = [
        (SEND, send_fields("q", 0, props(TAGS="a\x01b")), "'TAGS'"),
        (SEND, send_fields("q", 0, f"{long_name}\x01v\x01w"), "'NNN"),
        (SEND, send_fields("q", 0, "TAGS\x01\x01"), "'TAGS'"),
        (RequestCode.SEND_MESSAGE_V2, dict(v2, i="KEYS\x01k\x02u\x01v\x01w"), "'u'"),
        (RequestCode.SEND_BATCH_MESSAGE, batch_fields, "'k'"),
    ]
    batch_body = encode_batch_body([(1, b"m1", b"TAGS\x01x"), (2, b"m2", b"k\x01v\x01w")])

    async def main() -> None:
        async with cluster(tmp_path / "store", native_send=native) as cl:
            assert (await cl.call(SEND, send_fields("q", 1), b"creates q")).code == ResponseCode.SUCCESS
            for code, fields, name in script:
                caplog.clear()
                with caplog.at_level("INFO"):
                    body = batch_body if code == RequestCode.SEND_BATCH_MESSAGE else b"x"
                    r = await cl.call(code, fields, body)
                assert r.code == ResponseCode.MESSAGE_ILLEGAL, r.remark
                assert r.remark.startswith(f"the value of property {name}") and "\\x01" in r.remark
                assert len(r.remark) < 400
                warnings = [rec for rec in caplog.records if rec.levelname != "INFO"]
                assert len(warnings) == 1 and warnings[0].levelname == "WARNING", caplog.text
                assert warnings[0].exc_info is None and r.remark in warnings[0].getMessage()
                assert len(caplog.text) < 1000
            # nothing stored; the connection still sends
            assert cl.broker.store.get_max_offset_in_queue("q", 0) == 0
            r = await cl.call(SEND, send_fields("q", 0, props(TAGS="t")), b"ok")
            assert r.code == ResponseCode.SUCCESS and r.ext_fields["queueOffset"] == "0"

    arun(main())


def test_send_v2_and_random_queue(arun, tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster(tmp_path / "store") as cl:
            v2 = {"a": "PG", "b": "v2", "c": "TBW102", "d": 4, "e": -1, "f": 0, "g": 1, "h": 0,
                  "i": props(TAGS="t")}
            r = await cl.call(RequestCode.SEND_MESSAGE_V2, v2, b"v2-body")
            assert r.code == 0 and 0 <= int(r.ext_fields["queueId"]) < 4
            qid = int(r.ext_fields["queueId"])
            await cl.dispatched()
            r = await cl.call(PULL, pull_fields("g", "v2", qid, 0))
            assert records(r.body_bytes())[0].body == b"v2-body"

    arun(main())


def _send_script() -> list[tuple[int, dict, bytes]]:
    """Sends of every kind: common ones (the native path's), and each case it hands to the
    Python processor (refusals, auto-created and retry topics, delay, batch-less oddities)."""
    v2 = RequestCode.SEND_MESSAGE_V2
    batch = RequestCode.SEND_BATCH_MESSAGE
    batch_fields = {"a": "PG", "c": "TBW102", "d": 4, "f": 0, "g": 1, "h": 0, "m": "true"}
    out: list[tuple[int, dict, bytes]] = []
    for i in range(6):      # the topic is auto-created by the first, the rest are common sends
        out.append((SEND, send_fields("eq", i % 4, props(TAGS=f"t{i}", KEYS=f"k{i} k{i}b", UNIQ_KEY=f"U{i:031d}",
                                                          WAIT="true", custom="v")), b"b%d" % i))
    out += [
        (v2, {"a": "PG", "b": "eq", "c": "TBW102", "d": 4, "e": 3, "f": 1, "g": -5, "h": 7,
              "i": "TAGS\x01x\x02\x01empty-name\x02novalue\x01\x02dup\x011\x02dup\x012\x02", "j": 3,
              "k": "false", "m": "false"}, zlib.compress(b"compressed")),
        (v2, {"a": "PG", "b": "eq", "c": "TBW102", "d": 4, "e": 2, "f": 0, "g": 12345, "h": 0}, b""),
        (SEND, send_fields("eq", 1, "", reconsumeTimes=2**40), b"huge reconsume"),
        (SEND, send_fields("eq", 1, props(DELAY="2")), b"delayed"),
        (SEND, send_fields("eq", 1, props(DELAY="0")), b"delay 0"),
        (SEND, send_fields("eq", 4), b"queue out of range"),
        (SEND, send_fields("eq", 0, props(TAGS="a\x00b")), b"nul"),
        (SEND, send_fields("eq", 0, props(TAGS="a\x01b")), b"separator in a value"),
        (v2, {"a": "PG", "b": "eq", "c": "TBW102", "d": 4, "e": 0, "f": 0, "g": 1, "h": 0,
              "i": "TAGS\x01t\x02k\x01v\x01w"}, b"separator in a v2 value"),
        (SEND, send_fields("eq", 0, props(TRAN_MSG="true")), b"tx"),
        (SEND, send_fields("eq", 0, sysFlag=4), b"prepared"),
        (SEND, send_fields("eq", 0, flag=2**40), b"flag"),
        (SEND, send_fields("eq", 0, flag=-(2**31)), b"min flag"),
        (SEND, send_fields("bad topic!"), b"x"),
        (SEND, send_fields("SCHEDULE_TOPIC_XXXX"), b"x"),
        (SEND, send_fields("%RETRY%nogroup"), b"x"),
        (SEND, send_fields("nodefault", defaultTopic="NOPE"), b"x"),
        (SEND, send_fields("eq", 0, bornTimestamp="soon"), b"x"),
        (v2, {"a": "PG", "b": "eq"}, b"missing fields"),
        (SEND, send_fields("eq", 0), b"x" * (4 * 1024 * 1024 + 1)),
        (SEND, send_fields("%RETRY%nogroup", 0, "", reconsumeTimes=3, maxReconsumeTimes=2), b"to the DLQ"),
        (SEND, send_fields("%RETRY%nogroup", 0, "", reconsumeTimes=1, maxReconsumeTimes=2), b"retried"),
        (batch, dict(batch_fields, b="eq", e=2), encode_batch_body([(1, b"m1", b"TAGS\x01x"), (2, b"m2", b"")])),
        (batch, dict(batch_fields, b="eq", e=2), encode_batch_body([(1, b"m1", b"DELAY\x013")])),
        (batch, dict(batch_fields, b="eq", e=2), b"\x00\x00\x00"),
        (batch, dict(batch_fields, b="eq", e=2),
         encode_batch_body([(1, b"m1", b"TAGS\x01x"), (2, b"m2", b"k\x01v\x01w")])),
        (batch, dict(batch_fields, b="%RETRY%nogroup", e=0), encode_batch_body([(1, b"m1", b"")])),
        (batch, dict(batch_fields, b="eq", e=9), encode_batch_body([(1, b"m1", b"")])),
        (SEND, send_fields("other", -1, props(TAGS="random queue")), b"r"),   # last: its queue is random
    ]
    return out


def _replies_and_records(arun, root: Path, native: bool, script: list) -> tuple[list, list]:
    async def main() -> tuple[list, list]:
        async with cluster(root, native_send=native) as cl:
            handler = cl.broker.server._processors.handlers[SEND]
            assert (type(handler).__name__ == "SendPath") == native
            replies = []
            for code, fields, body in script:
                r = await cl.call(code, fields, body)
                ext = dict(r.ext_fields or {})
                ext.pop("msgId", None)                  # holds the broker's port
                if r.code == 0 and fields.get("queueId", fields.get("e")) == -1:
                    ext.pop("queueId")                  # a random queue
                    ext.pop("queueOffset")
                replies.append((code, r.code, r.remark, ext))
            await cl.dispatched()
            stored = []
            for topic in ("eq", "SCHEDULE_TOPIC_XXXX", "%RETRY%nogroup", "%DLQ%nogroup"):   # not "other": its queue is random
                for queue_id in range(4):
                    r = await cl.call(PULL, pull_fields("g", topic, queue_id, 0, max_nums=64))
                    if r.code != ResponseCode.SUCCESS:
                        continue
                    for rec in records(r.body_bytes()):
                        properties = dict(rec.properties)
                        if not properties.get("UNIQ_KEY", "U").startswith("U"):
                            properties["UNIQ_KEY"] = "generated by the store"
                        stored.append((rec.topic, rec.queueId, rec.queueOffset, rec.commitLogOffset,
                                       rec.body, properties, rec.flag, rec.sysFlag, rec.reconsumeTimes,
                                       rec.bornTimestamp, rec.bornHost.rsplit(":", 1)[0]))
            return replies, stored

    return arun(main())


def test_native_send_path_answers_and_stores_as_the_python_processor(arun, tmp_path: Path) -> None:
    script = _send_script()
    native_replies, native_stored = _replies_and_records(arun, tmp_path / "native", True, script)
    python_replies, python_stored = _replies_and_records(arun, tmp_path / "python", False, script)
    assert native_replies == python_replies
    assert native_stored == python_stored
    codes = [code for _, code, _, _ in native_replies]
    assert codes.count(ResponseCode.SUCCESS) >= 12 and len(set(codes)) >= 5, native_replies
    # the common sends' records as sent, with the broker's CLUSTER property
    common = [s for s in native_stored if s[4].startswith(b"b")]
    assert len(common) == 6 and all(s[5]["CLUSTER"] == "DefaultCluster" and s[5]["custom"] == "v" for s in common)
    odd = next(s for s in native_stored if s[8] == 3)
    assert odd[5] == {"TAGS": "x", "dup": "2", "CLUSTER": "DefaultCluster", "UNIQ_KEY": "generated by the store"}
    assert odd[6] == 7 and odd[7] == 1
    assert odd[9] == 0 and zlib.decompress(odd[4]) == b"compressed"
    assert [s[0] for s in native_stored if s[4] == b"to the DLQ"] == ["%DLQ%nogroup"]
    assert [(s[4], s[6]) for s in native_stored if s[4] in (b"m1", b"m2")] == [(b"m1", 1), (b"m2", 2)]


@pytest.mark.parametrize("broker_changes", [{"broker_permission": PERM_READ},
                                            {"auto_create_subscription_group": False}])
def test_native_send_path_refuses_as_the_python_processor(arun, tmp_path: Path, broker_changes: dict) -> None:
    """The rules that depend on the broker's config: a broker that takes no writes, a retry
    topic of a group that does not exist."""
    script = [(SEND, send_fields("eq", 0), b"x"), (SEND, send_fields("%RETRY%nogroup", 0), b"x")]

    def replies(native: bool) -> list:
        async def main() -> list:
            async with cluster(tmp_path / str(native), native_send=native, **broker_changes) as cl:
                out = []
                for code, fields, body in script:
                    r = await cl.call(code, fields, body)
                    ext = dict(r.ext_fields or {})
                    ext.pop("msgId", None)      # holds the broker's port
                    out.append((r.code, r.remark, ext))
                return out
        return arun(main())

    native = replies(True)
    assert native == replies(False)
    assert {code for code, _, _ in native} == (
        {ResponseCode.NO_PERMISSION} if "broker_permission" in broker_changes
        else {ResponseCode.SUCCESS, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST})


def test_native_send_path_sees_topic_changes_at_once(arun, tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster(tmp_path / "store") as cl:
            assert type(cl.broker.server._processors.handlers[SEND]).__name__ == "SendPath"
            for _ in range(2):      # created, then a common send
                r = await cl.call(SEND, send_fields("live", 0), b"x")
                assert r.code == 0
            r = await cl.call(RequestCode.UPDATE_AND_CREATE_TOPIC,
                              {"topic": "live", "readQueueNums": 2, "writeQueueNums": 2, "perm": PERM_READ})
            assert r.code == 0
            r = await cl.call(SEND, send_fields("live", 0), b"x")
            assert r.code == ResponseCode.NO_PERMISSION
            r = await cl.call(RequestCode.UPDATE_AND_CREATE_TOPIC,
                              {"topic": "live", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6})
            assert r.code == 0
            r = await cl.call(SEND, send_fields("live", 1), b"x")
            assert r.code == ResponseCode.SYSTEM_ERROR and "queueId" in r.remark
            r = await cl.call(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "live"})
            assert r.code == 0
            r = await cl.call(SEND, send_fields("live", 0, defaultTopic="NOPE"), b"x")
            assert r.code == ResponseCode.TOPIC_NOT_EXIST

    arun(main())


class _RecordingTransport:
    """What a RemotingConnection uses of a transport; keeps what is written."""

    def __init__(self) -> None:
        self.data = bytearray()

    def write(self, data: bytes) -> None:
        self.data += data

    def writelines(self, buffers: list[bytes]) -> None:
        for buffer in buffers:
            self.data += buffer

    def get_extra_info(self, name: str, default: object = None) -> object:
        return ("127.0.0.1", 40001) if name in ("peername", "sockname") else default

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def close(self) -> None:
        pass


def _request_frame(code: int, fields: dict, payload: bytes, opaque: int, *, serialize_type: int = 0,
                   oneway: bool = False) -> bytes:
    """A request frame as a client sends it."""
    from rocketstore.remoting import create_request, encode

    request = create_request(code, fields, payload, serialize_type=serialize_type, oneway=oneway)
    request.opaque = opaque
    return encode(request)


def _recorded_connection(cl) -> tuple[RemotingConnection, _RecordingTransport]:
    """A connection to the cluster's broker whose writes a _RecordingTransport keeps."""
    server = cl.broker.server
    connection = RemotingConnection(server._processors, server.config.connection_limits())
    transport = _RecordingTransport()
    connection.connection_made(transport)  # type: ignore[arg-type]
    return connection, transport


def test_native_send_replies_from_the_template_are_the_generic_encoders_bytes(arun, tmp_path: Path) -> None:
    """Common sends answered by the pump's direct path (the reply written from a template)
    carry exactly the bytes create_response + the frame encoder make of the same values;
    oneway sends are stored and not answered; binary-header sends get a binary reply."""
    from rocketstore.remoting import FrameDecoder, RemotingCommand, encode
    from rocketstore.remoting.codes import FLAG_RESPONSE

    v2 = {"a": "PG", "b": "tpl", "c": "TBW102", "d": 4, "e": "1", "f": "0", "g": "1700000000000",
          "h": "0", "i": props(TAGS="t", UNIQ_KEY="U" * 32), "j": "0", "k": "false", "m": "false"}

    def frame(code: int, fields: dict, opaque: int, *, serialize_type: int = 0, oneway: bool = False) -> bytes:
        return _request_frame(code, fields, b"template body", opaque, serialize_type=serialize_type,
                              oneway=oneway)

    async def main() -> None:
        region = 'Re"gion\\é\x01'
        async with cluster(tmp_path / "store", region_id=region, trace_on=False) as cl:
            r = await cl.call(SEND, send_fields("tpl", 0), b"creates the topic")
            assert r.code == 0
            connection, transport = _recorded_connection(cl)
            opaques = [7, -5, 2**31 - 1, 0]
            connection.data_received(b"".join(frame(RequestCode.SEND_MESSAGE_V2, v2, o) for o in opaques[:3])
                                     + frame(SEND, send_fields("tpl", 1), opaques[3]))
            replies = FrameDecoder().feed(bytes(transport.data))
            assert [r.opaque for r in replies] == opaques
            assert [r.code for r in replies] == [0, 0, 0, 0]
            pos = 0
            for reply in replies:
                assert reply.ext_fields["MSG_REGION"] == region and reply.ext_fields["TRACE_ON"] == "false"
                expected = RemotingCommand(0, opaque=reply.opaque, flag=FLAG_RESPONSE,
                                           ext_fields=dict(reply.ext_fields))
                expected_bytes = encode(expected)
                assert bytes(transport.data[pos:pos + len(expected_bytes)]) == expected_bytes
                pos += len(expected_bytes)
            assert pos == len(transport.data)
            assert [(r.ext_fields["queueId"], r.ext_fields["queueOffset"]) for r in replies] == [
                ("1", "0"), ("1", "1"), ("1", "2"), ("1", "3")]
            assert len({r.ext_fields["msgId"] for r in replies}) == 4
            assert all(len(r.ext_fields["msgId"]) == 32 for r in replies)

            transport.data.clear()
            connection.data_received(frame(RequestCode.SEND_MESSAGE_V2, v2, 9, oneway=True))
            assert transport.data == b""
            connection.data_received(frame(RequestCode.SEND_MESSAGE_V2, v2, 10, serialize_type=1))
            (reply,) = FrameDecoder().feed(bytes(transport.data))
            assert reply.serialize_type == 1 and reply.code == 0 and reply.opaque == 10
            assert reply.ext_fields["queueOffset"] == "5"    # after the oneway send's 4
            await cl.dispatched()
            assert cl.broker.store.get_max_offset_in_queue("tpl", 1) == 6

    arun(main())


@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
def test_template_replies_of_batches_and_waiting_sends(arun, tmp_path: Path, flush: str) -> None:
    """Batches answered by the pump's direct path, and sends waiting for SYNC_FLUSH (a reply
    frame made from the template at the put, written when the flush answers), carry exactly
    the bytes create_response + the frame encoder make of the same values; a batch's msgId
    lists every message's offsetMsgId, in order."""
    from rocketstore._native.hosts import parse_msg_id
    from rocketstore.remoting import FrameDecoder, RemotingCommand, encode
    from rocketstore.remoting.codes import FLAG_RESPONSE

    v2 = {"a": "PG", "b": "tpl", "c": "TBW102", "d": 4, "e": "2", "f": "0", "g": "1700000000000",
          "h": "0", "i": props(TAGS="t"), "j": "0", "k": "false", "m": "false"}
    batch_fields = {"a": "PG", "b": "tpl", "c": "TBW102", "d": 4, "e": "2", "f": "0", "g": "1",
                    "h": "0", "i": "", "m": "true"}
    body = encode_batch_body([(0, b"b%d" % i, b"KEYS\x01k%d" % i) for i in range(5)])

    async def main() -> None:
        async with cluster(tmp_path / "store", {"flush_disk_type": flush}) as cl:
            r = await cl.call(SEND, send_fields("tpl", 2), b"creates the topic")
            assert r.code == 0
            connection, transport = _recorded_connection(cl)
            connection.data_received(_request_frame(RequestCode.SEND_BATCH_MESSAGE, batch_fields, body, 21)
                                     + _request_frame(RequestCode.SEND_MESSAGE_V2, v2, b"one", 22)
                                     + _request_frame(RequestCode.SEND_BATCH_MESSAGE, batch_fields, body, 23))
            assert await wait_until(lambda: len(FrameDecoder().feed(bytes(transport.data))) == 3, 10)
            replies = FrameDecoder().feed(bytes(transport.data))
            assert [(r.opaque, r.code) for r in replies] == [(21, 0), (22, 0), (23, 0)]
            pos = 0
            for reply in replies:
                expected = encode(RemotingCommand(0, opaque=reply.opaque, flag=FLAG_RESPONSE,
                                                  ext_fields=dict(reply.ext_fields)))
                assert bytes(transport.data[pos:pos + len(expected)]) == expected
                pos += len(expected)
            assert pos == len(transport.data)
            assert [r.ext_fields["queueOffset"] for r in replies] == ["1", "6", "7"]
            await cl.dispatched()
            store = cl.broker.store
            records = [m for m in store.scan(0) if m.topic == "tpl"][1:]
            ids = [i for r in replies for i in r.ext_fields["msgId"].split(",")]
            assert [parse_msg_id(i)[1] for i in ids] == [m.commitlog_offset for m in records]
            assert [m.body for m in records] == [b"b0", b"b1", b"b2", b"b3", b"b4", b"one",
                                                 b"b0", b"b1", b"b2", b"b3", b"b4"]

    arun(main())


def test_stored_properties_are_those_rocketmq_stores(arun, tmp_path: Path) -> None:
    """WAIT is not stored (RocketMQ's SendMessageProcessor strips it), but where the delay
    redirect writes the text again from every property (and so in the delivered record, which
    keeps DELAY too); a batch request's own properties go with each of its messages."""
    wait = MessageProperty.WAIT

    async def main() -> None:
        async with cluster(tmp_path / "store", {"message_delay_level": " ".join(["1s"] * 18)}) as cl:
            for value in ("true", "false", "maybe"):
                r = await cl.call(SEND, send_fields("plain", 0, props(TAGS="a", WAIT=value, KEYS="k")), b"x")
                assert r.code == ResponseCode.SUCCESS, r.remark
            r = await cl.call(SEND, send_fields("plain", 0, props(WAIT="true", DELAY="0")), b"level 0")
            r = await cl.call(SEND, send_fields("later", 1, props(TAGS="d", WAIT="true", DELAY="1")), b"later")
            assert r.code == ResponseCode.SUCCESS, r.remark
            r = await cl.call(SEND, send_fields("odd", 0, props(WAIT="maybe", DELAY="1")), b"odd")
            assert r.code == ResponseCode.SUCCESS, r.remark
            body = encode_batch_body([(0, b"b1", b"KEYS\x01k1\x02WAIT\x01true"), (0, b"b2", b"KEYS\x01k2")])
            batch_fields = {"a": "PG", "b": "batched", "c": "TBW102", "d": 4, "e": 0, "f": 0, "g": 1, "h": 0,
                            "i": "WAIT\x01true\x02x\x01y", "m": "true"}
            r = await cl.call(RequestCode.SEND_BATCH_MESSAGE, batch_fields, body)
            assert r.code == ResponseCode.SUCCESS, r.remark
            store = cl.broker.store
            assert await wait_until(lambda: store.get_max_offset_in_queue("later", 1) == 1
                                    and store.get_max_offset_in_queue("odd", 0) == 1, 10)
            await cl.dispatched()
            records = {}
            for msg in store.scan(0):
                records.setdefault(msg.topic, []).append(dict(msg.properties))
        cluster_name = cl.broker.config.broker_cluster_name
        plain = records["plain"]
        assert [wait in p for p in plain] == [False] * 4
        assert [p["TAGS"] for p in plain[:3]] == ["a"] * 3 and plain[3]["DELAY"] == "0"
        scheduled, odd = records["SCHEDULE_TOPIC_XXXX"]
        assert odd[wait] == "maybe" and records["odd"][0][wait] == "maybe"
        (delivered,) = records["later"]
        assert scheduled[wait] == "true" and scheduled["DELAY"] == "1" and scheduled["REAL_TOPIC"] == "later"
        assert {k: v for k, v in delivered.items() if k != "UNIQ_KEY"} == {
            "TAGS": "d", "WAIT": "true", "DELAY": "1", "REAL_TOPIC": "later", "REAL_QID": "1",
            "CLUSTER": cluster_name}
        assert delivered["UNIQ_KEY"] == scheduled["UNIQ_KEY"]
        assert [{k: v for k, v in p.items() if k != "UNIQ_KEY"} for p in records["batched"]] == [
            {"KEYS": k, "WAIT": "true", "x": "y", "CLUSTER": cluster_name} for k in ("k1", "k2")]

    arun(main(), timeout=60)
