# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Put results: PutMessageStatus, and what one put (PutMessageResult) or a batch
(PutMessagesResult) stored where."""
import enum

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE

from rocketstore._native.hosts cimport msg_id_text
from rocketstore._native.includes.python cimport PyUnicode_DecodeASCII
from rocketstore._native.message cimport Message


class PutMessageStatus(enum.IntEnum):
    """RocketMQ's PutMessageStatus, in its order (the results carry these ordinals)."""

    PUT_OK = 0
    FLUSH_DISK_TIMEOUT = 1
    FLUSH_SLAVE_TIMEOUT = 2
    SLAVE_NOT_AVAILABLE = 3
    SERVICE_NOT_AVAILABLE = 4
    CREATE_MAPPED_FILE_FAILED = 5
    MESSAGE_ILLEGAL = 6
    PROPERTIES_SIZE_EXCEEDED = 7
    OS_PAGE_CACHE_BUSY = 8
    UNKNOWN_ERROR = 9


cdef tuple _PUT_STATUS = tuple(PutMessageStatus)


cdef class PutMessageResult:
    """Outcome of one put: status, where it went, and its ids."""

    @property
    def status(self):
        return _PUT_STATUS[self.status_code]

    @property
    def ok(self):
        return self.status_code == S_PUT_OK

    @property
    def uniq_key(self):
        """The message's UNIQ_KEY (the client message id); None when nothing was stored."""
        if self._uniq_len:
            self._uniq = PyUnicode_DecodeASCII(self._uniq_hex, self._uniq_len, NULL)
            self._uniq_len = 0
        return self._uniq

    @property
    def msg_id(self):
        """offsetMsgId (store host:port + CommitLog offset, hex); None when nothing was stored."""
        if self.status_code != S_PUT_OK or self.store_host_raw is None:
            return None
        return msg_id_text(<const unsigned char*>PyBytes_AS_STRING(self.store_host_raw),
                           PyBytes_GET_SIZE(self.store_host_raw), self.store_port,
                           self.commitlog_offset)

    def __repr__(self):
        return (f"PutMessageResult(status={self.status.name}, msg_id={self.msg_id}, "
                f"commitlog_offset={self.commitlog_offset}, queue_offset={self.queue_offset}, "
                f"wrote_bytes={self.wrote_bytes})")


def put_result(int status_code):
    """A result carrying only a status (a put that stored nothing)."""
    return status_result(status_code)


def with_status(PutMessageResult res not None, int status_code):
    """The same stored message reported with another status (FLUSH_DISK_TIMEOUT ...)."""
    res.status_code = status_code
    return res


def rejected_batch(Py_ssize_t count, int status_code):
    """A batch of count messages of which none was stored."""
    cdef PutMessagesResult res = PutMessagesResult.__new__(PutMessagesResult)
    res.count = count
    res.stored = 0
    res.status_code = status_code
    return res


def fail_batch(PutMessagesResult res not None, int status_code):
    """Mark a batch cut short: res.stored messages went in, the rest get status_code."""
    res.status_code = status_code
    return res


cdef PutMessageResult status_result(int code):
    cdef PutMessageResult r = PutMessageResult.__new__(PutMessageResult)
    r.status_code = code
    r.commitlog_offset = -1
    r.queue_offset = -1
    return r


cdef class PutMessagesResult:
    """Outcome of a batch put: one status and, per message, offsets and ids (a sequence of
    PutMessageResult built on demand; the offsets are also numpy arrays)."""

    @property
    def status(self):
        return _PUT_STATUS[self.status_code]

    @property
    def ok(self):
        return self.status_code == S_PUT_OK

    @property
    def wrote_bytes(self):
        return int(self.sizes[:self.stored].sum()) if self.sizes is not None else 0

    @property
    def msg_ids(self):
        return [self[i].msg_id for i in range(self.stored)]

    def __len__(self):
        return self.count

    def __getitem__(self, Py_ssize_t i):
        cdef PutMessageResult r
        if i < 0:
            i += self.count
        if i < 0 or i >= self.count:
            raise IndexError("batch result index out of range")
        if i >= self.stored:
            return status_result(self.status_code if self.status_code != S_PUT_OK
                                 else S_UNKNOWN_ERROR)
        r = PutMessageResult.__new__(PutMessageResult)
        # stored messages keep PUT_OK unless the batch's status concerns them all (a flush
        # or replication timeout); a batch cut short fails only the unstored rest
        r.status_code = self.status_code if self.stored == self.count else S_PUT_OK
        r.commitlog_offset = self.commitlog_offsets[i]
        r.queue_offset = self.queue_offsets[i]
        r.wrote_bytes = self.sizes[i]
        r.store_timestamp = self.store_timestamp
        r._uniq = (<Message>self.messages[i]).uniq_key if self.messages is not None else None
        r.store_host_raw = self.store_host_raw
        r.store_port = self.store_port
        return r

    def __iter__(self):
        for i in range(self.count):
            yield self[i]

    def __repr__(self):
        return f"PutMessagesResult(status={self.status.name}, count={self.count}, stored={self.stored})"
