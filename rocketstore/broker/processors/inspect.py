"""What an admin looks at that no other processor answers (RocketMQ's AdminBrokerProcessor):
GET_ALL_PRODUCER_INFO 328 (``mqadmin producer``: every producer group's members) and
QUERY_CONSUME_QUEUE 321 (``mqadmin queryCq``: a ConsumeQueue's units from an index).

QUERY_CONSUME_QUEUE answers as RocketMQ 4.9.8 does: SYSTEM_ERROR "<queueId>@<topic> is not
exist!" for a queue the store does not have; SUCCESS without a body, remark "Index <i> of
<queueId>@<topic> is not exist!", for an index outside the queue (mqadmin then fails on the
missing body, as it does against RocketMQ's broker); otherwise up to ``count`` units from
``index`` within one ConsumeQueue file, with the group's subscription when one is asked for.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

import orjson

from rocketstore.remoting import (
    RemotingCommand,
    RemotingConnection,
    RemotingServer,
    RequestCode,
    ResponseCode,
    create_response,
)
from rocketstore.remoting.headers import get_str, require_int, require_str
from rocketstore.store import is_ext_addr

if TYPE_CHECKING:
    from rocketstore.broker.client_groups import ConsumerManager, ProducerManager
    from rocketstore.store import MessageStore


class InspectProcessor:
    def __init__(self, store: MessageStore, consumers: ConsumerManager, producers: ProducerManager) -> None:
        self.store = store
        self.consumers = consumers
        self.producers = producers

    def register_with(self, server: RemotingServer) -> None:
        server.register_processor(RequestCode.GET_ALL_PRODUCER_INFO, self.get_all_producer_info)
        server.register_processor(RequestCode.QUERY_CONSUME_QUEUE, self.query_consume_queue)

    def get_all_producer_info(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """RocketMQ's ProducerTableInfo: group -> [ProducerInfo]."""
        data = {group: [{"clientId": ch.client_id, "language": ch.language,
                         "lastUpdateTimestamp": int(ch.last_update_ms),
                         "remoteIP": ch.connection.remote_address, "version": ch.version}
                        for ch in channels.values()]
                for group, channels in sorted(self.producers.groups.items())}
        return create_response(request, body=orjson.dumps({"data": data}))

    def query_consume_queue(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        ext = request.ext_fields
        topic = require_str(ext, "topic")
        queue_id = require_int(ext, "queueId")
        index = require_int(ext, "index")
        count = require_int(ext, "count")
        group = get_str(ext, "consumerGroup")
        if queue_id < 0 or index < 0 or count < 0:
            return create_response(request, ResponseCode.SYSTEM_ERROR,
                                   "queueId, index and count must be >= 0")
        units = self.store.consume_queue_units(topic, queue_id, index, min(count, 10_000))
        if units is None:
            return create_response(request, ResponseCode.SYSTEM_ERROR, f"{queue_id}@{topic} is not exist!")
        body: dict[str, Any] = {
            "maxQueueIndex": self.store.get_max_offset_in_queue(topic, queue_id),
            "minQueueIndex": self.store.get_min_offset_in_queue(topic, queue_id),
        }
        if group is not None:
            info = self.consumers.get(group)
            subscription = None if info is None else info.subscriptions.get(topic)
            if subscription is None:
                body["filterData"] = f"{group}@{topic} is not online!"
            else:
                body["subscriptionData"] = subscription.to_json()
                body["filterData"] = "null"     # fastjson's text for no ConsumerFilterData (tags)
        if not units:
            return create_response(request, remark=f"Index {index} of {queue_id}@{topic} is not exist!")
        body["queueData"] = [self._unit_json(topic, queue_id, *unit) for unit in units]
        return create_response(request, body=orjson.dumps(body))

    def _unit_json(self, topic: str, queue_id: int, offset: int, size: int,
                   tags_code: int) -> dict[str, Any]:
        """One ConsumeQueueData; a unit whose tags code is an ext address gets its ext unit
        as RocketMQ shows it (extendDataJson: fastjson of the CqExtUnit; bitMap:
        BitsArray.toString)."""
        one: dict[str, Any] = {"eval": False, "physicOffset": offset, "physicSize": size,
                               "tagsCode": tags_code}
        if not is_ext_addr(tags_code):
            return one
        unit = self.store.consume_queue_ext_unit(topic, queue_id, tags_code)
        if unit is None:
            one["extendDataJson"] = "Cannot find ext unit!"
            return one
        ext: dict[str, Any] = {}
        if unit.filter_bit_map is not None:
            ext["filterBitMap"] = base64.b64encode(unit.filter_bit_map).decode("ascii")
            one["bitMap"] = _bits_text(unit.filter_bit_map)
        ext.update(msgStoreTime=unit.msg_store_time, size=unit.size, tagsCode=unit.tags_code)
        one["extendDataJson"] = orjson.dumps(ext).decode("utf-8")
        return one


def _bits_text(bitmap: bytes) -> str:
    """RocketMQ's BitsArray.toString: the bytes from the last, each from its high bit, a
    newline after every byte whose index is a multiple of 8."""
    out = []
    for i in range(len(bitmap) - 1, -1, -1):
        out.append(format(bitmap[i], "08b"))
        if i % 8 == 0:
            out.append("\n")
    return "".join(out)
