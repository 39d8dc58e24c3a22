# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False
"""Columnar decode: CommitLog records -> one pyarrow.RecordBatch, with no Python object per
message.

One pass over the records, without the GIL (columnar_decode.pyx): each record is validated
(``record.check_record_into``, inlined), its properties tokenized once, and every column
appended to at once. Each column is its own buffer that grows on demand (``mremap`` for the
large ones: the pages already written move, nothing is copied); instead of a check per
column and record, a budget of headroom guaranteed in every buffer is spent by a per-record
bound (``_bound``) and refilled when it runs out. The Arrow arrays are assembled here from
the filled part of each buffer (``pa.foreign_buffer``, zero-copy). The buffers are recycled
when the batch dies (columnar_buffers.pyx, ``set_buffer_cache``): fresh pages cost the
kernel a zeroing pass, which was half the decode time before. ASCII properties without a
repeated name (the common case) go straight from a 64-byte separator scan into the name and
value columns; any other properties through a pair table, tokenized 8 bytes at a time with
UTF-8 validation. Host text is formatted once per run of equal hosts; the next records, and
the output streams' next lines, are prefetched.

Column semantics (``SCHEMA``, the Spark schema of issue 5):

- ``topic``: the TOPIC bytes as UTF-8; invalid bytes become U+FFFD (see below). Never null.
- ``queue_id`` ... ``reconsume_times``: the record's header fields as stored.
  ``commitlog_offset`` = ``base_offset + position`` (checked equal to the record's
  PHYSICALOFFSET field); with ``base_offset=None`` the PHYSICALOFFSET field itself.
- ``born_timestamp``/``store_timestamp``: ms since the epoch as ``timestamp[ms]`` (no time zone).
  With ``spark=True``: ``timestamp[us, tz=UTC]``, the type PySpark's data source reader demands
  for a Spark TimestampType (``to_arrow_schema(..., timezone="UTC")``).
- ``born_host``/``store_host``: ``a.b.c.d:port`` or ``[v6]:port`` with the address in RFC 5952
  text (lower-case hex, longest run of >= 2 zero groups as ``::``, the first on a tie, and
  IPv4-mapped addresses as ``::ffff:a.b.c.d``, as Python >= 3.13's ``ipaddress`` does). The port
  is the stored int32, printed signed.
- ``msg_id``: offsetMsgId, store address + port + commitlog_offset, upper-case hex.
- ``properties``: as RocketMQ's ``MessageDecoder.string2messageProperties`` builds its HashMap:
  pairs split on \\x02, name/value on the first \\x01 (the value keeps any later \\x01); pairs
  with no \\x01, an empty name or an empty value are dropped; a name seen again replaces the
  earlier value (last wins) and keeps the earlier pair's place. So the map has unique keys, in
  first-seen order, and equals ``MessageExt.properties`` item for item; Spark's default
  ``mapKeyDedupPolicy=EXCEPTION`` never sees a duplicate key.
- ``tags``: the TAGS value of that map; null when there is none.
- ``keys``: the KEYS value of that map split on ' ' with empty tokens dropped; an EMPTY LIST
  (never null) when there is no KEYS property, so ``size(keys)``/``array_contains`` need no
  null handling.
- ``body``: the stored body bytes (compressed bodies, sysFlag 0x1, are left compressed), as
  ``binary`` (copied). With ``body_view=True`` (not with ``spark=True``): ``binary_view``
  whose values longer than 12 bytes point into the decoded source itself (no copy; the batch
  holds a MappedFile source as ``MappedFile.view`` does). Same values, other layout.

Invalid UTF-8 (topic, property names and values): each maximal invalid subpart is replaced by
one U+FFFD (Unicode's recommended practice: what Python's ``bytes.decode("utf-8", "replace")``
gives, and Java's decoder follows it too), so every string column is valid UTF-8 and
``validate(full=True)`` passes.

Size limit: string/binary columns have 32-bit offsets, so no column may hold more than
``MAX_BATCH_BYTES`` (2**31 - 1) bytes of data (``max_batch_bytes`` lowers that). The sizes are
checked before taking each record (exactly, except KEYS: by a bound from its length) once the
per-record bounds say the limit could be reached: ``decode_region`` stops before the record
that would overflow a column and reports ``stop_status == "limit"``; the caller continues
from ``next_position``. A batch always takes at least its first record. ``decode_positions``
raises ``BatchTooLargeError`` (its ``fits`` attribute says how many leading positions fit) so
the caller can split the positions.
"""
cimport cython
from libc.stdint cimport int32_t, int64_t

cimport numpy as cnp

from rocketstore._native.columnar_buffers cimport (
    B_BODY, B_BODY_OFF, B_BORN, B_BORN_OFF, B_BORN_TS, B_COMMITLOG_OFFSET, B_COUNT, B_FLAG,
    B_KEYS, B_KEYS_LIST_OFF, B_KEYS_OFF, B_MSG_ID, B_MSG_ID_OFF, B_NAMES, B_NAMES_OFF,
    B_PROPS_OFF, B_QUEUE_ID, B_QUEUE_OFFSET, B_RECONSUME, B_STORE, B_STORE_OFF, B_STORE_SIZE,
    B_STORE_TS, B_SYS_FLAG, B_TAGS, B_TAGS_OFF, B_TAGS_VALID, B_TOPIC, B_TOPIC_OFF,
    B_VALUES, B_VALUES_OFF, SLACK, acquire, arrow_buffer, row_width,
)
from rocketstore._native.columnar_decode cimport (
    HEADROOM_MAX, MAX_BYTES, Ctx, Totals, ctx_free, ctx_init, walk_positions, walk_region,
)
from rocketstore._native.mapped_file cimport MappedFile
from rocketstore._native.read_source cimport ReadSource
from rocketstore._native.record cimport REC_CORRUPT, REC_OK, status_text

import numpy as np
import pyarrow as pa

from rocketstore._native.record import STATUS_NAMES as _STATUS_NAMES
from rocketstore._native.record import CorruptRecordError

cnp.import_array()

MAX_BATCH_BYTES = MAX_BYTES

# ---- schema ----------------------------------------------------------------------------------


def schema(bint include_body=True, *, bint spark=False, bint body_view=False):
    """The Arrow schema of the batches: ``SCHEMA``, without ``body`` when include_body is
    False; with ``spark=True`` the timestamps are ``timestamp[us, tz=UTC]``; with
    ``body_view=True`` the body is ``binary_view`` (zero-copy views, see decode_region)."""
    if spark and body_view:
        raise ValueError("body_view=True is not for spark=True (Spark reads binary)")
    ts = pa.timestamp("us", tz="UTC") if spark else pa.timestamp("ms")
    fields = [
        pa.field("topic", pa.string(), nullable=False),
        pa.field("queue_id", pa.int32()),
        pa.field("queue_offset", pa.int64()),
        pa.field("commitlog_offset", pa.int64()),
        pa.field("store_size", pa.int32()),
        pa.field("sys_flag", pa.int32()),
        pa.field("flag", pa.int32()),
        pa.field("born_timestamp", ts),
        pa.field("store_timestamp", ts),
        pa.field("born_host", pa.string()),
        pa.field("store_host", pa.string()),
        pa.field("reconsume_times", pa.int32()),
        pa.field("msg_id", pa.string()),
        pa.field("tags", pa.string()),
        pa.field("keys", pa.list_(pa.string())),
        pa.field("properties", pa.map_(pa.string(), pa.string())),
    ]
    if include_body:
        fields.append(pa.field("body", pa.binary_view() if body_view else pa.binary()))
    return pa.schema(fields)


SCHEMA = schema(True)
_SCHEMAS = {(b, s, v): schema(b, spark=s, body_view=v)
            for b in (True, False) for s in (True, False) for v in (True, False)
            if not (s and v)}


class BatchTooLargeError(ValueError):
    """decode_positions: the records would put more than max_batch_bytes in one column;
    ``fits`` leading positions would fit."""

    def __init__(self, message, fits):
        super().__init__(message)
        self.fits = fits


class RegionResult(tuple):
    """(batch, next_position, stop_status) of decode_region, plus ``reason`` (why a corrupt
    record is corrupt, else None). Unpacks as a 3-tuple."""

    def __new__(cls, batch, next_position, stop_status, reason=None):
        self = tuple.__new__(cls, (batch, next_position, stop_status))
        self.reason = reason
        return self

    @property
    def batch(self):
        return self[0]

    @property
    def next_position(self):
        return self[1]

    @property
    def stop_status(self):
        return self[2]

    def __repr__(self):
        return (f"RegionResult({self[0].num_rows} rows, next_position={self[1]}, "
                f"stop_status={self[2]!r}, reason={self.reason!r})")


cdef object _string_array(object typ, int64_t n, object offs, object data, object valid=None,
                          int64_t nulls=0):
    return pa.Array.from_buffers(typ, n, [valid, offs, data], null_count=nulls)


cdef object _fixed(object typ, int64_t n, object arr):
    return pa.Array.from_buffers(typ, n, [None, arr], null_count=0)


# ---- Arrow assembly --------------------------------------------------------------------------


# How big the last batches' buffers were, to size the next ones (GIL-protected; only the
# capacities depend on them, never the content): bytes per row of each data and item buffer,
# and rows per byte of CommitLog.
cdef double _per_row[B_COUNT]
cdef double _rows_per_byte = 1.0 / 200


cdef void _init_hints() noexcept:
    cdef int i
    for i in range(B_COUNT):
        _per_row[i] = 0 if row_width(i) else 32
    _per_row[B_BODY] = 256

_init_hints()


cdef int _ctx_buffers(Ctx* c, int64_t rows) except -1:
    """The output buffers, sized for about rows records like the last batch's (they grow)."""
    cdef size_t want
    cdef int i
    if rows < 63:
        rows = 63
    for i in range(B_COUNT):
        if ((i == B_BODY or i == B_BODY_OFF) and not c.include_body) or (
                i == B_BODY and c.body_view):
            continue
        if c.row_width[i]:
            want = (rows + 1) * c.row_width[i]
        else:
            want = <size_t>(_per_row[i] * 1.125 * rows)
            if rows >= 1024:        # room for the refreshes' headroom (_refresh)
                want += HEADROOM_MAX
        acquire(&c.b[i], want + SLACK, i)
    c.row_cap = rows
    return 0


cdef object _build_batch(Ctx* c, object source):
    """The RecordBatch of the rows taken; hands the buffers to Arrow. source: a pa.Buffer
    over the decoded bytes, the data of the body views (None without them)."""
    cdef int64_t n = c.rows
    cdef Totals f = c.fill
    cdef int64_t size[B_COUNT]
    cdef int i
    for i in range(B_COUNT):
        size[i] = c.row_width[i] * n
    for i in (B_TOPIC_OFF, B_BORN_OFF, B_STORE_OFF, B_MSG_ID_OFF, B_TAGS_OFF, B_KEYS_LIST_OFF,
              B_PROPS_OFF, B_BODY_OFF):
        if c.b[i].ptr != NULL and not (i == B_BODY_OFF and c.body_view):
            size[i] = 4 * (n + 1)
            (<int32_t*>c.b[i].ptr)[0] = 0
    size[B_TAGS_VALID] = (n + 7) // 8
    size[B_TOPIC] = f.topic
    size[B_BORN] = f.born
    size[B_STORE] = f.store
    size[B_MSG_ID] = f.msg_id
    size[B_TAGS] = f.tags
    size[B_KEYS_OFF] = 4 * (f.key_tokens + 1)
    size[B_KEYS] = f.keys
    size[B_NAMES_OFF] = size[B_VALUES_OFF] = 4 * (f.pairs + 1)
    size[B_NAMES] = f.names
    size[B_VALUES] = f.values
    size[B_BODY] = f.body
    if n > 0:
        for i in range(B_COUNT):
            if not row_width(i) and c.b[i].ptr != NULL:
                _per_row[i] = <double>size[i] / n
    (<int32_t*>c.b[B_KEYS_OFF].ptr)[0] = 0
    (<int32_t*>c.b[B_NAMES_OFF].ptr)[0] = 0
    (<int32_t*>c.b[B_VALUES_OFF].ptr)[0] = 0
    b = [None if c.b[i].ptr == NULL else arrow_buffer(&c.b[i], size[i])
         for i in range(B_COUNT)]
    sch = _SCHEMAS[(bool(c.include_body), bool(c.ts_us), bool(c.body_view))]
    s = pa.string()
    ts = sch.field("born_timestamp").type
    props_type = sch.field("properties").type
    i32 = pa.int32()
    i64 = pa.int64()
    entries = pa.StructArray.from_arrays(
        [_string_array(s, f.pairs, b[B_NAMES_OFF], b[B_NAMES]),
         _string_array(s, f.pairs, b[B_VALUES_OFF], b[B_VALUES])],
        fields=[props_type.key_field, props_type.item_field])
    columns = [
        _string_array(s, n, b[B_TOPIC_OFF], b[B_TOPIC]),
        _fixed(i32, n, b[B_QUEUE_ID]),
        _fixed(i64, n, b[B_QUEUE_OFFSET]),
        _fixed(i64, n, b[B_COMMITLOG_OFFSET]),
        _fixed(i32, n, b[B_STORE_SIZE]),
        _fixed(i32, n, b[B_SYS_FLAG]),
        _fixed(i32, n, b[B_FLAG]),
        _fixed(ts, n, b[B_BORN_TS]),
        _fixed(ts, n, b[B_STORE_TS]),
        _string_array(s, n, b[B_BORN_OFF], b[B_BORN]),
        _string_array(s, n, b[B_STORE_OFF], b[B_STORE]),
        _fixed(i32, n, b[B_RECONSUME]),
        _string_array(s, n, b[B_MSG_ID_OFF], b[B_MSG_ID]),
        _string_array(s, n, b[B_TAGS_OFF], b[B_TAGS],
                      b[B_TAGS_VALID] if c.tag_nulls else None, c.tag_nulls),
        pa.Array.from_buffers(sch.field("keys").type, n, [None, b[B_KEYS_LIST_OFF]],
                              null_count=0,
                              children=[_string_array(s, f.key_tokens, b[B_KEYS_OFF],
                                                      b[B_KEYS])]),
        pa.Array.from_buffers(props_type, n, [None, b[B_PROPS_OFF]], null_count=0,
                              children=[entries]),
    ]
    if c.body_view:
        data = [source.slice(k << c.view_shift, min(c.limit - (k << c.view_shift), MAX_BYTES))
                for k in range(((c.limit - 1) >> c.view_shift) + 1 if c.limit > 0 else 1)]
        data += [source.slice(c.extra[2 * k], c.extra[2 * k + 1]) for k in range(c.nextra)]
        columns.append(pa.Array.from_buffers(pa.binary_view(), n, [None, b[B_BODY_OFF], *data],
                                             null_count=0))
    elif c.include_body:
        columns.append(_string_array(pa.binary(), n, b[B_BODY_OFF], b[B_BODY]))
    return pa.RecordBatch.from_arrays(columns, schema=sch)


cdef int64_t _base_offset_arg(object base_offset) except? -2:
    if base_offset is None:
        return -1
    if isinstance(base_offset, bool) or not isinstance(base_offset, int):
        raise TypeError(f"base_offset must be an int or None, got {type(base_offset).__name__}")
    if base_offset < 0:
        raise ValueError(f"base_offset must be >= 0 (or None), got {base_offset}")
    return base_offset


cdef object _arrow_buffer(ReadSource src):
    """A pa.Buffer over src's readable bytes that keeps them (a MappedFile: held) alive."""
    if src.mf is not None:
        return pa.py_buffer(src.mf.view(0, src.limit))
    return pa.py_buffer(src.obj)


def decode_region(source, int64_t start, int64_t end=-1, *, base_offset,
                  bint include_body=True, bint check_crc=False, int64_t max_records=-1,
                  int64_t max_batch_bytes=MAX_BYTES, bint spark=False, bint body_view=False):
    """Decode the records that START in [start, end) of source into one RecordBatch.

    source: a MappedFile (readable up to its read position, held while decoding) or any
    1-D bytes-like buffer. Positions are relative to source; a record may extend past end
    (up to the readable data), so byte ranges split at arbitrary points partition the
    records by their start. end < 0 or past the data means the end of the data.
    base_offset: the CommitLog offset of position 0 of source; each record's PHYSICALOFFSET
    must equal base_offset + position (else it is corrupt) and commitlog_offset/msg_id use
    it. None: take PHYSICALOFFSET as stored, unchecked (e.g. a pull reply's records).

    Returns a RegionResult ``(batch, next_position, stop_status)``: next_position is where
    the walk stopped (the first position not decoded) and stop_status says why:
    'end' (no record starts before end, or the data ends: zeros or < 8 bytes left),
    'blank' (an END_FILE blank at next_position: continue in the next segment),
    'corrupt' (the record at next_position fails validation; ``.reason`` says why) or
    'limit' (max_records, or max_batch_bytes of data in some column: continue from
    next_position). Never reads outside the buffer; never raises for bad data.

    body_view=True: the body column is ``binary_view`` whose values (longer than 12 bytes)
    point into source itself instead of copies: no body bytes are copied. The batch then
    keeps source alive (a MappedFile: held, as ``MappedFile.view`` does, until the batch and
    every array sliced from it are gone; a mutable buffer's later changes show through).
    pyarrow (26) lacks take/filter/sort kernels for binary_view: ``.cast(pa.binary())`` when
    needed. Not with spark=True.
    """
    global _rows_per_byte
    cdef Ctx c
    cdef ReadSource src
    cdef int64_t bo = _base_offset_arg(base_offset)
    cdef str status
    ctx_init(&c, bo, include_body, check_crc, spark, max_batch_bytes, body_view)
    try:
        src = ReadSource(source)
        try:
            c.base = src.base
            c.limit = src.limit
            c.view_shift = 62 if c.limit <= MAX_BYTES else 30
            if bo > 0x7FFFFFFFFFFFFFFF - c.limit:
                raise ValueError(f"base_offset {bo} + {c.limit} bytes overflows int64")
            if end < 0 or end > c.limit:
                end = c.limit
            if start < 0 or start > end:
                raise ValueError(f"start {start} outside [0, {end}]")
            _ctx_buffers(&c, <int64_t>((end - start) * _rows_per_byte * 1.125) + 64)
            with nogil:
                walk_region(&c, start, end, max_records)
            if c.oom:
                raise MemoryError()
            batch = _build_batch(&c, _arrow_buffer(src) if c.body_view else None)
            if c.rows > 0 and c.stop_pos > start:
                _rows_per_byte = <double>c.rows / (c.stop_pos - start)
        finally:
            src.release()
        reason = None
        if c.oversize or (c.stop_info.status == REC_OK and c.stop_pos < end):
            status = "limit"
        elif c.stop_info.status == REC_OK:
            status = "end"
        else:
            status = _STATUS_NAMES[c.stop_info.status]
            if c.stop_info.status == REC_CORRUPT:
                reason = status_text(c.stop_info)
        return RegionResult(batch, c.stop_pos, status, reason)
    finally:
        ctx_free(&c)


def decode_positions(source, positions, *, base_offset, bint include_body=True,
                     bint check_crc=False, int64_t max_batch_bytes=MAX_BYTES,
                     bint spark=False, bint body_view=False):
    """Decode the records at the given positions of source (int64 array-like, any order,
    repeats allowed) into one RecordBatch, a row per position in the given order.

    For ConsumeQueue-driven reads: the caller maps CQ units to positions in one CommitLog
    file (position = commitLogOffset - file start) and passes that file and its start as
    base_offset. A position that is not a valid record (outside the data, a blank, end of
    data, a bad record, or PHYSICALOFFSET != base_offset + position) raises
    CorruptRecordError naming its CommitLog offset. More than max_batch_bytes in a column
    raises BatchTooLargeError (``.fits`` leading positions fit): split and retry.
    """
    cdef Ctx c
    cdef ReadSource src
    cdef int64_t bo = _base_offset_arg(base_offset)
    cdef cnp.ndarray pos_arr = np.ascontiguousarray(positions, dtype=np.int64)
    cdef int64_t n
    if pos_arr.ndim != 1:
        raise ValueError(f"positions must be 1-D, got {pos_arr.ndim} dimensions")
    n = pos_arr.shape[0]
    ctx_init(&c, bo, include_body, check_crc, spark, max_batch_bytes, body_view)
    try:
        src = ReadSource(source)
        try:
            c.base = src.base
            c.limit = src.limit
            c.view_shift = 62 if c.limit <= MAX_BYTES else 30
            if bo > 0x7FFFFFFFFFFFFFFF - c.limit:
                raise ValueError(f"base_offset {bo} + {c.limit} bytes overflows int64")
            _ctx_buffers(&c, n)
            with nogil:
                walk_positions(&c, <const int64_t*>cnp.PyArray_DATA(pos_arr), n)
            if c.oom:
                raise MemoryError()
            if c.bad_index >= 0:
                bad = int(pos_arr[c.bad_index])
                if c.oversize:
                    raise BatchTooLargeError(
                        f"positions[{c.bad_index}] (offset {bad + max(bo, 0)}) would put more "
                        f"than {max_batch_bytes} bytes in a column; decode fewer positions at "
                        f"a time", c.bad_index)
                raise CorruptRecordError(f"positions[{c.bad_index}]: {status_text(c.stop_info)}",
                                         bad + bo if bo >= 0 else bad)
            return _build_batch(&c, _arrow_buffer(src) if c.body_view else None)
        finally:
            src.release()
    finally:
        ctx_free(&c)


def empty_batch(bint include_body=True, *, bint spark=False, bint body_view=False):
    """A RecordBatch with no rows and the schema of the decoded batches."""
    return pa.RecordBatch.from_pylist([], schema=schema(include_body, spark=spark,
                                                        body_view=body_view))
