# cython: language_level=3, boundscheck=False, wraparound=False
"""SEND_MESSAGE 10 / SEND_MESSAGE_V2 310 in their common case in one native call: the header
fields, the broker's checks, the properties, the Message, the append and the reply.

The common case is a send that the broker accepts as it is: not busy, a writeable broker and
an existing writeable topic that is neither a retry topic nor a system one, a queue id in
range, no batch, no delay, no transaction that the broker refuses, no NUL in the properties.
Every other send (and every send this path is unsure of) goes to the Python processor
(``SendMessageProcessor._send``), which answers it with RocketMQ's response codes: the checks
here only decide which of the two paths a send takes, never what a refused send is told.

When the request pump asks (``call_into``, a JSON request that expects a reply, ASYNC_FLUSH or
WAIT=false), a stored common send's reply is written straight into the connection's frame
writer from a template made at start by the generic encoder, so it is byte for byte what
``create_response`` + ``FrameWriter.add`` would write; only msgId, queueId, queueOffset and
opaque are filled in per send.
"""
cimport cython
from libc.stdint cimport int64_t, uint32_t
from libc.string cimport memcpy
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_Contains, PyDict_GetItem, PyDict_SetItem
from cpython.object cimport PyObject
from cpython.unicode cimport PyUnicode_GET_LENGTH

from rocketstore._native.includes.atomic cimport rs_load_acquire_i64
from rocketstore._native.message cimport Message
from rocketstore._native.put_path cimport PutLock, lock_clock_ns
from rocketstore._native.record_writer cimport PutMessageResult
from rocketstore._native.send_header cimport (
    SendRequestHeader, read_properties_text, read_send_header, read_send_struct)
from rocketstore._native.includes.byteorder cimport rs_put_u32
from rocketstore._native.hosts cimport MSG_ID_TEXT, msg_id_into
from rocketstore.remoting._command cimport RemotingCommand
from rocketstore.remoting._frames cimport DECIMAL_TEXT_MAX, FrameWriter, put_decimal
from rocketstore.remoting._pump cimport DirectHandler

from rocketstore._native.hosts import parse_host
from rocketstore._native.message import validate_topic
from rocketstore._native.send_header import SendHeaderError
from rocketstore.remoting._command import create_response
from rocketstore.remoting._frames import encode_json_header
from rocketstore.common import properties as _properties, topics as _topics

cdef enum:
    _PERM_WRITE = 2
    _CLIENT_SYS_FLAGS = 0xF
    _TRANSACTION_MASK = 0xC
    _SUCCESS = 0
    _MAX_VALID_TOPICS = 4096    # names remembered as valid (a cache, cleared when full)
    _QUEUE_ID_TEXTS = 256
    _FLAG_RESPONSE = 1
    _MAX_HOST_RAW = 16           # an IPv6 store host

cdef long long _INT32_MAX = 2147483647
cdef long long _INT32_MIN = -2147483648

cdef str _RETRY_PREFIX = _topics.RETRY_GROUP_TOPIC_PREFIX
cdef str _DELAY = _properties.MessageProperty.DELAY
cdef str _TRAN_MSG = _properties.MessageProperty.TRAN_MSG
cdef str _CLUSTER = _properties.MessageProperty.CLUSTER
cdef str _WAIT = _properties.MessageProperty.WAIT
cdef str _FALSE = "false"
cdef str _NUL = "\x00"
cdef str _K_MSG_ID = "msgId"
cdef str _K_QUEUE_ID = "queueId"
cdef str _K_QUEUE_OFFSET = "queueOffset"
cdef str _K_REGION = _properties.MessageConst.MSG_REGION
cdef str _K_TRACE = _properties.MessageConst.TRACE_SWITCH
# stand-ins for the per-send values in the reply template (found where the encoder put them)
cdef str _MARK_MSG_ID = "@msgId@"
cdef str _MARK_QUEUE_ID = "@queueId@"
cdef str _MARK_QUEUE_OFFSET = "@queueOffset@"


cdef inline char* _put_bytes(char* p, bytes text) noexcept:
    cdef Py_ssize_t n = PyBytes_GET_SIZE(text)
    memcpy(p, PyBytes_AS_STRING(text), n)
    return p + n


cdef tuple _reply_template(str region, str trace_on):
    """A common send's reply header cut around its per-send values: (before msgId, before
    queueId, before queueOffset, before opaque, after opaque), each bytes."""
    cdef RemotingCommand probe = create_response(
        RemotingCommand(0), _SUCCESS, None,
        {_K_MSG_ID: _MARK_MSG_ID, _K_QUEUE_ID: _MARK_QUEUE_ID, _K_QUEUE_OFFSET: _MARK_QUEUE_OFFSET,
         _K_REGION: region, _K_TRACE: trace_on})
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
    """The request handler of SEND_MESSAGE (``v2=False``) or SEND_MESSAGE_V2 (``v2=True``)
    for ``processor`` (a SendMessageProcessor), which serves every send but the common one."""

    cdef object processor
    cdef bint v2
    cdef object config
    cdef bint fast_failure
    cdef bint broker_writeable
    cdef bint reject_transaction
    cdef object topics
    cdef object not_allowed
    cdef object stats
    cdef object record_put
    cdef object writer
    cdef object append
    cdef object loop_time
    cdef PutLock put_lock
    cdef double send_queue_wait_s
    cdef long long page_cache_busy_ns
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

    def __init__(self, processor, bint v2, *, topics, not_allowed_topics, append):
        """``append(message, queue_id)`` stores a message without waiting for a flush (the
        broker's MessageWriter.put without its delay redirect, which this path never needs);
        ``topics.table`` is the live topic name -> TopicConfig dict (read at every send)."""
        self.processor = processor
        self.v2 = v2
        self.config = processor.config   # frozen: its values are read once
        self.fast_failure = self.config.broker_fast_failure_enable
        self.broker_writeable = self.config.broker_permission & _PERM_WRITE
        self.reject_transaction = self.config.reject_transaction_message
        self.topics = topics
        self.not_allowed = not_allowed_topics
        self.stats = processor.stats
        self.record_put = self.stats.record_put
        self.writer = processor.writer
        self.append = append
        self.loop_time = processor.loop.time
        self.put_lock = processor.store.commit_log.put_lock
        self.send_queue_wait_s = self.config.wait_time_mills_in_send_queue / 1000
        self.page_cache_busy_ns = processor.store.config.os_page_cache_busy_timeout_mills * 1_000_000
        self.cluster = self.config.broker_cluster_name
        self.region = self.config.region_id
        self.trace_on = "true" if self.config.trace_on else "false"
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

    cdef object _handle(self, ctx, RemotingCommand request, FrameWriter writer):
        fields = request.send_header    # the frame decoder's typed SEND fields, or None
        try:
            if type(fields) is tuple and request.code == (310 if self.v2 else 10):
                header = read_send_struct(<tuple>fields, self.v2)
            else:
                ext = request.ext_fields
                if type(ext) is not dict:
                    return self._entry(ctx, request)
                header = read_send_header(<dict>ext, self.v2)
        except SendHeaderError:
            return self._entry(ctx, request)    # raises the HeaderFieldError naming the field
        response = self._common(ctx, request, <SendRequestHeader>header, writer)
        if response is None:
            return self.processor._send(ctx, request, header)
        return response

    cdef object _entry(self, ctx, RemotingCommand request):
        if self.v2:
            return self.processor.send_message_v2(ctx, request)
        return self.processor.send_message(ctx, request)

    cdef object _common(self, ctx, RemotingCommand request, SendRequestHeader header,
                        FrameWriter writer):
        """The reply of a common send (after storing it), or None: not common, the Python
        processor decides; or self when the reply went into ``writer`` (not None: the
        request expects a reply)."""
        cdef PyObject* found
        cdef long long queue_id, queue_nums, read_nums, write_nums, reconsume
        cdef int sys_flag
        cdef Message message
        cdef PutMessageResult result
        cdef int64_t held_since
        if header.batch or not self.broker_writeable:
            return None
        if self.fast_failure:
            if self.loop_time() - ctx.received_at > self.send_queue_wait_s:
                return None
            held_since = rs_load_acquire_i64(&self.put_lock.held_since_ns)
            if held_since != 0 and lock_clock_ns() - held_since > self.page_cache_busy_ns:
                return None
        topic = header.topic
        if topic not in self.valid_topics:
            try:
                validate_topic(topic)
            except (ValueError, TypeError, OverflowError):
                return None
            if len(self.valid_topics) >= _MAX_VALID_TOPICS:
                self.valid_topics.clear()
            self.valid_topics.add(topic)
        if topic in self.not_allowed or (<str>topic).startswith(_RETRY_PREFIX):
            return None
        table = self.topics.table
        if type(table) is not dict:
            return None
        found = PyDict_GetItem(<dict>table, topic)
        if found == NULL:
            return None
        topic_config = <object>found
        if not (<long long>topic_config.perm) & _PERM_WRITE:
            return None
        queue_id = header.queue_id
        read_nums = topic_config.read_queue_nums
        write_nums = topic_config.write_queue_nums
        queue_nums = read_nums if read_nums > write_nums else write_nums
        if queue_id < 0 or queue_id >= queue_nums:
            return None
        sys_flag = <int>(header.sys_flag & _CLIENT_SYS_FLAGS)
        if sys_flag & _TRANSACTION_MASK and self.reject_transaction:
            return None
        text = header.properties
        if text is not None and _NUL in <str>text:
            return None
        properties = read_properties_text(text)
        if PyDict_Contains(properties, _DELAY) or PyDict_Contains(properties, _TRAN_MSG):
            return None
        if header.flag < _INT32_MIN or header.flag > _INT32_MAX:
            return None
        reconsume = header.reconsume_times
        if reconsume < 0:
            reconsume = 0
        elif reconsume > _INT32_MAX:
            return None
        born_host = ctx.remote_address
        if born_host is not self.last_host:
            try:
                parse_host(born_host)
            except (ValueError, TypeError):
                return None
            self.last_host = born_host
        PyDict_SetItem(properties, _CLUSTER, self.cluster)

        message = Message.__new__(Message)
        message.topic = topic
        body = request.body
        message.body = body if type(body) is bytes else request.body_bytes()
        message._props = properties
        message.flag = <int>header.flag
        message.born_timestamp = header.born_timestamp if header.born_timestamp > 0 else 0
        message.born_host = born_host
        message.sys_flag = sys_flag
        message.reconsume_times = <int>reconsume
        message.prepared_transaction_offset = 0

        result = self.append(message, <int>queue_id)
        if result.status_code != 0:
            return self.processor.refused_put(request, result)
        self.record_put(topic, 1, result.wrote_bytes)
        if writer is not None and request.serialize_type == 0 and result.store_host_raw is not None \
                and PyBytes_GET_SIZE(result.store_host_raw) <= _MAX_HOST_RAW:
            if not self.writer.sync_flush or _wait_is_false(properties):
                self._write_reply(writer, request.opaque, result, queue_id)
                return self
        ext = {
            _K_MSG_ID: result.msg_id,
            _K_QUEUE_ID: self.queue_id_texts[queue_id] if queue_id < _QUEUE_ID_TEXTS else str(queue_id),
            _K_QUEUE_OFFSET: str(result.queue_offset),
            _K_REGION: self.region,
            _K_TRACE: self.trace_on,
        }
        response = create_response(request, _SUCCESS, None, ext)
        if self.writer.sync_flush and not _wait_is_false(properties):
            return self.processor.durable_reply(request, response, result)
        return response

    cdef int _write_reply(self, FrameWriter writer, int opaque, PutMessageResult result,
                          long long queue_id) except -1:
        """The reply frame from the template: what create_response + FrameWriter.add make of
        the same values (tests compare them byte for byte)."""
        cdef char msg_id[MSG_ID_TEXT]
        cdef char queue_id_text[DECIMAL_TEXT_MAX]
        cdef char queue_offset_text[DECIMAL_TEXT_MAX]
        cdef char opaque_text[DECIMAL_TEXT_MAX]
        cdef Py_ssize_t msg_id_length = msg_id_into(
            <const unsigned char*>PyBytes_AS_STRING(result.store_host_raw),
            <int>PyBytes_GET_SIZE(result.store_host_raw), result.store_port,
            result.commitlog_offset, msg_id)
        cdef Py_ssize_t queue_id_length = put_decimal(queue_id_text, queue_id)
        cdef Py_ssize_t queue_offset_length = put_decimal(queue_offset_text, result.queue_offset)
        cdef Py_ssize_t opaque_length = put_decimal(opaque_text, opaque)
        cdef Py_ssize_t header_length = (self.reply_fixed + msg_id_length + queue_id_length
                                         + queue_offset_length + opaque_length)
        cdef char* out
        out = writer.reserve(8 + header_length)
        rs_put_u32(out, <uint32_t>(4 + header_length))
        rs_put_u32(out + 4, <uint32_t>header_length)    # serialize type 0: JSON
        out = _put_bytes(out + 8, self.reply_head)
        memcpy(out, msg_id, msg_id_length)
        out = _put_bytes(out + msg_id_length, self.reply_after_msg_id)
        memcpy(out, queue_id_text, queue_id_length)
        out = _put_bytes(out + queue_id_length, self.reply_after_queue_id)
        memcpy(out, queue_offset_text, queue_offset_length)
        out = _put_bytes(out + queue_offset_length, self.reply_after_queue_offset)
        memcpy(out, opaque_text, opaque_length)
        _put_bytes(out + opaque_length, self.reply_tail)
        return 0


cdef inline bint _wait_is_false(dict properties):
    """The producer said WAIT=false: it does not wait for the flush (SYNC_FLUSH)."""
    cdef PyObject* found = PyDict_GetItem(properties, _WAIT)
    return found != NULL and <object>found == _FALSE
