"""SEND_BATCH_MESSAGE 320 after the send rules: a batch's own rules (not to a retry or
dead-letter topic, not empty, no delayed or transaction message, no NUL in a property nor
\\x01 in a property value), its messages put together, and the reply (every msgId,
comma-separated; the first queue offset)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rocketstore.broker.processors.send._send_header import SendRequestHeader
from rocketstore.broker.processors.send._send_path import (
    NUL_IN_PROPERTIES,
    SendPath,
    illegal_properties,
    properties_and_refusal,
)
from rocketstore.common.batch import BatchBodyError, decode_batch_body
from rocketstore.common.topics import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX
from rocketstore.message import Message, MessageProperty, PutMessageStatus
from rocketstore.remoting import RemotingCommand, RemotingConnection, ResponseCode, create_response

if TYPE_CHECKING:
    from rocketstore.broker.processors.send.processor import SendMessageProcessor


def send_batch(processor: SendMessageProcessor, path: SendPath, ctx: RemotingConnection,
               request: RemotingCommand, header: SendRequestHeader, queue_id: int,
               sys_flag: int) -> Any:
    """The reply to a batch that passed the send rules (or an awaitable of it)."""
    topic = header.topic
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) or topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
        return create_response(request, ResponseCode.MESSAGE_ILLEGAL,
                               f"batch request does not support retry group {topic}")
    try:
        entries = decode_batch_body(request.body_bytes())
    except BatchBodyError as exc:
        return create_response(request, ResponseCode.MESSAGE_ILLEGAL, str(exc))
    if not entries:
        return create_response(request, ResponseCode.MESSAGE_ILLEGAL, "the batch is empty")
    writer = processor.writer
    born_host = ctx.remote_address
    born_timestamp = max(0, header.born_timestamp)
    reconsume_times = max(0, header.reconsume_times or 0)
    # the request's own properties (the client's WAIT), with CLUSTER: RocketMQ's batch encoder
    # appends their text to every message's, so a later pair wins when the record is read
    outer, refusal = properties_and_refusal(header.properties or "")
    if refusal is not None:
        return illegal_properties(ctx, request, topic, refusal)
    outer[MessageProperty.CLUSTER] = processor.cluster
    messages = []
    try:
        for flag, body, text in entries:
            properties, refusal = properties_and_refusal(text.decode("utf-8", "replace"))
            properties.update(outer)
            if properties.get(MessageProperty.DELAY, "0") not in ("0", ""):
                return create_response(request, ResponseCode.MESSAGE_ILLEGAL,
                                       "a batch may not hold delayed messages")
            if properties.get(MessageProperty.TRAN_MSG) == "true":
                return create_response(request, ResponseCode.MESSAGE_ILLEGAL,
                                       "a batch may not hold transaction messages")
            if any("\x00" in k or "\x00" in v for k, v in properties.items()):
                return illegal_properties(ctx, request, topic, NUL_IN_PROPERTIES)
            if refusal is not None:
                return illegal_properties(ctx, request, topic, refusal)
            message = Message(topic, body, flag=flag, born_timestamp=born_timestamp,
                              born_host=born_host, sys_flag=sys_flag,
                              reconsume_times=reconsume_times)
            message.properties = properties
            messages.append(message)
    except (ValueError, TypeError, OverflowError) as exc:
        return create_response(request, ResponseCode.MESSAGE_ILLEGAL, str(exc))
    memory = processor.memory_store_of(topic)
    result = writer.put_batch(messages, queue_id) if memory is None else memory.put_messages(messages, queue_id)
    if result.status_code != PutMessageStatus.PUT_OK:
        return processor.refused_put(request, result)
    processor.stats.record_put(topic, queue_id, result.stored, result.wrote_bytes)
    offsets = result.queue_offsets
    assert offsets is not None and result.commitlog_offsets is not None and result.sizes is not None
    response = path.stored_reply(request, ",".join(i or "" for i in result.msg_ids), queue_id,
                                 int(offsets[0]))
    if memory is not None or not any(writer.needs_wait(m.properties) for m in messages):
        return response     # a memory topic's put is done once it is in memory
    end = int(result.commitlog_offsets[-1] + result.sizes[-1])
    return processor.reply_when_stored(request, response, end)
