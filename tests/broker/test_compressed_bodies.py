"""Compressed bodies keep their codec: the broker stores the sysFlag a client sends (LZ4 0x101,
ZSTD 0x201, ZLIB 0x301, an older client's ZLIB 0x1), bodies byte for byte, and the project's
client decodes each codec."""

from __future__ import annotations

import logging
import zlib
from pathlib import Path

import broker_helpers
import pytest
from broker_helpers import cluster, props, pull_fields, send_fields

from rocketstore.client import AsyncProducer, Message, decode_messages
from rocketstore.common.batch import encode_batch_body
from rocketstore.common.compression import compress_body
from rocketstore.common.record import SysFlag
from rocketstore.remoting import RequestCode, ResponseCode

arun = broker_helpers.arun
SEND = RequestCode.SEND_MESSAGE
PULL = RequestCode.PULL_MESSAGE
ORIGINAL = b"".join(b"order %d paid; " % i for i in range(600))


def compressed(codec: str) -> bytes:
    return compress_body(ORIGINAL, codec, 5)


async def pull_all(cl: broker_helpers.Cluster, topic: str, queue_id: int = 0, *,
                   may_be_empty: bool = False) -> bytes:
    await cl.dispatched()
    r = await cl.call(PULL, pull_fields("g", topic, queue_id, 0))
    if may_be_empty and r.code != ResponseCode.SUCCESS:
        return b""
    assert r.code == ResponseCode.SUCCESS, r.remark
    return r.body_bytes()


def test_each_codec_is_stored_as_sent_and_decoded(arun, tmp_path: Path) -> None:
    sends = [(0x101, compressed("LZ4")), (0x201, compressed("ZSTD")), (0x301, compressed("ZLIB")),
             (0x1, zlib.compress(ORIGINAL)), (0x0, ORIGINAL)]

    async def main() -> None:
        async with cluster(tmp_path / "store") as cl:
            for sys_flag, body in sends:
                r = await cl.call(SEND, send_fields("zipped", 0, props(TAGS="t"), sysFlag=sys_flag), body)
                assert r.code == ResponseCode.SUCCESS, r.remark
            data = await pull_all(cl, "zipped")
            stored = decode_messages(data, decompress=False)
            assert [(m.sys_flag, m.body) for m in stored] == sends
            assert [m.body for m in decode_messages(data)] == [ORIGINAL] * len(sends)
            assert stored[0].sys_flag & SysFlag.COMPRESSED

    arun(main())


def test_batches_keep_the_codec_bits_and_hosts_bits_are_the_stores(arun, tmp_path: Path) -> None:
    body = encode_batch_body([(0, compressed("LZ4"), props(KEYS="k0").encode()),
                              (0, compressed("LZ4"), props(KEYS="k1").encode())])

    async def main() -> None:
        async with cluster(tmp_path / "store") as cl:
            r = await cl.call(SEND, send_fields("zb", 1, batch="true", sysFlag=0x101), body)
            assert r.code == ResponseCode.SUCCESS, r.remark
            # IPv6 host bits from a client do not describe the hosts this store writes
            r = await cl.call(SEND, send_fields("zb", 1, sysFlag=0x201 | 0x30), compressed("ZSTD"))
            assert r.code == ResponseCode.SUCCESS, r.remark
            r = await cl.call(SEND, send_fields("zb", 1, sysFlag=1 << 40), b"x")
            assert r.code == ResponseCode.MESSAGE_ILLEGAL and "sysFlag" in r.remark
            msgs = decode_messages(await pull_all(cl, "zb", 1))
            assert [(m.sys_flag, m.body) for m in msgs] == [(0x101, ORIGINAL)] * 2 + [(0x201, ORIGINAL)]

    arun(main())


def test_multi_tag_topics_get_the_multi_tags_bit(arun, tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster(tmp_path / "store") as cl:
            r = await cl.call(RequestCode.UPDATE_AND_CREATE_TOPIC,
                              {"topic": "mt", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6,
                               "topicFilterType": "MULTI_TAG", "defaultTopic": "TBW102"})
            assert r.code == ResponseCode.SUCCESS, r.remark
            r = await cl.call(SEND, send_fields("mt", 0, sysFlag=0x301), compressed("ZLIB"))
            assert r.code == ResponseCode.SUCCESS, r.remark
            (msg,) = decode_messages(await pull_all(cl, "mt"))
            assert msg.sys_flag == 0x303 and msg.body == ORIGINAL

    arun(main())


def test_a_body_that_does_not_decode_is_delivered_as_stored_with_a_log_line(
        arun, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> bytes:
        async with cluster(tmp_path / "store") as cl:
            # a ZLIB body marked LZ4, and a codec value (4) that names none
            for sys_flag in (0x101, 0x401):
                r = await cl.call(SEND, send_fields("bad", 0, sysFlag=sys_flag), zlib.compress(ORIGINAL))
                assert r.code == ResponseCode.SUCCESS, r.remark
            return await pull_all(cl, "bad")

    data = arun(main())
    with caplog.at_level(logging.WARNING, logger="rocketstore.client"):
        msgs = decode_messages(data)
    assert [(m.sys_flag, m.body) for m in msgs] == [(0x101, zlib.compress(ORIGINAL)),
                                                    (0x401, zlib.compress(ORIGINAL))]
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("rocketstore.client")]
    assert len(lines) == 2
    assert "'bad'-0@0" in lines[0] and "LZ4 body does not decode" in lines[0]
    assert "'bad'-0@1" in lines[1] and "compression type 4" in lines[1]


@pytest.mark.parametrize("codec, flags", [("ZLIB", 0x301), ("LZ4", 0x101), ("ZSTD", 0x201)])
def test_the_producer_compresses_with_its_compress_type(arun, tmp_path: Path, codec: str, flags: int) -> None:
    async def main() -> None:
        async with cluster(tmp_path / "store") as cl:
            producer = AsyncProducer("PG", namesrv_addr=cl.namesrv.address, compress_type=codec)
            await producer.start()
            try:
                await producer.send(Message("fromclient", ORIGINAL, tags="big"))
                await producer.send(Message("fromclient", b"small", tags="small"))
            finally:
                await producer.shutdown()
            topic_queues = [m for q in range(4) for m in decode_messages(await pull_all(cl, "fromclient", q,
                                                                             may_be_empty=True))]
            by_tag = {m.tags: m for m in topic_queues}
            assert by_tag["big"].sys_flag == flags and by_tag["big"].body == ORIGINAL
            assert by_tag["small"].sys_flag == 0 and by_tag["small"].body == b"small"

    arun(main())
