"""Log lines quote at most a few hundred characters of any client-supplied string: one request
with a 5 MiB topic, default topic or group writes a short line, and gets its error code."""

from __future__ import annotations

import logging
from pathlib import Path

import broker_helpers
import pytest
from broker_helpers import cluster, pull_fields, send_fields

from rocketstore.remoting import RequestCode, ResponseCode

arun = broker_helpers.arun

BIG = "T" * (5 * 1024 * 1024)


@pytest.mark.parametrize("native", [True, False])
def test_a_5_mib_client_string_writes_a_short_log_line(arun, tmp_path: Path, caplog,
                                                       native: bool) -> None:
    script = [
        ("defaultTopic", RequestCode.SEND_MESSAGE, send_fields("newtopic", 0, defaultTopic=BIG),
         ResponseCode.TOPIC_NOT_EXIST),
        ("topic", RequestCode.SEND_MESSAGE, send_fields(BIG, 0), ResponseCode.SYSTEM_ERROR),
        ("v2 topic", RequestCode.SEND_MESSAGE_V2,
         {"a": "PG", "b": BIG, "c": "TBW102", "d": 4, "e": 0, "f": 0, "g": 1, "h": 0},
         ResponseCode.SYSTEM_ERROR),
        ("queueId", RequestCode.SEND_MESSAGE, send_fields("q", 0, queueId=BIG),
         ResponseCode.SYSTEM_ERROR),
        ("pull group", RequestCode.PULL_MESSAGE, pull_fields(BIG, "q", 0, 0),
         ResponseCode.SUCCESS),
        ("send back group", RequestCode.CONSUMER_SEND_MSG_BACK,
         {"group": BIG, "offset": 0, "delayLevel": 0}, ResponseCode.SYSTEM_ERROR),
    ]

    async def main() -> None:
        async with cluster(tmp_path / "store", native_send=native) as cl:
            assert (await cl.call(RequestCode.SEND_MESSAGE, send_fields("q", 0), b"x")).code == 0
            for what, code, fields, expected in script:
                caplog.clear()
                with caplog.at_level(logging.DEBUG, logger="rocketstore"):
                    r = await cl.call(code, fields, b"x", timeout=30)
                assert r.code == expected, (what, r.code, (r.remark or "")[:200])
                assert len(caplog.text) < 4096, (what, caplog.text[:500])
                if what in ("defaultTopic", "pull group"):    # the value is quoted, in part
                    assert "TTTT... (5,242,880 chars)" in caplog.text, caplog.text

    arun(main())
