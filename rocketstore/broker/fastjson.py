"""JSON as RocketMQ's fastjson writes bodies whose maps are keyed by objects.

ConsumeStats, TopicStatsTable and ResetOffsetBody map MessageQueue objects to values; fastjson
writes such a key as the object itself (``{{"brokerName":"b","queueId":0,"topic":"T"}:{...}}``),
which is not valid JSON but is what RocketMQ's tools parse. :func:`dumps` writes that form
for keys wrapped in :class:`ObjectKey`, and sorted standard JSON for everything else.
"""

from __future__ import annotations

from typing import Any

import orjson


class ObjectKey(tuple[tuple[str, Any], ...]):
    """A map key written as a JSON object (its fields in sorted order)."""

    @classmethod
    def of(cls, **fields: Any) -> ObjectKey:
        return cls(sorted(fields.items()))


def message_queue_key(topic: str, broker_name: str, queue_id: int) -> ObjectKey:
    return ObjectKey.of(brokerName=broker_name, queueId=queue_id, topic=topic)


def _key_sort(key: Any) -> tuple[int, Any]:
    if isinstance(key, ObjectKey):
        return (1, tuple((name, str(value)) for name, value in key))
    return (0, str(key))


def _write(value: Any, out: list[bytes]) -> None:
    if isinstance(value, dict):
        out.append(b"{")
        first = True
        for key in sorted(value, key=_key_sort):
            if not first:
                out.append(b",")
            first = False
            if isinstance(key, ObjectKey):
                out.append(orjson.dumps(dict(key)))
            else:
                out.append(orjson.dumps(str(key)))
            out.append(b":")
            _write(value[key], out)
        out.append(b"}")
    elif isinstance(value, (list, tuple)) and not isinstance(value, ObjectKey):
        out.append(b"[")
        for i, item in enumerate(value):
            if i:
                out.append(b",")
            _write(item, out)
        out.append(b"]")
    else:
        out.append(orjson.dumps(value))


def dumps(value: Any) -> bytes:
    out: list[bytes] = []
    _write(value, out)
    return b"".join(out)
