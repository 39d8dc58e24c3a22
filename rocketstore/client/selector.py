"""Queue selectors: which of a topic's queues a message goes to (RocketMQ's MessageQueueSelector).

A selector is any callable ``selector(queues, message, arg) -> MessageQueue``. Messages that
must stay in order (an order's events) go to one queue: :class:`SelectMessageQueueByHash` picks
it from ``arg``'s hash, computed as Java's ``hashCode`` so that Python and Java producers put
one key on the same queue.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, Protocol

from rocketstore.client.message import Message, MessageQueue, java_hash_code


class MessageQueueSelector(Protocol):
    def __call__(self, queues: Sequence[MessageQueue], message: Message, arg: Any) -> MessageQueue: ...


class SelectMessageQueueByHash:
    """``queues[abs(hashCode(arg) % len(queues))]``, as RocketMQ's SelectMessageQueueByHash."""

    def __call__(self, queues: Sequence[MessageQueue], message: Message, arg: Any) -> MessageQueue:
        # Java: abs(hashCode % n), where % keeps the dividend's sign: the same as abs(h) % n.
        return queues[abs(java_hash_code(arg)) % len(queues)]


class SelectMessageQueueByRandom:
    def __call__(self, queues: Sequence[MessageQueue], message: Message, arg: Any) -> MessageQueue:
        return queues[random.randrange(len(queues))]
