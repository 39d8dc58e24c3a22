"""SEND_BATCH_MESSAGE 320 after the send rules: a batch's own rules (not to a retry or
dead-letter topic, not empty, no delayed or transaction message, no NUL in a property nor
\\x01 in a property value), its messages put together, and the reply (every msgId,
comma-separated; the first queue offset).

The common batch is read and put natively before it gets here (SendPath._common_batch, with
rocketstore._native.batch_put: no Message per message); what it leaves, the unusual or refused,
and memory topics' batches, go through a Message per message here, whose checks and refusals
are the reference (tests/broker/test_batch_native.py compares them)."""

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
from rocketstore.message import Message, MessageProperty, PutMessagesResult, PutMessageStatus
from rocketstore.remoting import RemotingCommand, RemotingConnection, ResponseCode, create_response

if TYPE_CHECKING:
    from rocketstore.broker.processors.send.processor import SendMessageProcessor
    from rocketstore.remoting import FrameWriter


def send_batch(processor: SendMessageProcessor, path: SendPath, ctx: RemotingConnection,
               request: RemotingCommand, header: SendRequestHeader, queue_id: int,
               sys_flag: int, writer: FrameWriter | None = None) -> Any:
    """The reply to a batch that passed the send rules (or an awaitable of it; WRITTEN when
    it went into ``writer``, the request pump's)."""
    topic = header.topic
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) or topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
        return create_response(request, ResponseCode.MESSAGE_ILLEGAL,
                               f"batch request does not support retry group {topic}")
    store_writer = processor.writer
    body = request.body_bytes()
    born_host = ctx.remote_address
    born_timestamp = max(0, header.born_timestamp)
    reconsume_times = max(0, header.reconsume_times or 0)
    # the request's own properties (the client's WAIT), with CLUSTER: RocketMQ's batch encoder
    # appends their text to every message's, so a later pair wins when the record is read
    outer, outer_refusal = properties_and_refusal(header.properties or "")
    outer[MessageProperty.CLUSTER] = processor.cluster
    memory = processor.memory_store_of(topic)
    try:
        entries = decode_batch_body(body)
    except BatchBodyError as exc:
        return create_response(request, ResponseCode.MESSAGE_ILLEGAL, str(exc))
    if not entries:
        return create_response(request, ResponseCode.MESSAGE_ILLEGAL, "the batch is empty")
    if outer_refusal is not None:
        return illegal_properties(ctx, request, topic, outer_refusal)
    messages = []
    try:
        for flag, message_body, text in entries:
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
            message = Message(topic, message_body, flag=flag, born_timestamp=born_timestamp,
                              born_host=born_host, sys_flag=sys_flag,
                              reconsume_times=reconsume_times)
            message.properties = properties
            messages.append(message)
    except (ValueError, TypeError, OverflowError) as exc:
        return create_response(request, ResponseCode.MESSAGE_ILLEGAL, str(exc))
    result = store_writer.put_batch(messages, queue_id) if memory is None \
        else memory.put_messages(messages, queue_id)
    if result.status_code != PutMessageStatus.PUT_OK:
        return processor.refused_put(request, result)
    # a memory topic's put is done once it is in memory
    return _stored(processor, path, request, topic, queue_id, result,
                   memory is None and any(store_writer.needs_wait(m.properties) for m in messages),
                   writer)


def _stored(processor: SendMessageProcessor, path: SendPath, request: RemotingCommand, topic: str,
            queue_id: int, result: PutMessagesResult, waits: bool,
            writer: FrameWriter | None) -> Any:
    """The reply to a stored batch (SendPath.stored_batch_reply); with SYNC_FLUSH or
    SYNC_MASTER once stored, unless every message said WAIT=false (``waits`` False)."""
    processor.stats.record_put(topic, queue_id, result.stored, result.wrote_bytes)
    return path.stored_batch_reply(request, result, queue_id, writer,
                                   waits and processor.writer.waits)
