# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The ReputMessageService's dispatch pass, native and without the GIL.

A pass walks the CommitLog file being followed from the dispatch position and, for each
record, writes its ConsumeQueue unit (into the queue's last file, registered beforehand) and
its IndexFile keys, then moves on. It stops where Python is needed: a queue not registered
yet or whose file is full (NEED_QUEUE), no index file or a full one (NEED_INDEX), the end of
the file (NO_FILE), a corrupt record (CORRUPT), nothing more to read (CAUGHT_UP) or the
record limit (LIMIT). The caller handles the stop under the GIL and runs the next pass; a
record is only counted once its unit and keys are all in, and both writes are idempotent, so
a pass can stop and resume at any record.

``Dispatcher.follow`` loops over passes and sleeps between them without the GIL: on a busy
store the dispatch thread takes the GIL only to register a new queue, roll a file or call
arrival listeners, so producers never hand it over per round.

One thread runs passes at a time (the service's round lock); producers append concurrently
and publish each record's bytes before the file's write position."""
cimport cython
from cpython.ref cimport Py_DECREF, Py_INCREF, PyObject
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcmp, memcpy, memset
from posix.time cimport nanosleep, time_t, timespec

from rocketstore._native.consume_queue cimport NEXT_FILE, Target, _place_unit, _target_of
from rocketstore._native.index_file cimport IndexFile
from rocketstore._native.index_keys cimport MAX_KEYS, key_hashes
from rocketstore._native.index_layout cimport HEADER_SIZE, SLOT_SIZE
from rocketstore._native.includes.atomic cimport rs_acquire_fence, rs_load_i64, rs_load_int
from rocketstore._native.includes.crc32 cimport rs_crc32_init
from rocketstore._native.includes.python cimport (
    PyEval_RestoreThread, PyEval_SaveThread, PyThreadState, PyUnicode_DecodeUTF8,
)
from rocketstore._native.includes.prefetch cimport rs_prefetch
from rocketstore._native.mapped_file cimport MappedFile
from rocketstore._native.stop_flag cimport StopFlag
from rocketstore._native.properties cimport KeyProps, find_key_props, tags_code_in, tags_code_of
from rocketstore._native.includes.scan cimport rs_find_pair_end
from rocketstore._native.record cimport (
    END_FILE_MIN_BLANK_LENGTH, MIN_RECORD_SIZE, REC_BLANK, REC_CORRUPT, REC_END, REC_OK, SYSFLAG_PREPARED,
    SYSFLAG_ROLLBACK, SYSFLAG_TRANSACTION_MASK, RecordInfo, check_record_but_topic_into,
    status_text,
)
from rocketstore._native.includes.record_checks cimport rs_topic_legal
from rocketstore._native.includes.vocabulary cimport (
    NAME_VALUE_SEPARATOR, PROPERTY_DELAY, PROPERTY_DELAY_LEN, SCHEDULE_TOPIC, SCHEDULE_TOPIC_LEN,
)

import numpy as np

from rocketstore._native.record import STATUS_NAMES as _STATUS_NAMES

cdef enum:
    MAX_DELAY_LEVELS = 64

rs_crc32_init()     # this module's copy of the CRC tables (check_record is inlined here)

cdef enum:
    PREFETCH_KEYS = 8       # slots prefetched per record (the rest load as they come)


# why a pass stopped
CAUGHT_UP = 0       # nothing more readable in the file now
LIMIT = 1           # max_records dispatched
NO_FILE = 2         # no file, or its end (END_FILE blank): the next file is needed
NEED_QUEUE = 3      # the stop record's queue is not registered, or its last file is full
NEED_INDEX = 4      # no index file, or it is full (key_start says how far the record got)
CORRUPT = 5         # the record at the position fails validation
STOP_NAMES = ("caught_up", "limit", "no_file", "need_queue", "need_index", "corrupt")

cdef enum:
    S_CAUGHT_UP = 0
    S_LIMIT = 1
    S_NO_FILE = 2
    S_NEED_QUEUE = 3
    S_NEED_INDEX = 4
    S_CORRUPT = 5


cdef struct QueueSlot:
    bint used
    bint skip               # no ConsumeQueue for it (queue id out of range): no unit
    bint touched            # got units since touched() was last asked
    int32_t queue_id
    int32_t topic_len
    uint64_t hash
    int64_t next_qoff       # last unit's queue offset + 1 (arrival listeners)
    Target t
    PyObject* cq            # the ConsumeQueue (a reference), NULL for a skipped queue
    PyObject* mf            # its last file, held (a reference), NULL for a skipped queue
    char topic[128]


cdef inline uint64_t _slot_hash(const char* topic, int32_t n, int32_t qid) noexcept nogil:
    cdef uint64_t h = 14695981039346656037ULL ^ <uint32_t>qid
    cdef int32_t i
    for i in range(n):
        h = (h ^ <unsigned char>topic[i]) * 1099511628211ULL
    return h


cdef class Dispatcher:
    """Dispatch state and passes (see the module docstring). Python registers queues
    (add_queue), the index file (set_index) and the CommitLog file (set_file) when a pass
    asks for them."""
    cdef QueueSlot* slots
    cdef Py_ssize_t cap
    cdef Py_ssize_t used
    cdef readonly bint index_enabled
    # the CommitLog file followed (held) and the position in it
    cdef readonly MappedFile file
    cdef const char* base
    cdef int64_t* wrote_ptr         # the file's wrote and committed positions, and whether
    cdef int64_t* committed_ptr     # appends go to a buffer (then records are readable
    cdef bint* buffered_ptr         # once committed to the file); read on every pass
    cdef int64_t file_size
    cdef int64_t from_offset
    cdef int64_t pos
    cdef int64_t detached_offset    # the position while no file is set
    cdef int64_t requested          # a position asked for by another thread (-1: none)
    # the index file written (its mapped file held)
    cdef readonly IndexFile index_file
    cdef char* index_base
    cdef readonly Py_ssize_t key_start      # keys of the record at key_start_phy already in
    cdef readonly int64_t key_start_phy
    cdef int32_t* hashes
    # counters and the last stop
    cdef readonly int64_t records           # dispatched records, in total
    cdef readonly int64_t last_store_timestamp
    cdef readonly int last_stop
    cdef readonly int64_t pass_start        # file position where the last pass began
    # follow() calls its handler after every pass that dispatched records while this is set;
    # read on every pass, so a listener registered while follow() runs is heard at once
    cdef public int call_after_pass
    # messageDelayLevel in ms: a SCHEDULE_TOPIC_XXXX unit's tags code is its delivery time
    cdef int64_t delay_ms[MAX_DELAY_LEVELS]
    cdef int delay_count
    cdef const char* reason
    cdef QueueSlot stop_key                 # topic and queue of a NEED_QUEUE stop
    cdef int64_t stop_phy
    cdef int32_t stop_size
    cdef int64_t stop_tags
    cdef int64_t stop_qoff

    def __cinit__(self):
        self.slots = NULL
        self.hashes = NULL

    def __init__(self, bint index_enabled=True):
        self.cap = 64
        self.slots = <QueueSlot*>calloc(self.cap, sizeof(QueueSlot))
        self.hashes = <int32_t*>malloc(MAX_KEYS * sizeof(int32_t))
        if self.slots == NULL or self.hashes == NULL:
            raise MemoryError()
        self.index_enabled = index_enabled
        self.requested = -1
        self.last_stop = S_CAUGHT_UP

    def set_delay_levels(self, levels_ms):
        """messageDelayLevel in milliseconds, level 1 first: a SCHEDULE_TOPIC_XXXX record's
        ConsumeQueue unit gets store time + its DELAY level's delay as tags code, as RocketMQ's
        CommitLog.checkMessageAndReturnSize writes it (its schedule service reads it so)."""
        levels = list(levels_ms)
        if len(levels) > MAX_DELAY_LEVELS:
            raise ValueError(f"at most {MAX_DELAY_LEVELS} delay levels, got {len(levels)}")
        for i, ms in enumerate(levels):
            if ms < 0:
                raise ValueError(f"delay level {i + 1} is negative: {ms}")
            self.delay_ms[i] = ms
        self.delay_count = len(levels)

    def __dealloc__(self):
        if self.slots != NULL:
            self._clear_slots(False)
            free(self.slots)
        free(self.hashes)
        if self.file is not None:
            self.file.release()
        if self.index_file is not None:
            self.index_file.mapped_file.release()

    # ---- position ------------------------------------------------------------------------
    @property
    def offset(self):
        """CommitLog offset of the next record to dispatch."""
        cdef int64_t r = rs_load_i64(&self.requested)
        if r >= 0:
            return r
        if self.file is None:
            return self.detached_offset
        return self.from_offset + self.pos

    def set_offset(self, int64_t offset):
        """Move the position (the file is dropped; the next pass stops with NO_FILE). Only
        from the thread that runs the passes: others use request_offset."""
        if offset < 0:
            raise ValueError(f"offset must be >= 0, got {offset}")
        self._drop_file()
        self.detached_offset = offset
        self.requested = -1

    def request_offset(self, int64_t offset):
        """Ask the thread running passes to move to offset before its next pass."""
        if offset < 0:
            raise ValueError(f"offset must be >= 0, got {offset}")
        (<volatile int64_t*>&self.requested)[0] = offset

    def take_request(self):
        """Apply a requested position (the pass thread, before a pass); True if there was one."""
        cdef int64_t r = rs_load_i64(&self.requested)
        if r < 0:
            return False
        self.set_offset(r)
        return True

    def set_file(self, MappedFile mf not None, int64_t pos):
        """Follow mf from file position pos (mf is held until another file is set)."""
        if pos < 0 or pos > mf.file_size:
            raise ValueError(f"position {pos} outside [0, {mf.file_size}] of {mf.file_name}")
        if not mf.hold():
            raise ValueError(f"mapped file {mf.file_name} is being destroyed")
        self._drop_file()
        self.file = mf
        self.base = mf.base
        self.wrote_ptr = &mf.wrote_pos
        self.committed_ptr = &mf.committed_pos
        self.buffered_ptr = &mf.buffered
        self.file_size = mf.file_size
        self.from_offset = mf.file_from_offset
        self.pos = pos

    cdef void _drop_file(self):
        if self.file is not None:
            self.detached_offset = self.from_offset + self.pos
            self.file.release()
            self.file = None
            self.base = NULL

    # ---- queues --------------------------------------------------------------------------
    cdef QueueSlot* _find(self, const char* topic, int32_t n, int32_t qid) noexcept nogil:
        cdef uint64_t h = _slot_hash(topic, n, qid)
        cdef Py_ssize_t i = <Py_ssize_t>(h & <uint64_t>(self.cap - 1))
        cdef QueueSlot* s
        while True:
            s = &self.slots[i]
            if not s.used:
                return NULL
            if s.hash == h and s.queue_id == qid and s.topic_len == n and \
                    memcmp(s.topic, topic, n) == 0:
                return s
            i = (i + 1) & (self.cap - 1)

    cdef int _grow(self) except -1:
        cdef Py_ssize_t old_cap = self.cap, i, j
        cdef QueueSlot* old = self.slots
        cdef QueueSlot* fresh = <QueueSlot*>calloc(old_cap * 2, sizeof(QueueSlot))
        if fresh == NULL:
            raise MemoryError()
        self.slots = fresh
        self.cap = old_cap * 2
        for i in range(old_cap):
            if old[i].used:
                j = <Py_ssize_t>(old[i].hash & <uint64_t>(self.cap - 1))
                while self.slots[j].used:
                    j = (j + 1) & (self.cap - 1)
                self.slots[j] = old[i]
        free(old)
        return 0

    def add_queue(self, bytes topic not None, int32_t queue_id, cq, MappedFile last_file,
                  int64_t max_phy, bint slow=False):
        """Register (or replace) the queue's target: units of topic/queue_id go to last_file
        (its last ConsumeQueue file, held from now on) with max_phy its max physical offset.
        cq None: the queue has no ConsumeQueue (its records get no unit). slow: every record
        of the queue stops the pass (NEED_QUEUE) and Python writes its unit (a queue with a
        ConsumeQueue extension)."""
        cdef Py_ssize_t n = len(topic)
        cdef QueueSlot* s
        cdef Target t
        cdef uint64_t h
        cdef Py_ssize_t i
        if n > 127:
            raise ValueError(f"topic of {n} bytes (at most 127)")
        t.base = NULL
        t.blocked = False
        t.allow_gap = False
        t.max_phy = max_phy
        if cq is not None:
            if last_file is None:
                raise ValueError("a queue with a ConsumeQueue needs its last file")
            _target_of(&t, last_file, max_phy)      # refuses a read-only file
            if not last_file.hold():
                raise ValueError(f"mapped file {last_file.file_name} is being destroyed")
        # checked and held: nothing below fails but a MemoryError growing the table
        s = self._find(topic, <int32_t>n, queue_id)
        if s != NULL:
            self._release_slot(s, True)
        else:
            if (self.used + 1) * 2 > self.cap:
                try:
                    self._grow()
                except MemoryError:
                    if cq is not None:
                        last_file.release()
                    raise
            h = _slot_hash(topic, <int32_t>n, queue_id)
            i = <Py_ssize_t>(h & <uint64_t>(self.cap - 1))
            while self.slots[i].used:
                i = (i + 1) & (self.cap - 1)
            s = &self.slots[i]
            s.used = True
            s.hash = h
            s.queue_id = queue_id
            s.topic_len = <int32_t>n
            memcpy(s.topic, <const char*>topic, n)
            s.touched = False
            s.next_qoff = 0
            self.used += 1
        s.skip = cq is None
        s.t = t
        if slow:
            s.t.base = NULL
        s.cq = NULL
        s.mf = NULL
        if cq is not None:
            Py_INCREF(cq)
            Py_INCREF(last_file)
            s.cq = <PyObject*>cq
            s.mf = <PyObject*>last_file

    cdef void _release_slot(self, QueueSlot* s, bint write_back):
        """Drop a slot's references; write_back stores its max physical offset in its
        ConsumeQueue (cq.max_physic_offset, which only the dispatch thread writes)."""
        if s.cq != NULL:
            if write_back:
                try:
                    (<object>s.cq).max_physic_offset = s.t.max_phy
                except Exception:
                    pass
            Py_DECREF(<object>s.cq)
            s.cq = NULL
        if s.mf != NULL:
            (<MappedFile>s.mf).release()
            Py_DECREF(<object>s.mf)
            s.mf = NULL
        s.t.base = NULL

    cdef void _clear_slots(self, bint write_back):
        cdef Py_ssize_t i
        for i in range(self.cap):
            if self.slots[i].used:
                self._release_slot(&self.slots[i], write_back)
                self.slots[i].used = False
        self.used = 0

    def queue_max_phy(self, bytes topic not None, int32_t queue_id, int64_t default):
        """The registered queue's max physical offset (default when not registered)."""
        cdef QueueSlot* s = self._find(topic, <int32_t>len(topic), queue_id)
        return default if s == NULL or s.skip else s.t.max_phy

    @property
    def queue_count(self):
        return self.used

    def touched(self):
        """[(topic bytes, queue_id, next_queue_offset)] of queues that got units since the
        last call (arrival listeners)."""
        cdef Py_ssize_t i
        cdef list out = []
        for i in range(self.cap):
            if self.slots[i].used and self.slots[i].touched:
                self.slots[i].touched = False
                out.append((self.slots[i].topic[:self.slots[i].topic_len],
                            self.slots[i].queue_id, self.slots[i].next_qoff))
        return out

    # ---- index ---------------------------------------------------------------------------
    def set_index(self, IndexFile f, Py_ssize_t key_start=0, int64_t key_start_phy=-1):
        """Write keys into f (held from now on; None: none). The record at key_start_phy
        already has its first key_start keys in the index (a resumed or replayed record)."""
        cdef char* base = NULL
        if f is not None:
            f._check_writable()
            f._hold_base(&base)
        if self.index_file is not None:
            self.index_file.mapped_file.release()
        self.index_file = f
        self.index_base = base
        self.key_start = key_start if f is not None else 0
        self.key_start_phy = key_start_phy

    def clear(self):
        """Release every file held (queues, index, CommitLog); queues write back their max
        physical offsets. The position is kept."""
        self._clear_slots(True)
        self.set_index(None)
        self._drop_file()

    # ---- the pass ------------------------------------------------------------------------
    @property
    def stop_reason(self):
        """Why the record at the position is corrupt (after a CORRUPT stop)."""
        return None if self.reason == NULL else self.reason.decode("utf-8", "replace")

    def stop_record(self):
        """(topic bytes, queue_id, phy_offset, size, tags_code, queue_offset) of the record a
        NEED_QUEUE stop is at."""
        return (self.stop_key.topic[:self.stop_key.topic_len], self.stop_key.queue_id,
                self.stop_phy, self.stop_size, self.stop_tags, self.stop_qoff)

    cdef int _pass(self, Py_ssize_t max_records) noexcept nogil:
        cdef int64_t limit, phy
        cdef Py_ssize_t n = 0, nkeys, k
        cdef RecordInfo info
        cdef const char* rec
        cdef QueueSlot* slot
        cdef int status, tran, placed
        cdef KeyProps kp
        cdef int64_t tags_code
        cdef bint index_keys
        cdef Py_ssize_t blanks = 0
        self.pass_start = self.pos
        if rs_load_i64(&self.requested) >= 0 or self.base == NULL:
            return S_NO_FILE
        limit = rs_load_i64(self.committed_ptr if self.buffered_ptr[0] else self.wrote_ptr)
        rs_acquire_fence()      # the record bytes were published before the position
        if limit > self.file_size:
            limit = self.file_size
        while True:
            if n >= max_records:
                return S_LIMIT
            if self.pos >= self.file_size:
                return S_NO_FILE
            if self.pos >= limit:
                return S_CAUGHT_UP
            rec = self.base + self.pos
            # the topic's characters are checked where a record's queue is registered (a
            # registered queue's topic was) and for the transaction records that name none
            status = check_record_but_topic_into(rec, limit - self.pos, False,
                                                 self.from_offset + self.pos, &info)
            if status == REC_BLANK:
                self.pos = self.file_size
                return S_NO_FILE
            if status == REC_END:
                if self.pos + END_FILE_MIN_BLANK_LENGTH <= limit:
                    # zeros where published bytes should hold a record: damage, not the end
                    self.reason = "no record where data was written (zeroed bytes)"
                    return S_CORRUPT
                return S_CAUGHT_UP
            if status == REC_CORRUPT:
                self.reason = info.reason
                return S_CORRUPT
            phy = info.phy_offset
            tran = info.sys_flag & SYSFLAG_TRANSACTION_MASK
            if (tran == SYSFLAG_PREPARED or tran == SYSFLAG_ROLLBACK) and \
                    not rs_topic_legal(rec + info.topic_offset, info.topic_len):
                self.reason = "illegal topic"
                return S_CORRUPT
            find_key_props(rec + info.props_offset, info.props_len, &kp)    # one walk for all
            # the index keys first, their hash slots prefetched: random lines of a large
            # file, loaded while the ConsumeQueue unit is written (below: indexed before)
            index_keys = (self.index_enabled and tran != SYSFLAG_ROLLBACK
                          and self.index_base != NULL and phy >= self.index_file._end_phy)
            if index_keys:
                nkeys = key_hashes(rec + info.topic_offset, info.topic_len, &kp,
                                   self.hashes, MAX_KEYS)
                for k in range(nkeys if nkeys < PREFETCH_KEYS else PREFETCH_KEYS):
                    rs_prefetch(self.index_base + HEADER_SIZE + SLOT_SIZE
                                * <int64_t>(self.hashes[k] % self.index_file.hash_slot_num))
            if tran != SYSFLAG_PREPARED and tran != SYSFLAG_ROLLBACK:
                tags_code = tags_code_in(&kp)
                if self.delay_count and info.topic_len == SCHEDULE_TOPIC_LEN and memcmp(
                        rec + info.topic_offset, SCHEDULE_TOPIC, SCHEDULE_TOPIC_LEN) == 0:
                    tags_code = _deliver_time(rec + info.props_offset, info.props_len,
                                              info.store_ts, self.delay_ms, self.delay_count,
                                              tags_code)
                slot = self._find(rec + info.topic_offset, info.topic_len, info.queue_id)
                placed = NEXT_FILE
                if slot != NULL and not slot.skip and slot.t.base != NULL:
                    placed = _place_unit(&slot.t, phy, info.size, tags_code, info.queue_offset,
                                         &blanks)
                elif slot != NULL and slot.skip:
                    placed = 0
                elif slot != NULL and phy + info.size <= slot.t.max_phy:
                    placed = 0      # a slow queue's unit Python has written
                if placed == NEXT_FILE:
                    if slot == NULL and not rs_topic_legal(rec + info.topic_offset,
                                                           info.topic_len):
                        self.reason = "illegal topic"
                        return S_CORRUPT
                    self.stop_key.queue_id = info.queue_id
                    self.stop_key.topic_len = info.topic_len
                    memcpy(self.stop_key.topic, rec + info.topic_offset, info.topic_len)
                    self.stop_phy = phy
                    self.stop_size = info.size
                    self.stop_tags = tags_code
                    self.stop_qoff = info.queue_offset
                    return S_NEED_QUEUE
                # only news: a record dispatched again (a resumed pass, a replay) is not
                if not slot.skip and info.queue_offset >= slot.next_qoff:
                    slot.next_qoff = info.queue_offset + 1
                    slot.touched = True
            if self.index_enabled and tran != SYSFLAG_ROLLBACK:
                if self.index_base == NULL:
                    return S_NEED_INDEX
                if index_keys:
                    k = self.key_start if phy == self.key_start_phy else 0
                    while k < nkeys:
                        if not self.index_file._put(self.index_base, self.hashes[k], phy, info.store_ts):
                            self.key_start = k
                            self.key_start_phy = phy
                            return S_NEED_INDEX
                        k += 1
            self.pos += info.size
            n += 1
            self.records += 1
            self.last_store_timestamp = info.store_ts

    def run(self, Py_ssize_t max_records=1 << 30):
        """One pass without the GIL; returns why it stopped (CAUGHT_UP, LIMIT, ...)."""
        cdef int status
        if max_records <= 0:
            raise ValueError(f"max_records must be positive, got {max_records}")
        with nogil:
            status = self._pass(max_records)
        self.last_stop = status
        return status

    def follow(self, double interval_s, StopFlag stop not None, handler,
               Py_ssize_t max_records=1 << 30, call_after_pass=None):
        """Run passes until stop is set, sleeping interval_s when caught up, all without the
        GIL. A stop that needs Python calls handler(status) with the GIL (it registers what
        is missing; a False return means no progress for now: sleep, then try again). With
        call_after_pass (this argument, else the attribute, which may change while follow()
        runs), handler(LIMIT or CAUGHT_UP) is also called after every pass that dispatched
        records (arrival listeners, extra dispatchers)."""
        cdef int status = S_CAUGHT_UP
        cdef int64_t before
        cdef bint progress, call
        cdef timespec pause
        if interval_s <= 0:
            raise ValueError(f"interval_s must be positive, got {interval_s}")
        if call_after_pass is not None:
            self.call_after_pass = bool(call_after_pass)
        pause.tv_sec = <time_t>interval_s
        pause.tv_nsec = <long>((interval_s - <double>pause.tv_sec) * 1e9)
        while rs_load_int(&stop.flag) == 0:
            with nogil:
                while rs_load_int(&stop.flag) == 0:
                    before = self.records
                    status = self._pass(max_records)
                    call = rs_load_int(&self.call_after_pass) != 0 and self.records != before
                    if status == S_CAUGHT_UP and not call:
                        nanosleep(&pause, NULL)
                    elif status == S_LIMIT and not call:
                        pass
                    else:
                        break
            if rs_load_int(&stop.flag) != 0:
                break
            self.last_stop = status
            progress = handler(status)
            if not progress and status != S_CAUGHT_UP and status != S_LIMIT:
                with nogil:
                    nanosleep(&pause, NULL)
            elif status == S_CAUGHT_UP:
                with nogil:
                    nanosleep(&pause, NULL)
        return self.last_stop


# ---- batches for Python dispatchers (ReputMessageService) --------------------------------

@cython.final
cdef class DispatchBatch:
    """Records decoded for dispatch, as columns: what the ConsumeQueue, IndexFile and arrival
    listeners need, without a Python object per record. Positions are relative to
    mapped_file; topics[topic_ids[i]] is record i's topic."""
    cdef readonly MappedFile mapped_file
    cdef readonly object positions
    cdef readonly object phy_offsets
    cdef readonly object sizes
    cdef readonly object queue_ids
    cdef readonly object queue_offsets
    cdef readonly object tags_codes
    cdef readonly object store_timestamps
    cdef readonly object sys_flags
    cdef readonly object topic_ids
    cdef readonly list topics
    cdef readonly str stop_status      # 'end', 'blank', 'corrupt' or 'limit'
    cdef readonly int64_t stop_position
    cdef readonly object reason

    def __len__(self):
        return len(self.positions)

    @property
    def next_offset(self):
        """CommitLog offset where the next dispatch round starts."""
        if self.stop_status == "blank":
            return self.mapped_file.file_from_offset + self.mapped_file.file_size
        return self.mapped_file.file_from_offset + self.stop_position

    def __repr__(self):
        return (f"DispatchBatch({len(self.positions)} records, topics={self.topics}, "
                f"stop={self.stop_status} at {self.stop_position})")


cdef enum:
    MAX_BATCH_TOPICS = 256     # distinct topics per dispatch batch (a batch stops early)
    # Decode at least this much without the GIL, else keep it. Every GIL-held microsecond of
    # the dispatch thread is one the producers wait (2 cores, one GIL), so only tiny regions
    # keep it.
    RELEASE_GIL_BYTES = 16384


def dispatch_region(MappedFile mf not None, int64_t start, int64_t end=-1, *,
                    Py_ssize_t max_records=4096, bint check_crc=False, bint tags_codes=True,
                    int64_t starts_before=-1):
    """Decode the records of mf from start (up to end / the readable limit) for dispatch.
    The walk runs without the GIL, so dispatch runs beside producers. tags_codes=False
    leaves the tags codes 0 (a walk that does not use them skips the properties).
    starts_before >= 0: only records that start before it (the walk stops there, status
    'limit', even inside a record that runs on past it)."""
    cdef int64_t limit, pos
    cdef Py_ssize_t cap, n = 0, t, k, ntopics = 0
    cdef RecordInfo info
    cdef const char* p
    cdef const char* rec
    cdef const char* topic_ptr[MAX_BATCH_TOPICS]
    cdef int32_t topic_len[MAX_BATCH_TOPICS]
    cdef Py_ssize_t last_t = -1
    cdef bint topics_full = False
    cdef PyThreadState* _save = NULL
    cdef DispatchBatch b = DispatchBatch.__new__(DispatchBatch)
    cdef int64_t[::1] v_pos, v_phy, v_qoff, v_tags, v_ts
    cdef int32_t[::1] v_size, v_qid, v_flag, v_tid
    if not mf.hold():
        raise ValueError(f"mapped file {mf.file_name} is being destroyed")
    try:
        limit = mf.read_limit()
        if end < 0 or end > limit:
            end = limit
        if start < 0 or start > end:
            raise ValueError(f"start {start} outside [0, {end}] of {mf.file_name}")
        cap = max(0, min(max_records, (end - start) // MIN_RECORD_SIZE + 1))
        positions = np.empty(cap, np.int64)
        phys = np.empty(cap, np.int64)
        sizes = np.empty(cap, np.int32)
        qids = np.empty(cap, np.int32)
        qoffs = np.empty(cap, np.int64)
        tags = np.empty(cap, np.int64)
        stamps = np.empty(cap, np.int64)
        flags = np.empty(cap, np.int32)
        tids = np.empty(cap, np.int32)
        v_pos = positions; v_phy = phys; v_size = sizes; v_qid = qids; v_qoff = qoffs
        v_tags = tags; v_ts = stamps; v_flag = flags; v_tid = tids
        p = mf.base
        pos = start
        memset(&info, 0, sizeof(RecordInfo))
        info.status = REC_OK
        _save = PyEval_SaveThread() if end - start >= RELEASE_GIL_BYTES else NULL
        try:
            while pos < end and n < cap and (starts_before < 0 or pos < starts_before):
                if check_record_but_topic_into(p + pos, end - pos, check_crc,
                                               mf.file_from_offset + pos, &info) != REC_OK:
                    break
                rec = p + pos
                t = -1
                if last_t >= 0 and topic_len[last_t] == info.topic_len and \
                        memcmp_(topic_ptr[last_t], rec + info.topic_offset, info.topic_len):
                    t = last_t
                else:
                    for k in range(ntopics):
                        if topic_len[k] == info.topic_len and \
                                memcmp_(topic_ptr[k], rec + info.topic_offset, info.topic_len):
                            t = k
                            break
                    if t < 0:
                        if not rs_topic_legal(rec + info.topic_offset, info.topic_len):
                            info.status = REC_CORRUPT       # checked once per topic
                            info.reason = "illegal topic"
                            break
                        if ntopics == MAX_BATCH_TOPICS:
                            topics_full = True      # the next round goes on from here
                            break
                        topic_ptr[ntopics] = rec + info.topic_offset
                        topic_len[ntopics] = info.topic_len
                        t = ntopics
                        ntopics += 1
                    last_t = t
                v_pos[n] = pos
                v_phy[n] = info.phy_offset
                v_size[n] = info.size
                v_qid[n] = info.queue_id
                v_qoff[n] = info.queue_offset
                v_tags[n] = tags_code_of(rec + info.props_offset, info.props_len) \
                    if tags_codes else 0
                v_ts[n] = info.store_ts
                v_flag[n] = info.sys_flag
                v_tid[n] = <int32_t>t
                n += 1
                pos += info.size
        finally:
            if _save != NULL:
                PyEval_RestoreThread(_save)
        b.topics = [PyUnicode_DecodeUTF8(topic_ptr[k], topic_len[k], "replace")
                    for k in range(ntopics)]
        b.mapped_file = mf
        b.positions = positions[:n]
        b.phy_offsets = phys[:n]
        b.sizes = sizes[:n]
        b.queue_ids = qids[:n]
        b.queue_offsets = qoffs[:n]
        b.tags_codes = tags[:n]
        b.store_timestamps = stamps[:n]
        b.sys_flags = flags[:n]
        b.topic_ids = tids[:n]
        b.stop_position = pos
        if info.status == REC_OK or topics_full:
            b.stop_status = "limit" if pos < end else "end"
            if starts_before >= 0 and pos >= starts_before and info.status == REC_OK:
                b.stop_status = "limit"
        else:
            b.stop_status = _STATUS_NAMES[info.status]
            if info.status == REC_CORRUPT:
                b.reason = status_text(info)
        return b
    finally:
        mf.release()


cdef int64_t _deliver_time(const char* props, int32_t props_len, int64_t store_ts,
                           const int64_t* delay_ms, int delay_count, int64_t tags_code) noexcept nogil:
    """store_ts + the delay of the record's DELAY level (capped at the highest level), or
    tags_code when it has no positive DELAY. Reads only [props, props + props_len)."""
    cdef const char* p = props
    cdef const char* end = props + props_len
    cdef const char* q
    cdef const char* v
    cdef int64_t level = -1
    while p < end:
        q = rs_find_pair_end(p, end)
        if (q - p > PROPERTY_DELAY_LEN + 1 and p[PROPERTY_DELAY_LEN] == NAME_VALUE_SEPARATOR
                and memcmp(p, PROPERTY_DELAY, PROPERTY_DELAY_LEN) == 0):
            level = 0
            v = p + PROPERTY_DELAY_LEN + 1
            while v < q and level <= MAX_DELAY_LEVELS:
                if v[0] < 48 or v[0] > 57:       # not a digit: Integer.parseInt would throw
                    level = -1
                    break
                level = level * 10 + (v[0] - 48)
                v += 1
        p = q + 1
    if level <= 0:
        return tags_code
    if level > delay_count:
        level = delay_count
    return store_ts + delay_ms[level - 1]


cdef inline bint memcmp_(const char* a, const char* b, int32_t n) noexcept nogil:
    cdef int32_t i
    for i in range(n):
        if a[i] != b[i]:
            return False
    return True
