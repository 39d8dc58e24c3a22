# cython: boundscheck=False, wraparound=False
"""A pull's records gathered natively (the common case of RocketMQ's getMessage): the
ConsumeQueue units walked in C, each unit's record checked against its queue in the mapped
CommitLog, and the records copied once into one reply body. No Python object per message.

The walk stops at the first unit it does not handle (a blank unit is skipped as the general
path does): a unit pointing below the CommitLog's first offset, outside a mapped file or its
written part, or at bytes that are not its queue's record. The caller then answers with what
was gathered up to there, or takes its general path (``rocketstore.store.get_message``) when
nothing was.
"""
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.stdint cimport INT64_MAX, int32_t, int64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcmp, memcpy

from rocketstore._native.includes.byteorder cimport rs_get_i32, rs_get_i64
from rocketstore._native.includes.prefetch cimport rs_prefetch256
from rocketstore._native.mapped_file cimport MappedFile
from rocketstore._native.record cimport REC_OK, RecordInfo, check_record_into

#: the walk ended with the units it was given
GATHER_UNITS_END = 0
#: the batch is full (the request's count or the broker's transfer limits)
GATHER_FULL = 1
#: a unit the walk does not handle: the general path from ``consumed`` on
GATHER_OTHER = 2

cdef enum:
    UNIT_SIZE = 20
    BLANK_UNIT = 0x7FFFFFFF
    # the records of one queue lie apart in the CommitLog (other queues' records between
    # them), so the hardware does not foresee them: each unit's record is asked for this
    # many units ahead of its check, its first PREFETCH_BYTES (the fields checked, most of
    # a small record; the copy streams the rest)
    PREFETCH_UNITS = 8
    PREFETCH_BYTES = 512


cdef inline void prefetch_record(MappedFile mf, const char* unit) noexcept:
    """The cache lines of unit's record when it lies in mf (a hint: never faults)."""
    cdef int64_t phy = rs_get_i64(unit)
    cdef int64_t size = rs_get_i32(unit + 8)
    cdef int64_t pos = phy - mf.file_from_offset
    cdef int64_t k
    if pos < 0 or size <= 0 or size > mf.file_size - pos:
        return
    if size > PREFETCH_BYTES:
        size = PREFETCH_BYTES
    k = 0
    while k < size:
        rs_prefetch256(mf.base + pos + k)
        k += 256


cdef inline bint batch_full(int32_t size, int max_msgs, int64_t total, int count,
                            int64_t limit_bytes, int limit_count) noexcept nogil:
    # RocketMQ's isTheBatchFull
    if total == 0 or count == 0:
        return False
    if max_msgs <= count:
        return True
    return total + size > limit_bytes or count > limit_count - 1


def gather_records(const unsigned char[::1] units not None, list files not None,
                   int64_t file_size, int64_t min_phy, int64_t max_phy, int64_t memory,
                   bytes topic not None, int32_t queue_id, int64_t first_offset, int max_msgs,
                   int64_t memory_bytes, int memory_count, int64_t disk_bytes, int disk_count):
    """Walk the units (ConsumeQueue units of ``topic``:``queue_id`` from logical offset
    ``first_offset``, big-endian as stored) gathering each one's record from the CommitLog
    segments ``files`` (a snapshot of the file list, every segment ``file_size`` long) until
    ``max_msgs`` records, the transfer limits (``memory_*`` for a record within ``memory``
    bytes of ``max_phy``, ``disk_*`` further back) or the units end.

    Returns ``(body, count, consumed, last_phy, stop)``: the records joined in queue order,
    how many, how many units were looked at (the next begin offset is first_offset +
    consumed), the CommitLog offset of the last unit looked at, and why the walk stopped
    (GATHER_UNITS_END, GATHER_FULL, GATHER_OTHER)."""
    cdef Py_ssize_t n_units = units.shape[0] // UNIT_SIZE
    return _gather(<const char*>&units[0] if n_units else NULL, n_units, files, file_size,
                   min_phy, max_phy, memory, topic, queue_id, first_offset, max_msgs,
                   memory_bytes, memory_count, disk_bytes, disk_count)


def gather_queue_records(list queue_files not None, int64_t queue_file_size, int64_t max_units,
                         list files not None, int64_t file_size, int64_t min_phy,
                         int64_t max_phy, int64_t memory, bytes topic not None,
                         int32_t queue_id, int64_t first_offset, int max_msgs,
                         int64_t memory_bytes, int memory_count, int64_t disk_bytes,
                         int disk_count):
    """gather_records over the units read in place from the ConsumeQueue's own segments
    ``queue_files`` (each ``queue_file_size`` long): up to ``max_units`` units from logical
    offset ``first_offset`` to its segment's read position, the segment held while they are
    walked. None when that offset is not readable there (no segment where the arithmetic
    puts it, nothing written at it): the caller reads the units its general way."""
    cdef Py_ssize_t n_files = len(queue_files)
    cdef int64_t pos, limit, index, n_units
    cdef MappedFile mf
    if n_files == 0 or first_offset < 0 or first_offset > INT64_MAX // UNIT_SIZE \
            or max_units <= 0 or queue_file_size <= 0:
        return None
    pos = first_offset * UNIT_SIZE
    mf = <MappedFile>queue_files[0]
    if pos < mf.file_from_offset:
        return None
    index = (pos - mf.file_from_offset) // queue_file_size
    if index >= n_files:
        return None
    mf = <MappedFile>queue_files[index]
    if not (mf.file_from_offset <= pos < mf.file_from_offset + mf.file_size):
        return None
    pos -= mf.file_from_offset
    limit = mf.read_limit()
    if limit > mf.file_size:
        limit = mf.file_size
    if pos >= limit:
        return None
    n_units = (limit - pos) // UNIT_SIZE
    if n_units > max_units:
        n_units = max_units
    if n_units <= 0 or not mf.hold():
        return None
    try:
        return _gather(mf.base + pos, n_units, files, file_size, min_phy, max_phy, memory,
                       topic, queue_id, first_offset, max_msgs, memory_bytes, memory_count,
                       disk_bytes, disk_count)
    finally:
        mf.release()


cdef tuple _gather(const char* u, Py_ssize_t n_units, list files, int64_t file_size,
                   int64_t min_phy, int64_t max_phy, int64_t memory, bytes topic,
                   int32_t queue_id, int64_t first_offset, int max_msgs, int64_t memory_bytes,
                   int memory_count, int64_t disk_bytes, int disk_count):
    cdef const char* tp = PyBytes_AS_STRING(topic)
    cdef Py_ssize_t topic_len = len(topic)
    cdef Py_ssize_t n_files = len(files)
    cdef int64_t first_from = (<MappedFile>files[0]).file_from_offset if n_files else 0
    cdef const char** ptrs = NULL
    cdef int32_t* sizes = NULL
    cdef list held = []
    cdef MappedFile mf = None
    cdef MappedFile cur = None
    cdef RecordInfo r
    cdef Py_ssize_t i = 0, index, cap
    cdef int count = 0, stop = GATHER_UNITS_END
    cdef int64_t phy, pos, limit, total = 0, last_phy = 0
    cdef int32_t size
    cdef bint in_disk
    cdef bytes body
    cdef char* out
    if max_msgs <= 0 or n_units == 0 or n_files == 0:
        return b"", 0, 0, 0, GATHER_OTHER if n_files == 0 and n_units else GATHER_UNITS_END
    cap = min(n_units, max_msgs)
    ptrs = <const char**>malloc(cap * sizeof(char*))
    sizes = <int32_t*>malloc(cap * sizeof(int32_t))
    if ptrs == NULL or sizes == NULL:
        free(ptrs)
        free(sizes)
        raise MemoryError()
    try:
        while i < n_units:
            if cur is not None and i + PREFETCH_UNITS < n_units:
                prefetch_record(cur, u + (i + PREFETCH_UNITS) * UNIT_SIZE)
            phy = rs_get_i64(u + i * UNIT_SIZE)
            size = rs_get_i32(u + i * UNIT_SIZE + 8)
            last_phy = phy
            if size == BLANK_UNIT:
                i += 1
                continue
            in_disk = (max_phy - phy) > memory
            if (in_disk and batch_full(size, max_msgs, total, count, disk_bytes, disk_count)) \
                    or (not in_disk and batch_full(size, max_msgs, total, count, memory_bytes,
                                                   memory_count)):
                stop = GATHER_FULL
                break
            if phy < min_phy or size <= 0 or phy < first_from:
                stop = GATHER_OTHER
                break
            index = (phy - first_from) // file_size
            if index >= n_files:
                stop = GATHER_OTHER
                break
            mf = <MappedFile>files[index]
            if mf is not cur:
                if not (mf.file_from_offset <= phy < mf.file_from_offset + mf.file_size) \
                        or not mf.hold():
                    stop = GATHER_OTHER
                    break
                held.append(mf)
                cur = mf
            pos = phy - mf.file_from_offset
            limit = mf.read_limit()
            if pos + size > limit or count >= cap:
                stop = GATHER_OTHER
                break
            if check_record_into(mf.base + pos, limit - pos, False, phy, &r) != REC_OK \
                    or r.size != size or r.queue_id != queue_id \
                    or r.queue_offset != first_offset + i or r.topic_len != topic_len \
                    or memcmp(mf.base + pos + r.topic_offset, tp, topic_len) != 0:
                stop = GATHER_OTHER
                break
            ptrs[count] = mf.base + pos
            sizes[count] = size
            count += 1
            total += size
            i += 1
        body = PyBytes_FromStringAndSize(NULL, total)
        out = PyBytes_AS_STRING(body)
        for index in range(count):
            memcpy(out, ptrs[index], sizes[index])
            out += sizes[index]
        return body, count, i, last_phy, stop
    finally:
        free(ptrs)
        free(sizes)
        for mf in held:
            mf.release()
