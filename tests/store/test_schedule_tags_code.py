"""ConsumeQueue units of SCHEDULE_TOPIC_XXXX carry the delivery time as tags code (store time +
the DELAY level's delay, capped at the highest level), as RocketMQ writes them; every other
unit the TAGS hash. Checked against the independent reference codec."""
from __future__ import annotations

import refcodec
from store_faults import open_store

from rocketstore.message import Message


def test_schedule_units_carry_the_delivery_time(tmp_path):
    root = tmp_path / "store"
    cases = [("SCHEDULE_TOPIC_XXXX", {"DELAY": "3", "REAL_TOPIC": "t"}, "a"),
             ("SCHEDULE_TOPIC_XXXX", {"DELAY": "99"}, "a"),       # capped at level 18
             ("SCHEDULE_TOPIC_XXXX", {}, "b"),
             ("orders", {"DELAY": "3"}, "c")]                     # only the schedule topic
    with open_store(root) as store:
        for topic, properties, tags in cases:
            assert store.put_message(Message(topic, b"x", tags=tags, properties=dict(properties)), 2).ok
        assert store.wait_dispatched()
        got = {topic: [] for topic, _, _ in cases}
        for topic in got:
            got[topic] = store.consume_queues.find(topic, 2).read_units(0, 10)["tags_code"].tolist()
    records = list(refcodec.iter_commitlog(root))
    expected: dict[str, list[int]] = {}
    for rec in records:
        expected.setdefault(rec.topic, []).append(refcodec.tags_code(rec.topic, rec.properties, rec.storeTimestamp))
    assert got == expected
    assert expected["SCHEDULE_TOPIC_XXXX"][0] == records[0].storeTimestamp + 10_000
