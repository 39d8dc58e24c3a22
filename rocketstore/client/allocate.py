"""How a consumer group shares a topic's queues (RocketMQ's AllocateMessageQueueStrategy).

A strategy is a callable ``strategy(group, current_client_id, queues, client_ids) -> list``
that every member runs with the same sorted inputs, so that each queue goes to exactly one
member without the members talking to each other.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from rocketstore.client.message import MessageQueue


class AllocateMessageQueueStrategy(Protocol):
    name: str

    def __call__(self, group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]: ...


def _check(current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]) -> bool:
    if not current_cid:
        raise ValueError("current_cid is empty")
    return bool(mq_all) and current_cid in cid_all


class AllocateMessageQueueAveragely:
    """Consecutive blocks: with 8 queues and 3 members, 3 + 3 + 2 (RocketMQ's default)."""

    name = "AVG"

    def __call__(self, group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:
        if not _check(current_cid, mq_all, cid_all):
            return []
        index = list(cid_all).index(current_cid)
        n, m = len(mq_all), len(cid_all)
        mod = n % m
        if n <= m:
            average = 1
        elif mod > 0 and index < mod:
            average = n // m + 1
        else:
            average = n // m
        start = index * average if mod > 0 and index < mod else index * average + mod
        count = min(average, n - start)
        return [mq_all[(start + i) % n] for i in range(max(0, count))]


class AllocateMessageQueueAveragelyByCircle:
    """Dealt like cards: member i gets queues i, i + m, i + 2m, ..."""

    name = "AVG_BY_CIRCLE"

    def __call__(self, group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:
        if not _check(current_cid, mq_all, cid_all):
            return []
        index = list(cid_all).index(current_cid)
        return [mq for i, mq in enumerate(mq_all) if i % len(cid_all) == index]


class AllocateMessageQueueByConfig:
    """Always the queues it was given, whoever else is in the group."""

    name = "CONFIG"

    def __init__(self, queues: Sequence[MessageQueue]) -> None:
        self.queues = list(queues)

    def __call__(self, group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:
        return list(self.queues)
