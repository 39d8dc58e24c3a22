"""Messages as the console shows them: decoded fields, properties, the body as text or hex,
the time-range search and the consumption trace."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rocketstore.client import AsyncAdmin, MessageExt, MessageQueue
from rocketstore.client.errors import MQBrokerError, MQClientError

#: the most messages one search shows (rocketmq-dashboard's limit is 2,000 for a time range)
SEARCH_LIMIT = 64


def format_ms(ms: int) -> str:
    if ms <= 0:
        return ""
    return datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def parse_time(text: str, field_name: str) -> int:
    """Milliseconds since the epoch from ``YYYY-MM-DDTHH:MM[:SS]`` (local time, what an HTML
    datetime-local input sends) or a number of milliseconds; ValueError names the field."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    try:
        return int(datetime.fromisoformat(text).timestamp() * 1000)
    except ValueError:
        raise ValueError(f"{field_name} must be a date and time (YYYY-MM-DDTHH:MM) "
                         f"or milliseconds, got {text[:40]!r}") from None


def body_text(body: bytes) -> str | None:
    """The body as UTF-8 text, None when it is not."""
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return None


def body_hex(body: bytes, width: int = 16) -> str:
    """A hex dump: offset, bytes, printable ASCII."""
    lines = []
    for start in range(0, len(body), width):
        chunk = body[start:start + width]
        ascii_part = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{start:08x}  {chunk.hex(' '):<{width * 3}} {ascii_part}")
    return "\n".join(lines)


def message_row(msg: MessageExt) -> dict[str, Any]:
    """What a result list shows of a message."""
    return {"msgId": msg.msg_id, "offsetMsgId": msg.offset_msg_id, "topic": msg.topic,
            "tags": msg.tags or "", "keys": " ".join(msg.keys), "brokerName": msg.broker_name or "",
            "queueId": msg.queue_id, "queueOffset": msg.queue_offset,
            "storeTime": format_ms(msg.store_timestamp), "bodySize": len(msg.body)}


def message_detail(msg: MessageExt) -> dict[str, Any]:
    """Every field of a message, its properties and its body."""
    return {**message_row(msg), "bornTime": format_ms(msg.born_timestamp), "bornHost": msg.born_host,
            "storeHost": msg.store_host, "commitLogOffset": msg.commit_log_offset, "sysFlag": msg.sys_flag,
            "flag": msg.flag, "bodyCrc": msg.body_crc, "reconsumeTimes": msg.reconsume_times,
            "storeSize": msg.store_size, "properties": dict(sorted(msg.properties.items())),
            "bodyText": body_text(msg.body), "bodyHex": body_hex(msg.body)}


@dataclass
class Track:
    """One group's view of a message (rocketmq-dashboard's MessageTrack)."""

    group: str
    consumed: bool
    consumer_offset: int
    detail: str


async def _broker_of(admin: AsyncAdmin, msg: MessageExt) -> str | None:
    """The name of the broker that stored ``msg`` (a message viewed by its offset id comes
    without it): the one of the topic's route registered at its store host, else the
    route's only broker."""
    route = await admin.route(msg.topic)
    for broker in route.broker_datas:
        if msg.store_host in broker.broker_addrs.values():
            return broker.broker_name
    return route.broker_datas[0].broker_name if len(route.broker_datas) == 1 else None


async def consumption_trace(admin: AsyncAdmin, msg: MessageExt) -> list[Track]:
    """For each group consuming the message's topic: consumed (its committed offset of the
    message's queue is past the message) or not yet. Fills in the message's broker name."""
    if not msg.broker_name:
        msg.broker_name = await _broker_of(admin, msg)
    broker_name = msg.broker_name
    tracks = []
    for group in await admin.topic_consumers(msg.topic):
        try:
            progress = await admin.consumer_progress(group, msg.topic)
        except (MQClientError, MQBrokerError, OSError) as exc:
            tracks.append(Track(group, False, -1, f"no progress: {exc}"))
            continue
        row = next((r for r in progress["offsetTable"]
                    if r["brokerName"] == broker_name and r["queueId"] == msg.queue_id), None)
        if row is None:
            tracks.append(Track(group, False, -1, "the group has no offset of this queue"))
        elif row["consumerOffset"] > msg.queue_offset:
            tracks.append(Track(group, True, row["consumerOffset"], "CONSUMED"))
        else:
            tracks.append(Track(group, False, row["consumerOffset"], "NOT_CONSUME_YET"))
    return tracks


async def search_time_range(admin: AsyncAdmin, topic: str, begin_ms: int, end_ms: int,
                            limit: int = SEARCH_LIMIT) -> list[MessageExt]:
    """The messages of ``topic`` stored in [begin_ms, end_ms], the earliest ``limit`` of each
    queue, merged by store time; the queues' offsets found by SEARCH_OFFSET_BY_TIMESTAMP."""
    if end_ms < begin_ms:
        raise ValueError("end must not be before begin")

    async def one_queue(mq: MessageQueue) -> list[MessageExt]:
        first = await admin.search_offset(mq, begin_ms)
        # the search answers the last message's offset for a time after it: one more is read
        # and the store times decide
        last = min(await admin.max_offset(mq), await admin.search_offset(mq, end_ms) + 1)
        found: list[MessageExt] = []
        offset = first
        while offset < last and len(found) < limit:
            batch = await admin.pull(mq, offset, min(32, last - offset))
            if not batch:
                break
            found.extend(m for m in batch if begin_ms <= m.store_timestamp <= end_ms)
            offset = batch[-1].queue_offset + 1
        return found[:limit]

    per_queue = await asyncio.gather(*(one_queue(mq) for mq in await admin.queues(topic)))
    merged = sorted((m for found in per_queue for m in found), key=lambda m: (m.store_timestamp, m.queue_id))
    return merged[:limit]


def default_range() -> tuple[str, str]:
    """The last hour, as datetime-local input values."""
    now = time.time()
    fmt = "%Y-%m-%dT%H:%M"
    return (datetime.fromtimestamp(now - 3600).strftime(fmt), datetime.fromtimestamp(now + 60).strftime(fmt))
