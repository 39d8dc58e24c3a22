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
        body["queueData"] = [{"eval": False, "physicOffset": offset, "physicSize": size, "tagsCode": tags_code}
                             for offset, size, tags_code in units]
        return create_response(request, body=orjson.dumps(body))
