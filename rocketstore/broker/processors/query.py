"""QUERY_MESSAGE 12 (messages of a topic by key, from the IndexFiles) and VIEW_MESSAGE_BY_ID
33 (one record by its CommitLog offset). Bodies are the records as stored, as memoryviews of
the mapped files."""

from __future__ import annotations

from rocketstore.message import CorruptRecordError
from rocketstore.remoting import (
    RemotingCommand,
    RemotingConnection,
    RemotingServer,
    RequestCode,
    ResponseCode,
    create_response,
)
from rocketstore.remoting.headers import get_int, get_str, require_int, require_str
from rocketstore.store import MEMORY_OFFSET_BASE, MemoryMessageStore, MessageStore


class QueryMessageProcessor:
    def __init__(self, store: MessageStore, memory: MemoryMessageStore | None = None) -> None:
        self.store = store
        #: the memory topics' store: offset message ids from MEMORY_OFFSET_BASE on are its
        self.memory = memory

    def register_with(self, server: RemotingServer) -> None:
        server.register_processor(RequestCode.QUERY_MESSAGE, self.query_message)
        server.register_processor(RequestCode.VIEW_MESSAGE_BY_ID, self.view_message_by_id)

    def query_message(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        ext = request.ext_fields
        topic = require_str(ext, "topic")
        key = require_str(ext, "key")
        max_num = require_int(ext, "maxNum", minimum=1, maximum=2**31 - 1)
        begin = get_int(ext, "beginTimestamp", 0) or 0
        end = get_int(ext, "endTimestamp", 2**63 - 1)
        if end is None or end <= 0:
            end = 2**63 - 1
        if get_str(ext, "_UNIQUE_KEY_QUERY") == "true":
            max_num = self.store.config.default_query_max_num
        max_num = min(max_num, self.store.config.max_msgs_num_batch)
        if not key or begin > end:
            return create_response(request, ResponseCode.QUERY_NOT_FOUND,
                                   "can not find message, maybe time range not correct")
        found = self.store.query_message(topic, key, max_num, begin, end)
        ext_out = {"indexLastUpdateTimestamp": str(found.index_last_update_timestamp),
                   "indexLastUpdatePhyoffset": str(found.index_last_update_phy_offset)}
        if not found.messages:
            return create_response(request, ResponseCode.QUERY_NOT_FOUND,
                                   "can not find message, maybe time range not correct",
                                   ext_fields=ext_out)
        return create_response(request, ext_fields=ext_out,
                               body=[message.record for message in found.messages])

    def view_message_by_id(self, ctx: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        offset = require_int(request.ext_fields, "offset", minimum=0)
        message = None
        if offset >= MEMORY_OFFSET_BASE and self.memory is not None:
            message = self.memory.look_message_by_offset(offset)
        elif self.store.get_min_phy_offset() <= offset < self.store.get_max_phy_offset():
            try:
                message = self.store.look_message_by_offset(offset)
            except (CorruptRecordError, ValueError):
                message = None
        if message is None:
            return create_response(request, ResponseCode.SYSTEM_ERROR,
                                   f"can not find message by the offset, {offset}")
        return create_response(request, body=message.record)
