# cython: language_level=3, boundscheck=False, wraparound=False
"""SEND_MESSAGE 10 / SEND_MESSAGE_V2 310 in their common case in one native call: the header
fields, the broker's checks, the properties, the Message, the append and the reply.

The common case is a send that the broker accepts as it is: not busy, a writeable broker and
an existing writeable topic that is neither a retry topic nor a system one, a queue id in
range, no batch, no delay, no transaction that the broker refuses, no NUL in the properties.
Every other send (and every send this path is unsure of) goes to the Python processor
(``SendMessageProcessor._send``), which answers it with RocketMQ's response codes: the checks
here only decide which of the two paths a send takes, never what a refused send is told.
"""
cimport cython
from libc.stdint cimport int64_t
from cpython.dict cimport PyDict_Contains, PyDict_GetItem, PyDict_SetItem
from cpython.object cimport PyObject
from cpython.unicode cimport PyUnicode_GET_LENGTH

from rocketstore._native.includes.atomic cimport rs_load_acquire_i64
from rocketstore._native.message cimport Message
from rocketstore._native.put_path cimport PutLock, lock_clock_ns
from rocketstore._native.record_writer cimport PutMessageResult
from rocketstore._native.send_header cimport SendRequestHeader
from rocketstore.remoting._command cimport RemotingCommand

from rocketstore._native.hosts import parse_host
from rocketstore._native.message import validate_topic
from rocketstore._native.send_header import SendHeaderError, decode_send_header, parse_properties_text
from rocketstore.remoting._command import create_response

cdef enum:
    _PERM_WRITE = 2
    _CLIENT_SYS_FLAGS = 0xF
    _TRANSACTION_MASK = 0xC
    _SUCCESS = 0
    _MAX_VALID_TOPICS = 4096    # names remembered as valid (a cache, cleared when full)
    _QUEUE_ID_TEXTS = 256

cdef long long _INT32_MAX = 2147483647
cdef long long _INT32_MIN = -2147483648

cdef str _RETRY_PREFIX = "%RETRY%"
cdef str _DELAY = "DELAY"
cdef str _TRAN_MSG = "TRAN_MSG"
cdef str _CLUSTER = "CLUSTER"
cdef str _WAIT = "WAIT"
cdef str _FALSE = "false"
cdef str _NUL = "\x00"
cdef str _K_MSG_ID = "msgId"
cdef str _K_QUEUE_ID = "queueId"
cdef str _K_QUEUE_OFFSET = "queueOffset"
cdef str _K_REGION = "MSG_REGION"
cdef str _K_TRACE = "TRACE_ON"


@cython.final
cdef class SendPath:
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

    def __call__(self, ctx, RemotingCommand request not None):
        ext = request.ext_fields
        if type(ext) is not dict:
            return self._entry(ctx, request)
        try:
            header = decode_send_header(ext, self.v2)
        except SendHeaderError:
            return self._entry(ctx, request)    # raises the HeaderFieldError naming the field
        response = self._common(ctx, request, <SendRequestHeader>header)
        if response is None:
            return self.processor._send(ctx, request, header)
        return response

    cdef object _entry(self, ctx, RemotingCommand request):
        if self.v2:
            return self.processor.send_message_v2(ctx, request)
        return self.processor.send_message(ctx, request)

    cdef object _common(self, ctx, RemotingCommand request, SendRequestHeader header):
        """The reply of a common send (after storing it), or None: not common, the Python
        processor decides."""
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
        properties = parse_properties_text(text)
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
        message.body = request.body_bytes()
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
        self.stats.record_put(topic, 1, result.wrote_bytes)
        ext = {
            _K_MSG_ID: result.msg_id,
            _K_QUEUE_ID: self.queue_id_texts[queue_id] if queue_id < _QUEUE_ID_TEXTS else str(queue_id),
            _K_QUEUE_OFFSET: str(result.queue_offset),
            _K_REGION: self.region,
            _K_TRACE: self.trace_on,
        }
        response = create_response(request, _SUCCESS, None, ext)
        if self.writer.sync_flush:
            found = PyDict_GetItem(properties, _WAIT)
            if found == NULL or <object>found != _FALSE:
                return self.processor.durable_reply(request, response, result)
        return response
