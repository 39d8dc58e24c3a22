"""Consumer offsets and queue offsets: QUERY_CONSUMER_OFFSET 14, UPDATE_CONSUMER_OFFSET 15,
SEARCH_OFFSET_BY_TIMESTAMP 29, GET_MAX_OFFSET 30, GET_MIN_OFFSET 31,
GET_EARLIEST_MSG_STORETIME 32.

QUERY_CONSUMER_OFFSET for a group that never committed on a queue answers SUCCESS with the
queue's min offset (a 4.x broker answers 0 while the queue's first message is still there):
the C++ client otherwise starts at the queue's end and a new group would skip the backlog.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocketstore.broker.consumer_offset_manager import ConsumerOffsetManager
from rocketstore.remoting import (
    RemotingCommand,
    RemotingConnection,
    RemotingServer,
    RequestCode,
    ResponseCode,
    create_response,
)
from rocketstore.remoting.headers import require_int, require_str
from rocketstore.store import MessageStore

if TYPE_CHECKING:
    from rocketstore.broker.topic_stores import TopicStores


class ConsumerOffsetProcessor:
    def __init__(self, store: MessageStore | TopicStores, offsets: ConsumerOffsetManager) -> None:
        """store: queue offsets by topic (the broker's TopicStores), or a store's."""
        self.store = store
        self.offsets = offsets

    def register_with(self, server: RemotingServer) -> None:
        server.register_processor(RequestCode.QUERY_CONSUMER_OFFSET, self.query_consumer_offset)
        server.register_processor(RequestCode.UPDATE_CONSUMER_OFFSET, self.update_consumer_offset)
        server.register_processor(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, self.search_offset_by_timestamp)
        server.register_processor(RequestCode.GET_MAX_OFFSET, self.get_max_offset)
        server.register_processor(RequestCode.GET_MIN_OFFSET, self.get_min_offset)
        server.register_processor(RequestCode.GET_EARLIEST_MSG_STORETIME, self.get_earliest_msg_storetime)

    @staticmethod
    def _queue(request: RemotingCommand) -> tuple[str, int]:
        ext = request.ext_fields
        return require_str(ext, "topic"), require_int(ext, "queueId", minimum=0, maximum=65535)

    def query_consumer_offset(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        group = require_str(request.ext_fields, "consumerGroup")
        topic, queue_id = self._queue(request)
        offset = self.offsets.query(group, topic, queue_id)
        if offset < 0:
            offset = self.store.get_min_offset_in_queue(topic, queue_id)
        return create_response(request, ext_fields={"offset": str(offset)})

    def update_consumer_offset(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        ext = request.ext_fields
        group = require_str(ext, "consumerGroup")
        topic, queue_id = self._queue(request)
        offset = require_int(ext, "commitOffset")
        if offset < 0:
            return create_response(request, ResponseCode.SYSTEM_ERROR,
                                   f"commitOffset must be >= 0, got {offset}")
        self.offsets.commit(group, topic, queue_id, offset)
        return create_response(request)

    def search_offset_by_timestamp(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        topic, queue_id = self._queue(request)
        timestamp = require_int(request.ext_fields, "timestamp")
        offset = self.store.get_offset_in_queue_by_time(topic, queue_id, timestamp)
        return create_response(request, ext_fields={"offset": str(offset)})

    def get_max_offset(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        topic, queue_id = self._queue(request)
        return create_response(request, ext_fields={
            "offset": str(self.store.get_max_offset_in_queue(topic, queue_id))})

    def get_min_offset(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        topic, queue_id = self._queue(request)
        return create_response(request, ext_fields={
            "offset": str(self.store.get_min_offset_in_queue(topic, queue_id))})

    def get_earliest_msg_storetime(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        topic, queue_id = self._queue(request)
        timestamp = self.store.get_earliest_message_time(topic, queue_id)
        return create_response(request, ext_fields={"timestamp": str(timestamp)})
