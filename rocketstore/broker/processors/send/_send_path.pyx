# cython: language_level=3, boundscheck=False, wraparound=False
"""SEND_MESSAGE 10 / SEND_MESSAGE_V2 310 (and SEND_BATCH_MESSAGE 320's checks): the broker's
send rules, written once in RocketMQ's order, with their common case in one native call.

Every send runs :meth:`SendPath.send`: busy (fast failure), a writeable broker, a legal topic
name, a topic one may send to, its config (created from the default topic when new, through
the processor), a writeable topic, the queue id (a random write queue when negative), the
transaction bits; then a batch to a disk topic is read and put natively when it can be
(``_common_batch``; what it leaves goes to the processor's batch rules), and a message meets the
TRAN_MSG check, a retry topic's redirect to its dead-letter topic (the processor's), the
property checks (no NUL, no \\x01 in a value: the store's records hold neither), the
Message, the delay redirect, the append (a memory topic's to the memory store, which takes no
delayed or transaction message and is not waited for) and the reply. A refusal gets RocketMQ's
response code and remark here. What needs the broker's tables or futures (topic creation, the
retry/DLQ redirect, a batch, a refused put, a SYNC_FLUSH or SYNC_MASTER reply) goes through
the processor's public methods.

The common case (an existing topic, a queue id in range, nothing to redirect) makes no Python
call but the append. When the request pump asks (``call_into``: a JSON request that expects a
reply), a stored send's or batch's reply is made from a template made at start by the generic
encoder, so it is byte for byte what ``create_response`` + ``FrameWriter.add`` would write;
only msgId (a batch's comma-separated), queueId, queueOffset and opaque are filled in. It goes
straight into the connection's frame writer, or, when the reply waits for SYNC_FLUSH's flush or
SYNC_MASTER's slave, becomes the bytes the connection writes once they answer PUT_OK (another
status gets the processor's reply, made only then).
"""
cimport cython
from libc.stdint cimport int32_t, int64_t, uint32_t
from libc.string cimport memcpy
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_Contains, PyDict_GetItem, PyDict_SetItem
from cpython.object cimport PyObject

from rocketstore._native.includes.atomic cimport rs_load_acquire_i64
from rocketstore._native.includes.byteorder cimport rs_put_u32
from rocketstore._native.hosts cimport msg_id_into, msg_id_length
from rocketstore._native.message cimport Message
from rocketstore._native.put_path cimport PutLock, lock_clock_ns
from rocketstore._native.record cimport MESSAGE_SYS_FLAGS, SYSFLAG_MULTI_TAGS, SYSFLAG_TRANSACTION_MASK
from rocketstore._native.record_writer cimport PutMessageResult, PutMessagesResult
from rocketstore.broker._stored_wait cimport StoredWaits
from rocketstore.broker.stats._put_counts cimport PutCounts
from rocketstore.broker.processors.send._send_header cimport (
    WAIT_ABSENT, WAIT_FALSE, WAIT_TRUE, SendRequestHeader, read_properties_text,
    read_send_header, read_send_struct)
from rocketstore.remoting._command cimport RemotingCommand
from rocketstore.remoting._frames cimport DECIMAL_TEXT_MAX, FrameWriter, put_decimal
from rocketstore.remoting._pump cimport DirectHandler

import logging
from random import randrange

from rocketstore._native.batch_put import batch_msg_ids, read_batch_body
from rocketstore._native.hosts import parse_host
from rocketstore._native.message import validate_topic
from rocketstore.broker.processors.send._send_header import (
    SendHeaderError, decode_request_header)
from rocketstore.common.perm import PERM_WRITE as _PERM_WRITE_BIT
from rocketstore.common.properties import MessageConst, MessageProperty
from rocketstore.common.text import quote
from rocketstore.common.topics import DLQ_GROUP_TOPIC_PREFIX as _DLQ_GROUP_TOPIC_PREFIX
from rocketstore.common.topics import RETRY_GROUP_TOPIC_PREFIX as _RETRY_GROUP_TOPIC_PREFIX
from rocketstore.remoting._command import create_response
from rocketstore.remoting._frames import encode_json_header
from rocketstore._native.record_writer import PutMessageStatus
from rocketstore.remoting.codes import ResponseCode

cdef enum:
    _MAX_VALID_TOPICS = 4096    # names remembered as valid (a cache, cleared when full)
    _QUEUE_ID_TEXTS = 256
    _FLAG_RESPONSE = 1
    _MAX_HOST_RAW = 16           # an IPv6 store host

cdef int _SUCCESS = ResponseCode.SUCCESS
cdef int _PUT_OK = PutMessageStatus.PUT_OK
cdef int _SYSTEM_ERROR = ResponseCode.SYSTEM_ERROR
cdef int _SYSTEM_BUSY = ResponseCode.SYSTEM_BUSY
cdef int _MESSAGE_ILLEGAL = ResponseCode.MESSAGE_ILLEGAL
cdef int _NO_PERMISSION = ResponseCode.NO_PERMISSION
cdef int _TOPIC_NOT_EXIST = ResponseCode.TOPIC_NOT_EXIST

cdef long long _PERM_WRITE = _PERM_WRITE_BIT
cdef long long _INT32_MAX = 2147483647
cdef long long _INT32_MIN = -2147483648
cdef str _MULTI_TAG = "MULTI_TAG"     # TopicConfig.topic_filter_type

cdef str _RETRY_PREFIX = _RETRY_GROUP_TOPIC_PREFIX
cdef str _DLQ_PREFIX = _DLQ_GROUP_TOPIC_PREFIX
cdef str _DELAY = MessageProperty.DELAY
cdef str _TRAN_MSG = MessageProperty.TRAN_MSG
cdef str _CLUSTER = MessageProperty.CLUSTER
cdef str _WAIT = MessageProperty.WAIT
cdef str _TRUE = "true"
cdef str _FALSE = "false"
cdef str _NUL = "\x00"
cdef str _NUL_IN_PROPERTIES = "the message properties contain NUL (a torn record to recovery)"
#: MESSAGE_ILLEGAL's remark for a message whose properties hold NUL.
NUL_IN_PROPERTIES = _NUL_IN_PROPERTIES

log = logging.getLogger(__name__)

cdef str _K_MSG_ID = "msgId"
cdef str _K_QUEUE_ID = "queueId"
cdef str _K_QUEUE_OFFSET = "queueOffset"
cdef str _K_REGION = MessageConst.MSG_REGION
cdef str _K_TRACE = MessageConst.TRACE_SWITCH
# stand-ins for the per-send values in the reply template (found where the encoder put them)
cdef str _MARK_MSG_ID = "@msgId@"
cdef str _MARK_QUEUE_ID = "@queueId@"
cdef str _MARK_QUEUE_OFFSET = "@queueOffset@"

#: what :meth:`SendPath.stored_batch_reply` returns when the reply is in the frame writer
WRITTEN = object()


cdef str _separator_remark(str text, Py_ssize_t pair):
    """MESSAGE_ILLEGAL's remark for the pair at ``pair`` whose value holds \\x01 (its name
    cannot: a pair's first \\x01 ends its name, a \\x02 ends the pair). RocketMQ 4.9.8 stores
    such a value; the store's Message refuses it, as it refuses NUL."""
    name = text[pair:text.find("\x01", pair)]
    return (f"the value of property {quote(name, 100)} contains \\x01 "
            "(the properties text's name-value separator)")


cdef str _wait_value(text):
    """The WAIT value of a properties text (read again: a value other than true or false)."""
    return read_properties_text(text).get(_WAIT)


cpdef tuple properties_and_refusal(text):
    """The properties of a text (as parse_properties_text) and, when a value holds \\x01,
    MESSAGE_ILLEGAL's remark (else None), found on the same walk."""
    cdef Py_ssize_t separator_at = -1
    properties = read_properties_text(text, &separator_at)
    if separator_at == -1:
        return properties, None
    return properties, _separator_remark(text, separator_at)


cpdef RemotingCommand illegal_properties(ctx, RemotingCommand request, str topic, str remark):
    """MESSAGE_ILLEGAL for a message whose properties the store cannot write, logged once."""
    log.warning("send to topic %s from %s refused: %s", quote(topic), ctx.remote_address, remark)
    return create_response(request, _MESSAGE_ILLEGAL, remark)


cdef inline bint _writeable(long long perm) noexcept:
    """topic_config.is_writeable, without a Python call."""
    return perm & _PERM_WRITE != 0


cdef dict _reply_fields(str msg_id, str queue_id, str queue_offset, str region, str trace_on):
    """A stored send's reply fields (SendMessageResponseHeader, and the region and trace
    switch RocketMQ adds)."""
    return {_K_MSG_ID: msg_id, _K_QUEUE_ID: queue_id, _K_QUEUE_OFFSET: queue_offset,
            _K_REGION: region, _K_TRACE: trace_on}


cdef inline char* _put_bytes(char* p, bytes text) noexcept:
    cdef Py_ssize_t n = PyBytes_GET_SIZE(text)
    memcpy(p, PyBytes_AS_STRING(text), n)
    return p + n


cdef tuple _reply_template(str region, str trace_on):
    """A common send's reply header cut around its per-send values: (before msgId, before
    queueId, before queueOffset, before opaque, after opaque), each bytes."""
    cdef RemotingCommand probe = create_response(
        RemotingCommand(0), _SUCCESS, None,
        _reply_fields(_MARK_MSG_ID, _MARK_QUEUE_ID, _MARK_QUEUE_OFFSET, region, trace_on))
    probe.flag |= _FLAG_RESPONSE
    cdef bytes header = encode_json_header(probe)
    # The three marks come before the region (the only text not ours), so their first
    # occurrence is theirs; the opaque follows extFields, in which any quote is escaped.
    cdef Py_ssize_t msg_id = header.find(b'"' + _MARK_MSG_ID.encode() + b'"')
    cdef Py_ssize_t queue_id = header.find(b'"' + _MARK_QUEUE_ID.encode() + b'"')
    cdef Py_ssize_t queue_offset = header.find(b'"' + _MARK_QUEUE_OFFSET.encode() + b'"')
    cdef Py_ssize_t opaque = header.rfind(b',"opaque":0,')
    if not 0 < msg_id < queue_id < queue_offset < opaque:
        raise RuntimeError(f"reply template not found in {header!r}")
    opaque += 10
    return (header[:msg_id + 1],
            header[msg_id + 1 + len(_MARK_MSG_ID):queue_id + 1],
            header[queue_id + 1 + len(_MARK_QUEUE_ID):queue_offset + 1],
            header[queue_offset + 1 + len(_MARK_QUEUE_OFFSET):opaque],
            header[opaque + 1:])


@cython.final
cdef class SendPath(DirectHandler):
    """The request handler of SEND_MESSAGE (``v2=False``) or SEND_MESSAGE_V2 (``v2=True``) for
    ``processor`` (a SendMessageProcessor), and the send rules its entry points run."""

    cdef object processor
    cdef bint v2
    cdef bint batch                 # the SEND_BATCH_MESSAGE handler
    cdef bint fast_failure
    cdef bint broker_writeable
    cdef bint reject_transaction
    cdef bint waits
    cdef object topics
    cdef object not_allowed
    cdef object stats
    cdef object record_put
    cdef PutCounts put_counts       # record_put's own object when it is PutCounts.record
    cdef object writer
    cdef StoredWaits stored_waits   # the writer's: what a waiting send waits for
    cdef object append
    cdef object memory_append
    cdef object put_encoded_batch   # the MessageWriter's (a batch read natively)
    cdef object batch_text          # the last batch's properties text, and its outer
    cdef dict batch_outer           # properties with CLUSTER (read_batch_body keeps them as given)
    cdef set memory_topics          # the topic table's memory topic names (a live set)
    cdef object loop_time
    cdef PutLock put_lock
    cdef double send_queue_wait_s
    cdef long long page_cache_busy_ns
    cdef str broker_ip
    cdef str cluster
    cdef str region
    cdef str trace_on
    cdef set valid_topics
    cdef object last_host
    cdef tuple queue_id_texts
    cdef bytes reply_head           # the reply template's pieces (_reply_template)
    cdef bytes reply_after_msg_id
    cdef bytes reply_after_queue_id
    cdef bytes reply_after_queue_offset
    cdef bytes reply_tail
    cdef Py_ssize_t reply_fixed     # their bytes together

    def __init__(self, processor, bint v2, *, topics, not_allowed_topics, append,
                 memory_append=None, bint batch=False):
        """``append(message, queue_id)`` stores a message without waiting for a flush (the
        broker's MessageWriter.put without its delay redirect, which only a message with a
        DELAY property needs); ``memory_append`` the same for memory topics (None: they are
        refused); ``topics.table`` is the live topic name -> TopicConfig dict and
        ``topics.memory_topics`` the live set of memory topic names (read at every send)."""
        self.processor = processor
        self.v2 = v2 or batch
        self.batch = batch
        config = processor.config   # frozen: its values are read once
        self.fast_failure = config.broker_fast_failure_enable
        self.broker_writeable = _writeable(config.broker_permission)
        self.reject_transaction = config.reject_transaction_message
        self.broker_ip = config.broker_ip1
        self.topics = topics
        self.not_allowed = not_allowed_topics
        self.stats = processor.stats
        self.record_put = self.stats.record_put
        owner = getattr(self.record_put, "__self__", None)
        self.put_counts = owner if type(owner) is PutCounts else None
        self.writer = processor.writer
        self.waits = self.writer.waits     # SYNC_FLUSH or SYNC_MASTER
        self.stored_waits = self.writer.stored_waits
        self.append = append
        self.memory_append = memory_append
        self.put_encoded_batch = self.writer.put_encoded_batch
        self.batch_text = None
        self.batch_outer = None
        self.memory_topics = topics.memory_topics
        self.loop_time = processor.loop.time
        self.put_lock = processor.store.put_lock
        self.send_queue_wait_s = config.wait_time_mills_in_send_queue / 1000
        self.page_cache_busy_ns = processor.store.config.os_page_cache_busy_timeout_mills * 1_000_000
        self.cluster = config.broker_cluster_name
        self.region = config.region_id
        self.trace_on = "true" if config.trace_on else "false"
        self.valid_topics = set()
        self.last_host = None
        self.queue_id_texts = tuple(str(i) for i in range(_QUEUE_ID_TEXTS))
        (self.reply_head, self.reply_after_msg_id, self.reply_after_queue_id,
         self.reply_after_queue_offset, self.reply_tail) = _reply_template(self.region, self.trace_on)
        self.reply_fixed = (len(self.reply_head) + len(self.reply_after_msg_id)
                            + len(self.reply_after_queue_id) + len(self.reply_after_queue_offset)
                            + len(self.reply_tail))

    def __call__(self, ctx, RemotingCommand request not None):
        return self._handle(ctx, request, None)

    cdef object call_into(self, object ctx, RemotingCommand request, FrameWriter writer):
        return self._handle(ctx, request, writer)

    cpdef object send(self, ctx, RemotingCommand request, SendRequestHeader header):
        """The reply to a send whose header is read (or an awaitable of it): every rule."""
        return self._send(ctx, request, header, None)

    cpdef RemotingCommand stored_reply(self, RemotingCommand request, str msg_id, long long queue_id,
                                       long long queue_offset):
        """SUCCESS with the fields of a stored send."""
        return create_response(request, _SUCCESS, None, _reply_fields(
            msg_id, self.queue_id_texts[queue_id] if 0 <= queue_id < _QUEUE_ID_TEXTS else str(queue_id),
            str(queue_offset), self.region, self.trace_on))

    cdef object _handle(self, ctx, RemotingCommand request, FrameWriter writer):
        cdef SendRequestHeader header = self.read_header(request)
        if self.batch:
            header.batch = True
        return self._send(ctx, request, header, writer)

    cpdef SendRequestHeader read_header(self, RemotingCommand request):
        """The request's SEND header: from the frame decoder's typed fields when it has them,
        else from the ext fields; a bad field raises HeaderFieldError naming it."""
        fields = request.send_header    # the frame decoder's typed SEND fields, or None
        try:
            if type(fields) is tuple and (request.code == 10 if not self.v2
                                          else request.code == 310 or request.code == 320):
                header = read_send_struct(<tuple>fields, self.v2)
            else:
                ext = request.ext_fields
                if type(ext) is not dict:
                    header = decode_request_header(ext, self.v2)    # raises, naming the argument
                else:
                    header = read_send_header(<dict>ext, self.v2)
        except SendHeaderError:
            # the HeaderFieldError naming the field, as the ext fields have it
            header = decode_request_header(request.ext_fields, self.v2)
        return <SendRequestHeader>header

    cdef object _busy(self, ctx):
        """SYSTEM_BUSY's remark when the broker refuses a send now (fast failure), or None."""
        cdef int64_t held_since
        cdef double waited = self.loop_time() - ctx.received_at
        if waited > self.send_queue_wait_s:
            self.stats.busy_rejections += 1
            return ("[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, period in "
                    f"queue: {waited * 1000:.0f}ms")
        held_since = rs_load_acquire_i64(&self.put_lock.held_since_ns)
        if held_since != 0 and lock_clock_ns() - held_since > self.page_cache_busy_ns:
            self.stats.busy_rejections += 1
            return "[PC_SYNCHRONIZED]broker busy, start flow control for a while"
        return None

    cdef object _send(self, ctx, RemotingCommand request, SendRequestHeader header,
                      FrameWriter writer):
        """The send rules in RocketMQ's order; ``writer`` (not None: the request expects a
        reply) lets a stored send's reply go straight into it, and then self is returned."""
        cdef PyObject* found
        cdef long long queue_id, queue_nums, read_nums, write_nums, reconsume
        cdef int sys_flag
        cdef Message message
        cdef PutMessageResult result
        cdef Py_ssize_t separator_at = -1     # a pair whose value holds \x01 (see below)
        cdef bint wait, prepared, memory
        cdef int64_t offset
        cdef int wait_state = WAIT_ABSENT
        if self.fast_failure:
            busy = self._busy(ctx)
            if busy is not None:
                return create_response(request, _SYSTEM_BUSY, busy)
        if not self.broker_writeable:
            return create_response(request, _NO_PERMISSION,
                                   f"the broker[{self.broker_ip}] sending message is forbidden")
        topic = header.topic
        if topic not in self.valid_topics:
            try:
                validate_topic(topic)
            except (ValueError, TypeError, OverflowError) as exc:
                return create_response(request, _SYSTEM_ERROR, f"the specified topic is illegal: {exc}")
            if len(self.valid_topics) >= _MAX_VALID_TOPICS:
                self.valid_topics.clear()
            self.valid_topics.add(topic)
        if topic in self.not_allowed:
            return create_response(request, _NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden.")
        table = self.topics.table
        found = PyDict_GetItem(<dict>table, topic) if type(table) is dict else NULL
        if found != NULL:
            topic_config = <object>found
        else:
            topic_config = self.processor.topic_config_for_send(header)
            if topic_config is None:
                return create_response(request, _TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!")
        if not _writeable(topic_config.perm):
            return create_response(request, _NO_PERMISSION, f"the topic[{topic}] sending message is forbidden")
        memory = len(self.memory_topics) != 0 and topic in self.memory_topics
        if memory and self.memory_append is None:
            return create_response(request, _NO_PERMISSION,
                                   f"the topic[{topic}] is a memory topic, not served here")
        queue_id = header.queue_id
        read_nums = topic_config.read_queue_nums
        write_nums = topic_config.write_queue_nums
        queue_nums = read_nums if read_nums > write_nums else write_nums    # RocketMQ's msgCheck
        if queue_id >= queue_nums:
            return create_response(request, _SYSTEM_ERROR, f"request queueId[{queue_id}] is illegal, "
                                   f"topic {topic} has {queue_nums} queues")
        if queue_id < 0:
            if write_nums <= 0:
                return create_response(request, _NO_PERMISSION, f"topic[{topic}] has no write queue")
            queue_id = randrange(write_nums)
        if not _INT32_MIN <= header.sys_flag <= _INT32_MAX:
            return create_response(request, _MESSAGE_ILLEGAL,
                                   f"sysFlag {header.sys_flag} is not an int")
        # kept as the client sent it (codec bits 8-10 too), but the host bits the store sets
        sys_flag = <int>(header.sys_flag & MESSAGE_SYS_FLAGS)
        if topic_config.topic_filter_type == _MULTI_TAG:
            sys_flag |= SYSFLAG_MULTI_TAGS
        if sys_flag & SYSFLAG_TRANSACTION_MASK and self.reject_transaction:
            return self._transaction_refused(request)
        if header.batch:
            reply = None if memory else self._common_batch(ctx, request, header, topic,
                                                           queue_id, sys_flag, writer)
            if reply is None:
                reply = self.processor.send_batch(ctx, request, header, queue_id, sys_flag, writer)
            return self if reply is WRITTEN else reply

        # WAIT (whether the reply waits for SYNC_FLUSH's flush or SYNC_MASTER's slave) is read
        # but not kept: RocketMQ's SendMessageProcessor leaves it out of the stored text (the
        # delay redirect alone writes it back, below)
        properties = read_properties_text(header.properties, &separator_at, &wait_state)
        found = PyDict_GetItem(properties, _TRAN_MSG)
        # Boolean.parseBoolean: any case of "true"
        prepared = found != NULL and (<object>found == _TRUE or (<str>found).lower() == _TRUE)
        if prepared and self.reject_transaction:
            return self._transaction_refused(request)
        reconsume = header.reconsume_times
        if (<str>topic).startswith(_RETRY_PREFIX):
            redirected = self.processor.retry_or_dlq(request, topic, reconsume, header.max_reconsume_times)
            if isinstance(redirected, RemotingCommand):
                return redirected
            if redirected is not None:
                topic, queue_id = redirected
        PyDict_SetItem(properties, _CLUSTER, self.cluster)
        text = header.properties
        if text is not None and _NUL in <str>text:
            return illegal_properties(ctx, request, topic, _NUL_IN_PROPERTIES)
        if separator_at != -1:
            return illegal_properties(ctx, request, topic,
                                      _separator_remark(text, separator_at))
        if reconsume < 0:
            reconsume = 0
        body = request.body
        if type(body) is not bytes:
            body = request.body_bytes()
        born_host = ctx.remote_address
        if _INT32_MIN <= header.flag <= _INT32_MAX and reconsume <= _INT32_MAX \
                and self._host_is_valid(born_host):
            # what the constructor would make of them, without its checks (passed above)
            message = Message.__new__(Message)
            message.topic = topic
            message.body = body
            message._props = properties
            message.flag = <int>header.flag
            message.born_timestamp = header.born_timestamp if header.born_timestamp > 0 else 0
            message.born_host = born_host
            message.sys_flag = sys_flag
            message.reconsume_times = <int>reconsume
            message.prepared_transaction_offset = 0
        else:
            try:
                message = Message(topic, body, flag=header.flag,
                                  born_timestamp=header.born_timestamp if header.born_timestamp > 0 else 0,
                                  born_host=born_host, sys_flag=sys_flag, reconsume_times=reconsume)
            except (ValueError, TypeError, OverflowError) as exc:
                return create_response(request, _MESSAGE_ILLEGAL, str(exc))
            # parsed from the text: no separator in a name, no empty name or value, no NUL
            # or \x01 in a value (checked above), so the constructor's per-property checks would find nothing
            message.properties = properties

        if memory:
            found = PyDict_GetItem(properties, _DELAY)
            if prepared or (found != NULL and <object>found not in ("0", "")):
                return create_response(request, _MESSAGE_ILLEGAL, f"the topic[{topic}] is a memory "
                                       "topic: it takes no delayed or transaction messages")
            result = self.memory_append(message, <int>queue_id)
        elif prepared or PyDict_Contains(properties, _DELAY):
            # the half and the delay redirect write the text again from every property, WAIT
            # included, as RocketMQ's parseHalfMessageInner and CommitLog do
            if wait_state != WAIT_ABSENT:
                PyDict_SetItem(properties, _WAIT, _TRUE if wait_state == WAIT_TRUE else (
                    _FALSE if wait_state == WAIT_FALSE else _wait_value(header.properties)))
            if prepared:
                result = self.processor.prepare_message(message, <int>queue_id)    # to the half topic
            else:
                result = self.writer.put_sent(message, <int>queue_id)   # to the schedule topic when due later
        else:
            result = self.append(message, <int>queue_id)
        if result.status_code != 0:
            return self.processor.refused_put(request, result)
        if self.put_counts is not None:
            self.put_counts.record(topic, queue_id, 1, result.wrote_bytes)
        else:
            self.record_put(topic, queue_id, 1, result.wrote_bytes)
        wait = self.waits and wait_state != WAIT_FALSE and not memory
        offset = result.commitlog_offset
        reply = self._stored_answer(request, result, result.store_host_raw, result.store_port,
                                    &offset, 1, queue_id, result.queue_offset,
                                    offset + result.wrote_bytes, writer, wait)
        return self if reply is WRITTEN else reply

    cdef object _transaction_refused(self, RemotingCommand request):
        return create_response(request, _NO_PERMISSION,
                               f"the broker[{self.broker_ip}] sending transaction message is forbidden")

    cdef bint _host_is_valid(self, born_host) except -1:
        """The born host parses (remembered for the last one: a connection sends many)."""
        if born_host is self.last_host:
            return True
        try:
            parse_host(born_host)
        except (ValueError, TypeError):
            return False
        self.last_host = born_host
        return True

    cdef object _reply_frame(self, FrameWriter writer, int opaque, bytes host_raw, int port,
                             const int64_t* offsets, Py_ssize_t count, long long queue_id,
                             long long queue_offset):
        """The SUCCESS reply frame of a stored send (``count`` 1) or batch (its msgIds
        comma-separated) from the template: what create_response + FrameWriter.add make of the
        same values (tests compare them byte for byte). Into ``writer`` when given (returns
        None), else returned as bytes. ``host_raw`` is at most _MAX_HOST_RAW bytes."""
        cdef const unsigned char* host = <const unsigned char*>PyBytes_AS_STRING(host_raw)
        cdef int host_len = <int>PyBytes_GET_SIZE(host_raw)
        cdef Py_ssize_t i, ids_length = count * (msg_id_length(host_len) + 1) - 1
        cdef char queue_id_text[DECIMAL_TEXT_MAX]
        cdef char queue_offset_text[DECIMAL_TEXT_MAX]
        cdef char opaque_text[DECIMAL_TEXT_MAX]
        cdef Py_ssize_t queue_id_length = put_decimal(queue_id_text, queue_id)
        cdef Py_ssize_t queue_offset_length = put_decimal(queue_offset_text, queue_offset)
        cdef Py_ssize_t opaque_length = put_decimal(opaque_text, opaque)
        cdef Py_ssize_t header_length = (self.reply_fixed + ids_length + queue_id_length
                                         + queue_offset_length + opaque_length)
        cdef char* out
        frame = None
        if writer is not None:
            out = writer.reserve(8 + header_length)
        else:
            frame = PyBytes_FromStringAndSize(NULL, 8 + header_length)
            out = PyBytes_AS_STRING(frame)
        rs_put_u32(out, <uint32_t>(4 + header_length))
        rs_put_u32(out + 4, <uint32_t>header_length)    # serialize type 0: JSON
        out = _put_bytes(out + 8, self.reply_head)
        for i in range(count):
            if i:
                out[0] = b','
                out += 1
            out += msg_id_into(host, host_len, port, offsets[i], out)
        out = _put_bytes(out, self.reply_after_msg_id)
        memcpy(out, queue_id_text, queue_id_length)
        out = _put_bytes(out + queue_id_length, self.reply_after_queue_id)
        memcpy(out, queue_offset_text, queue_offset_length)
        out = _put_bytes(out + queue_offset_length, self.reply_after_queue_offset)
        memcpy(out, opaque_text, opaque_length)
        _put_bytes(out + opaque_length, self.reply_tail)
        return frame

    cdef object _common_batch(self, ctx, RemotingCommand request, SendRequestHeader header,
                              str topic, long long queue_id, int sys_flag, FrameWriter writer):
        """A batch to a disk topic read and put natively, and its reply (as send_batch makes
        them); None for what the processor's send_batch decides: a retry or dead-letter
        topic, request properties with \x01 in a value, a body read_batch_body leaves to the
        Message path."""
        cdef Py_ssize_t separator_at = -1
        cdef PutMessagesResult result
        if topic.startswith(_RETRY_PREFIX) or topic.startswith(_DLQ_PREFIX):
            return None
        text = header.properties
        if text is None:
            text = ""
        if self.batch_outer is None or text != self.batch_text:
            outer = read_properties_text(text, &separator_at)
            if separator_at != -1:
                return None
            PyDict_SetItem(outer, _CLUSTER, self.cluster)
            self.batch_text, self.batch_outer = text, outer
        body = request.body
        if type(body) is not bytes:
            body = request.body_bytes()
        batch = read_batch_body(body, self.batch_outer, ctx.remote_address,
                                header.born_timestamp if header.born_timestamp > 0 else 0, sys_flag,
                                header.reconsume_times if header.reconsume_times > 0 else 0)
        if batch is None:
            return None
        result = self.put_encoded_batch(batch, topic, queue_id)
        if result.status_code != 0:
            return self.processor.refused_put(request, result)
        if self.put_counts is not None:
            self.put_counts.record(topic, queue_id, result.stored, result.wrote_bytes)
        else:
            self.record_put(topic, queue_id, result.stored, result.wrote_bytes)
        return self.stored_batch_reply(request, result, queue_id, writer, batch.waits and self.waits)

    cpdef object stored_batch_reply(self, RemotingCommand request, PutMessagesResult result,
                                    long long queue_id, FrameWriter writer, bint wait):
        """The reply to a stored batch (every msgId, comma-separated; the first queue offset):
        WRITTEN when it went into ``writer`` (not None: the pump's, the request expects a
        reply); with ``wait`` (SYNC_FLUSH or SYNC_MASTER) a DeferredReply given once stored."""
        cdef int64_t[::1] offsets = result.commitlog_offsets
        cdef int64_t[::1] queue_offsets = result.queue_offsets
        cdef int32_t[::1] sizes = result.sizes
        cdef Py_ssize_t n = result.stored
        if n <= 0:
            raise ValueError("a stored batch's reply needs a stored message")
        return self._stored_answer(request, result, result.store_host_raw, result.store_port,
                                   &offsets[0], n, queue_id, queue_offsets[0],
                                   offsets[n - 1] + sizes[n - 1], writer, wait)

    cdef object _stored_answer(self, RemotingCommand request, object result, bytes host_raw,
                               int port, const int64_t* offsets, Py_ssize_t count,
                               long long queue_id, long long queue_offset, int64_t end,
                               FrameWriter writer, bint wait):
        """The SUCCESS reply to a stored send (``count`` 1) or batch ending at ``end``: from the
        template for a JSON request into ``writer`` (WRITTEN), or, with ``wait`` (SYNC_FLUSH
        or SYNC_MASTER), its frame given once stored (a DeferredReply); as a RemotingCommand
        otherwise (deferred the same way when waiting)."""
        if writer is not None and request.serialize_type == 0 and host_raw is not None \
                and PyBytes_GET_SIZE(host_raw) <= _MAX_HOST_RAW:
            if not wait:
                self._reply_frame(writer, request.opaque, host_raw, port, offsets, count,
                                  queue_id, queue_offset)
                return WRITTEN
            return self.stored_waits.when_stored(end, _StoredFrame(
                self, request, self._reply_frame(None, request.opaque, host_raw, port, offsets,
                                                 count, queue_id, queue_offset), result, queue_id))
        response = self._fields_reply(request, result, queue_id)
        if wait:
            return self.processor.reply_when_stored(request, response, end)
        return response

    cdef RemotingCommand _fields_reply(self, RemotingCommand request, result, long long queue_id):
        """The SUCCESS reply with a stored send's or batch's fields, as a RemotingCommand."""
        if type(result) is PutMessagesResult:
            return self.stored_reply(request, batch_msg_ids(result), queue_id,
                                     int(result.queue_offsets[0]))
        return self.stored_reply(request, result.msg_id, queue_id, result.queue_offset)


@cython.final
cdef class _StoredFrame:
    """A waiting send's on_done (MessageWriter.when_stored): PUT_OK gives the reply frame made
    from the template at the put; another status the processor's reply for it, with the same
    fields (made only then)."""
    cdef SendPath path
    cdef RemotingCommand request
    cdef bytes frame
    cdef object result
    cdef long long queue_id

    def __cinit__(self, SendPath path, RemotingCommand request, bytes frame, result,
                  long long queue_id):
        self.path = path
        self.request = request
        self.frame = frame
        self.result = result
        self.queue_id = queue_id

    def __call__(self, int status):
        if status == _PUT_OK:
            return self.frame
        return self.path.processor.not_confirmed(
            self.request, self.path._fields_reply(self.request, self.result, self.queue_id), status)
