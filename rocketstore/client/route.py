"""From a topic's route to the queues a producer writes and a consumer reads.

RocketMQ's ``MQClientInstance.topicRouteData2TopicPublishInfo`` and
``topicRouteData2TopicSubscribeInfo``: a producer writes the writable queues of brokers that
have a master; a consumer reads the readable queues; an ordered topic configured on the name
server (``orderTopicConf``, ``"broker-a:4;broker-b:4"``) lists its queues itself.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from rocketstore.client.message import MessageQueue
from rocketstore.common.perm import PERM_READ, PERM_WRITE
from rocketstore.common.text import is_ascii_int
from rocketstore.remoting.route_bodies import MASTER_ID, TopicRouteData


@dataclass
class TopicPublishInfo:
    """The queues a producer may send a topic's messages to, and its round-robin position."""

    order_topic: bool = False
    message_queues: list[MessageQueue] = field(default_factory=list)
    route: TopicRouteData | None = None
    send_which_queue: int = field(default_factory=lambda: random.randrange(1 << 16))

    def ok(self) -> bool:
        return bool(self.message_queues)

    def _next_index(self) -> int:
        self.send_which_queue = (self.send_which_queue + 1) & 0x7FFFFFFF
        return self.send_which_queue

    def select_one_message_queue(self, last_broker_name: str | None = None,
                                 avoid: Callable[[str], bool] | None = None) -> MessageQueue:
        """The next queue round robin; on a retry (``last_broker_name`` set) one on another
        broker when there is one, as RocketMQ's TopicPublishInfo does. ``avoid(broker_name)``
        skips brokers known to be failing, unless all of them are."""
        queues = self.message_queues
        if not queues:
            raise LookupError("no message queue to send to")
        if last_broker_name is None and avoid is None:
            return queues[self._next_index() % len(queues)]
        for _ in range(len(queues)):
            mq = queues[self._next_index() % len(queues)]
            if mq.broker_name != last_broker_name and not (avoid and avoid(mq.broker_name)):
                return mq
        return queues[self._next_index() % len(queues)]


def publish_info_from_route(topic: str, route: TopicRouteData) -> TopicPublishInfo:
    info = TopicPublishInfo(route=route)
    if route.order_topic_conf:
        for item in route.order_topic_conf.split(";"):
            broker_name, _, count = item.partition(":")
            if broker_name and is_ascii_int(count):
                info.message_queues.extend(MessageQueue(topic, broker_name, i) for i in range(int(count)))
        info.order_topic = True
        return info
    masters = {b.broker_name for b in route.broker_datas if MASTER_ID in b.broker_addrs}
    for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
        if qd.perm & PERM_WRITE and qd.broker_name in masters:
            info.message_queues.extend(MessageQueue(topic, qd.broker_name, i) for i in range(qd.write_queue_nums))
    return info


def subscribe_info_from_route(topic: str, route: TopicRouteData) -> set[MessageQueue]:
    queues: set[MessageQueue] = set()
    for qd in route.queue_datas:
        if qd.perm & PERM_READ:
            queues.update(MessageQueue(topic, qd.broker_name, i) for i in range(qd.read_queue_nums))
    return queues


def broker_addresses(route: TopicRouteData) -> dict[str, dict[int, str]]:
    return {b.broker_name: dict(b.broker_addrs) for b in route.broker_datas}
