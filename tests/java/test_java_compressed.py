"""Compressed bodies from RocketMQ 4.9.8's Java producer (LZ4 through
``-Drocketmq.message.compressType=LZ4``, and its default ZLIB) through rocketstore's name server
and broker: stored with the sysFlag the producer set (0x101, 0x301), read back by the Java
consumer and by rocketstore's client. (Debian's zstd-jni has no native library: the Java side
can do ZLIB and LZ4 only.)"""

from __future__ import annotations

import time

from java_env import JavaPrograms

from rocketstore.client import PullConsumer

BODY_BYTES = 9000       # over the producer's compressMsgBodyOverHowmuch (4 KiB)
SYS_FLAG = {"LZ4": 0x101, "ZLIB": 0x301}


def body(i: int) -> str:
    return f"big-{i}:".ljust(BODY_BYTES, "x")


def test_java_lz4_and_zlib_bodies_are_stored_as_sent_and_read_by_both_clients(
        rs_cluster, java_programs: JavaPrograms) -> None:
    namesrv = rs_cluster.namesrv_addr
    for codec, first in (("LZ4", 0), ("ZLIB", 5)):
        sent = java_programs.json_lines("RsCompressed", "send", namesrv, "Zipped", first, 5, BODY_BYTES,
                                        props={"rocketmq.message.compressType": codec})
        assert [s["status"] for s in sent] == ["SEND_OK"] * 5

    got = java_programs.json_lines("RsJava", "consume", namesrv, "java_reads_zipped", "Zipped", 10, 60_000)
    assert len(got) == 10
    want = {body(i): SYS_FLAG["LZ4" if i < 5 else "ZLIB"] for i in range(10)}
    assert {m["body"]: m["sysFlag"] for m in got} == want

    ours = []
    with PullConsumer("py_reads_zipped", namesrv_addr=namesrv,
                      consume_from_where="CONSUME_FROM_FIRST_OFFSET") as consumer:
        consumer.subscribe("Zipped")
        deadline = time.monotonic() + 60
        while len(ours) < 10 and time.monotonic() < deadline:
            ours.extend(consumer.poll(timeout=0.5))
    assert {m.body.decode(): m.sys_flag for m in ours} == want and len(ours) == 10
