# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""IndexFile: RocketMQ 4.9's hash index from message keys to CommitLog offsets.

Layout (docs/format.md, 6 "IndexFile"), all big-endian::

    header   40 bytes  beginTimestamp i64 @0, endTimestamp i64 @8, beginPhyOffset i64 @16,
                       endPhyOffset i64 @24, hashSlotCount i32 @32, indexCount i32 @36
    slots    hash_slot_num x i32     newest item number of the slot, 0 = empty
    items    index_num x 20 bytes    keyHash i32, phyOffset i64, timeDiff i32 (s), prevIndex i32

Item 0 is never used; indexCount starts at 1 and the file is full when indexCount >= index_num.
A put writes the item, then the slot, then the header counters (with release fences between),
so a concurrent reader that finds an item number in a slot always finds the item written.

Nothing read from the file is trusted: the header is range-checked when a file is loaded (a bad
one raises IndexFileCorruptError), and every slot and prevIndex value is checked before it is
followed (0 < n <= indexCount, n < index_num, and each step must go to an older item, so a
corrupt chain ends after at most indexCount steps instead of looping).

Keys are hashed as Java's ``String.hashCode`` of ``topic + "#" + key`` (index_keys.pyx); the
batch build of a file from CommitLog records is index_build.pyx's, its integrity check
index_check.pyx's.
"""
import logging
import os

from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free
from libc.string cimport memset
from posix.mman cimport MS_SYNC, msync

from rocketstore._native.hashes cimport java_hash_str
from rocketstore._native.includes.atomic cimport rs_acquire_fence, rs_release_fence
from rocketstore._native.includes.byteorder cimport rs_get_i32, rs_get_i64, rs_put_u32, rs_put_u64
from rocketstore._native.index_check cimport check_header, check_items
from rocketstore._native.index_keys cimport key_hash_of
from rocketstore._native.index_layout cimport (
    H_BEGIN_PHY, H_BEGIN_TS, H_END_PHY, H_END_TS, H_INDEX_COUNT, H_SLOT_COUNT, HEADER_SIZE,
    ITEM_SIZE, SLOT_SIZE,
)
from rocketstore._native.mapped_file cimport MappedFile

_log = logging.getLogger(__name__)

cdef enum:
    OS_PAGE = 4096
    # hash slot pages get blocks 16 at a time (64 KiB): keys hash all over the slots, so a
    # busy file soon touches every page, and a fallocate per 4 KiB page cost dispatch
    # ~4,900 system calls per file
    SLOT_ALLOCATION_PAGES = 16

cdef int32_t INT32_MAX_ = 0x7FFFFFFF

INDEX_HEADER_SIZE = HEADER_SIZE
INDEX_SLOT_SIZE = SLOT_SIZE
INDEX_ITEM_SIZE = ITEM_SIZE
#: Items get their blocks on disk at least this many bytes at a time, and at most
#: INDEX_ALLOCATION_CHUNK_MAX (each step the size allocated so far); hash slot pages get
#: theirs when first written, SLOT_ALLOCATION_PAGES at a time. An index file is 420 MB with
#: the default geometry; one holding a few keys takes a few 64 KiB groups.
INDEX_ALLOCATION_CHUNK = 64 << 10
INDEX_ALLOCATION_CHUNK_MAX = 4 << 20


class IndexFileCorruptError(ValueError):
    """An index file whose header is out of range (or whose size does not fit the config)."""

    def __init__(self, path, reason):
        super().__init__(f"index file {path}: {reason}")
        self.path = path
        self.reason = reason


def index_file_size(int64_t hash_slot_num, int64_t index_num):
    """Bytes of an index file: 40 + hash_slot_num * 4 + index_num * 20."""
    return HEADER_SIZE + hash_slot_num * SLOT_SIZE + index_num * ITEM_SIZE


# ---- the file --------------------------------------------------------------------------------

cdef class IndexFile:
    """One index file (RocketMQ's IndexFile) over a MappedFile. Make one with
    IndexFile.create(...) or IndexFile.load(...)."""
    # attributes and cdef methods: index_file.pxd

    def __init__(self):
        raise TypeError("use IndexFile.create(...) or IndexFile.load(...)")

    @staticmethod
    def create(path, int hash_slot_num, int index_num, int64_t end_phy_offset=0,
               int64_t end_timestamp=0):
        """A new, empty index file. As RocketMQ's constructor, a file that follows a full one
        starts with begin = end = that file's endPhyOffset / endTimestamp (when > 0); its first
        put replaces the begin values. The file is sparse: the header's page and the first
        items get blocks on disk at once, hash slot pages when first written, later items a
        chunk at a time (make_room); OSError, and no file, when the disk has no room."""
        _check_sizes(hash_slot_num, index_num)
        path = os.fspath(path)
        if os.path.exists(path):
            raise FileExistsError(f"index file {path} already exists")
        mf = MappedFile(path, index_file_size(hash_slot_num, index_num), file_from_offset=0)
        cdef IndexFile f = IndexFile.__new__(IndexFile)
        f._init(mf, hash_slot_num, index_num, True)
        f._index_count = 1
        try:
            f.make_room()       # the header's page and the first items
            f._slots_ahead()
        except BaseException:
            mf.destroy(0)
            raise
        if end_phy_offset > 0:
            f._begin_phy = end_phy_offset
            f._end_phy = end_phy_offset
        if end_timestamp > 0:
            f._begin_ts = end_timestamp
            f._end_ts = end_timestamp
        f._write_header(mf.base)
        return f

    @staticmethod
    def load(path, int hash_slot_num, int index_num, *, bint read_only=False):
        """Open an existing index file. Raises IndexFileCorruptError when its size does not
        match the config or its header counters are out of range."""
        cdef IndexFile f
        cdef const char* b
        cdef int64_t size
        _check_sizes(hash_slot_num, index_num)
        path = os.fspath(path)
        size = index_file_size(hash_slot_num, index_num)
        actual = os.path.getsize(path)
        if actual != size:
            raise IndexFileCorruptError(
                path, f"{actual} bytes, expected {size} for max_hash_slot_num={hash_slot_num}, "
                      f"max_index_num={index_num}")
        mf = MappedFile(path, size, create=False, read_only=read_only, file_from_offset=0)
        f = IndexFile.__new__(IndexFile)
        f._init(mf, hash_slot_num, index_num, not read_only)
        b = mf.base
        f._begin_ts = rs_get_i64(b + H_BEGIN_TS)
        f._end_ts = rs_get_i64(b + H_END_TS)
        f._begin_phy = rs_get_i64(b + H_BEGIN_PHY)
        f._end_phy = rs_get_i64(b + H_END_PHY)
        f._slot_count = rs_get_i32(b + H_SLOT_COUNT)
        f._index_count = rs_get_i32(b + H_INDEX_COUNT)
        reason = None
        if f._index_count < 0 or f._index_count > index_num:
            reason = f"indexCount {f._index_count} outside [0, {index_num}]"
        elif f._slot_count < 0 or f._slot_count > hash_slot_num:
            reason = f"hashSlotCount {f._slot_count} outside [0, {hash_slot_num}]"
        if reason is not None:
            mf.close()
            raise IndexFileCorruptError(path, reason)
        if f._index_count <= 0:      # IndexHeader.load: a file never written starts at 1
            f._index_count = 1
        try:
            f._slots_ahead()
        except OSError as exc:
            _log.warning("%s: %s (queries may fault on a full tmpfs)", path, exc)
        return f

    def __cinit__(self):
        self.slot_pages = NULL
        self.room_page = -1

    def __dealloc__(self):
        free(self.slot_pages)

    cdef void _init(self, MappedFile mf, int32_t hash_slot_num, int32_t index_num,
                    bint writable):
        self.mapped_file = mf
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.writable = writable
        self.items_at = HEADER_SIZE + <int64_t>hash_slot_num * SLOT_SIZE
        self.items_alloc = self.items_at
        if writable:
            self.slot_pages = <unsigned char*>calloc(
                <size_t>(self.items_at // OS_PAGE + 8) // 8 + 1, 1)
            if self.slot_pages == NULL:
                raise MemoryError()

    def _slots_ahead(self):
        """On tmpfs every hash slot page gets its blocks up front: a query reads slots that
        were never written, and there reading a hole takes a page (see
        MappedFile.reads_allocate). Raises OSError when the file system has no room."""
        cdef int64_t page, pages = (self.items_at + OS_PAGE - 1) // OS_PAGE
        cdef int rc
        if not self.writable or not self.mapped_file.reads_allocate:
            return
        rc = self.mapped_file.reserve_range(0, self.items_at)
        if rc != 0:
            raise OSError(rc, f"allocating the hash slots of {self.file_name} failed: "
                              f"{os.strerror(rc)}", self.file_name)
        for page in range(pages):
            self.slot_pages[page >> 3] |= <unsigned char>(1 << (page & 7))

    cdef int _page_room(self, int64_t page) noexcept nogil:
        """Blocks on disk for page `page` of the header and hash slots (allocated once, then
        remembered), with the rest of its group of SLOT_ALLOCATION_PAGES pages (the page
        alone when the disk has no room for the group): 0, or the errno of the failed
        allocation (room_page notes the page)."""
        cdef int rc
        cdef int64_t first, last, p
        if self.slot_pages[page >> 3] & (1 << (page & 7)):
            return 0
        first = page - page % SLOT_ALLOCATION_PAGES
        last = min(first + SLOT_ALLOCATION_PAGES, (self.items_at + OS_PAGE - 1) // OS_PAGE)
        if last <= page:
            last = page + 1
        rc = self.mapped_file.reserve_range(first * OS_PAGE, last * OS_PAGE)
        if rc != 0:
            first = page
            last = page + 1
            rc = self.mapped_file.reserve_range(page * OS_PAGE, page * OS_PAGE + OS_PAGE)
        if rc != 0:
            self.room_page = page
            return rc
        for p in range(first, last):
            self.slot_pages[p >> 3] |= <unsigned char>(1 << (p & 7))
        return 0

    cdef void _write_header(self, char* b) noexcept nogil:
        """IndexHeader.updateByteBuffer."""
        rs_put_u64(b + H_BEGIN_TS, <uint64_t>self._begin_ts)
        rs_put_u64(b + H_END_TS, <uint64_t>self._end_ts)
        rs_put_u64(b + H_BEGIN_PHY, <uint64_t>self._begin_phy)
        rs_put_u64(b + H_END_PHY, <uint64_t>self._end_phy)
        rs_put_u32(b + H_SLOT_COUNT, <uint32_t>self._slot_count)
        rs_put_u32(b + H_INDEX_COUNT, <uint32_t>self._index_count)

    cdef int _hold_base(self, char** base) except -1:
        if not self.mapped_file.hold():
            raise ValueError(f"index file {self.mapped_file.file_name} is closed or destroyed")
        base[0] = self.mapped_file.base
        return 0

    cdef int _check_writable(self) except -1:
        if not self.writable:
            raise PermissionError(f"index file {self.mapped_file.file_name} is read-only")
        return 0

    # ---- header ------------------------------------------------------------------------------
    @property
    def file_name(self):
        return self.mapped_file.file_name

    @property
    def begin_timestamp(self):
        return self._begin_ts

    @property
    def end_timestamp(self):
        return self._end_ts

    @property
    def begin_phy_offset(self):
        return self._begin_phy

    @property
    def end_phy_offset(self):
        return self._end_phy

    @property
    def hash_slot_count(self):
        return self._slot_count

    @property
    def index_count(self):
        return self._index_count

    @property
    def is_write_full(self):
        return self._index_count >= self.index_num

    @property
    def needs_room(self):
        """True when a put was refused for want of blocks on disk (make_room), not because
        the file is full."""
        return self.writable and (self.room_page >= 0 or (
            self._index_count < self.index_num
            and self.items_at + <int64_t>(self._index_count + 1) * ITEM_SIZE > self.items_alloc))

    def make_room(self):
        """Give the header's page, a hash slot page a put could not allocate, and the next
        items blocks on disk (items a growing chunk at a time). Raises OSError (ENOSPC ...)
        when the disk has no room: puts then return False (as for a full file) until it
        has."""
        cdef int64_t need, step, target
        cdef int rc
        self._check_writable()
        if self.mapped_file.fd < 0:
            raise ValueError(f"index file {self.mapped_file.file_name} is closed")
        for page in (0, self.room_page):
            if page >= 0:
                self.room_page = -1
                rc = self._page_room(page)
                if rc != 0:
                    raise OSError(rc, f"allocating a hash slot page of {self.file_name} "
                                      f"failed: {os.strerror(rc)}", self.file_name)
        need = min(self.mapped_file.file_size,
                   self.items_at + <int64_t>(self._index_count + 1) * ITEM_SIZE)
        if need <= self.items_alloc:
            return
        step = min(max(self.items_alloc - self.items_at, INDEX_ALLOCATION_CHUNK),
                   INDEX_ALLOCATION_CHUNK_MAX)
        target = min(self.mapped_file.file_size, max(need, self.items_alloc + step))
        rc = self.mapped_file.reserve_range(self.items_alloc, target)
        if rc != 0 and target > need:       # no room for a chunk: what the next item needs
            target = need
            rc = self.mapped_file.reserve_range(self.items_alloc, target)
        if rc != 0:
            raise OSError(rc, f"allocating items of {self.file_name} failed: "
                              f"{os.strerror(rc)}", self.file_name)
        self.items_alloc = target

    def header(self):
        """The header with the names of RocketMQ's IndexHeader (and the fixture manifest)."""
        return {"beginTimestamp": self._begin_ts, "endTimestamp": self._end_ts,
                "beginPhyOffset": self._begin_phy, "endPhyOffset": self._end_phy,
                "hashSlotCount": self._slot_count, "indexCount": self._index_count}

    def is_time_matched(self, int64_t begin, int64_t end):
        """IndexFile.isTimeMatched: [begin, end] overlaps [beginTimestamp, endTimestamp]."""
        return _time_matched(self._begin_ts, self._end_ts, begin, end)

    def __repr__(self):
        return (f"IndexFile({self.mapped_file.file_name!r}, items={self._index_count - 1}, "
                f"phy=[{self._begin_phy}, {self._end_phy}], "
                f"ts=[{self._begin_ts}, {self._end_ts}])")

    # ---- put ---------------------------------------------------------------------------------
    cdef bint _put(self, char* base, int32_t key_hash, int64_t phy, int64_t ts) noexcept nogil:
        """IndexFile.putKey with a precomputed keyHash (>= 0). False when the file is full, or
        when the item has no blocks on disk yet (needs_room: make_room, then put again)."""
        cdef int32_t count = self._index_count
        cdef int32_t slot, slot_value, prev
        cdef int64_t diff
        cdef char* slot_p
        cdef char* item
        if count >= self.index_num or count < 1 or key_hash < 0:
            return False
        if self.items_at + <int64_t>(count + 1) * ITEM_SIZE > self.items_alloc:
            return False
        slot = key_hash % self.hash_slot_num
        if self._page_room((HEADER_SIZE + <int64_t>slot * SLOT_SIZE) // OS_PAGE) != 0:
            return False
        slot_p = base + HEADER_SIZE + <int64_t>slot * SLOT_SIZE
        slot_value = rs_get_i32(slot_p)
        if slot_value == count:
            # A torn put (slot written, counter not): the item there is the slot's head, and
            # is about to be overwritten; link to what it linked to (RocketMQ would self-loop).
            prev = rs_get_i32(base + self.items_at + <int64_t>count * ITEM_SIZE + 16)
            slot_value = prev if 0 < prev < count else 0
        elif slot_value <= 0 or slot_value > count:
            slot_value = 0
        diff = <int64_t>(<uint64_t>ts - <uint64_t>self._begin_ts) / 1000
        if self._begin_ts <= 0 or diff < 0:
            diff = 0
        elif diff > INT32_MAX_:
            diff = INT32_MAX_
        item = base + self.items_at + <int64_t>count * ITEM_SIZE
        rs_put_u32(item, <uint32_t>key_hash)
        rs_put_u64(item + 4, <uint64_t>phy)
        rs_put_u32(item + 12, <uint32_t>diff)
        rs_put_u32(item + 16, <uint32_t>slot_value)
        rs_release_fence()
        rs_put_u32(slot_p, <uint32_t>count)
        rs_release_fence()
        if count <= 1:
            self._begin_phy = phy
            self._begin_ts = ts
            rs_put_u64(base + H_BEGIN_PHY, <uint64_t>phy)
            rs_put_u64(base + H_BEGIN_TS, <uint64_t>ts)
        if slot_value == 0:
            self._slot_count += 1
            rs_put_u32(base + H_SLOT_COUNT, <uint32_t>self._slot_count)
        self._index_count = count + 1
        rs_put_u32(base + H_INDEX_COUNT, <uint32_t>self._index_count)
        self._end_phy = phy
        self._end_ts = ts
        rs_put_u64(base + H_END_PHY, <uint64_t>phy)
        rs_put_u64(base + H_END_TS, <uint64_t>ts)
        return True

    def put_key(self, str key not None, int64_t phy_offset, int64_t store_timestamp):
        """Put one index key (``topic#key``); False when the file is full. Its blocks on
        disk are allocated first when needed (OSError when the disk has no room)."""
        cdef char* base
        cdef bint ok
        self._check_writable()
        if self._index_count >= self.index_num:
            return False
        if self.needs_room:
            self.make_room()
        cdef int32_t h = key_hash_of(java_hash_str(key))
        self._hold_base(&base)
        try:
            ok = self._put(base, h, phy_offset, store_timestamp)
        finally:
            self.mapped_file.release()
        return ok

    def put_hash(self, int32_t key_hash, int64_t phy_offset, int64_t store_timestamp):
        """Put one item whose keyHash is already computed (record_index_key_hashes gives a
        record's, exactly as dispatch hashes them); False when the file is full."""
        cdef char* base
        cdef bint ok
        self._check_writable()
        if key_hash < 0:
            raise ValueError(f"key_hash must be >= 0, got {key_hash}")
        self._hold_base(&base)
        try:
            ok = self._put(base, key_hash, phy_offset, store_timestamp)
        finally:
            self.mapped_file.release()
        return ok

    # ---- select ------------------------------------------------------------------------------
    cdef Py_ssize_t _walk(self, const char* base, int32_t key_hash, int32_t start,
                          int64_t* out, Py_ssize_t max_out, int64_t begin, int64_t end,
                          int32_t* next_out) noexcept nogil:
        """IndexFile.selectPhyOffset from item `start` (or the key's slot when start < 0):
        appends matching phyOffsets (at most max_out) and sets *next_out to the item where a
        continuation would start (0 when the chain is done)."""
        cdef int32_t count = self._index_count
        cdef int32_t cur, hash_read, prev
        cdef int64_t time_diff, time_read, phy
        cdef int64_t file_begin = self._begin_ts
        cdef const char* item
        cdef Py_ssize_t n = 0
        next_out[0] = 0
        if key_hash < 0 or count <= 1:
            return 0
        if start < 0:
            cur = rs_get_i32(base + HEADER_SIZE
                             + <int64_t>(key_hash % self.hash_slot_num) * SLOT_SIZE)
            rs_acquire_fence()
        else:
            cur = start
        if cur <= 0 or cur > count:
            return 0
        while True:
            if n >= max_out:
                next_out[0] = cur
                break
            if cur >= self.index_num:          # would read past the end of the file
                break
            item = base + self.items_at + <int64_t>cur * ITEM_SIZE
            hash_read = rs_get_i32(item)
            phy = rs_get_i64(item + 4)
            time_diff = rs_get_i32(item + 12)
            prev = rs_get_i32(item + 16)
            if time_diff < 0:
                break
            time_read = <int64_t>(<uint64_t>file_begin + <uint64_t>(time_diff * 1000))
            if hash_read == key_hash and time_read >= begin and time_read <= end:
                out[n] = phy
                n += 1
            # RocketMQ stops at prev <= 0, prev > indexCount, prev == cur, or an item older
            # than begin; prev > cur (only in a corrupt file) also stops, so chains end.
            if prev <= 0 or prev > count or prev >= cur or time_read < begin:
                break
            cur = prev
        return n

    cdef int _select_into(self, list out, int32_t key_hash, int32_t start, Py_ssize_t max_out,
                          int64_t begin, int64_t end, int32_t* next_out) except -1:
        cdef int64_t buf[256]
        cdef Py_ssize_t n, i
        cdef int32_t cur = start
        next_out[0] = 0
        if max_out <= 0:
            next_out[0] = start
            return 0
        if not self.mapped_file.hold():        # being destroyed: nothing to read (RocketMQ)
            return 0
        try:
            while True:     # in steps of 256: the walk resumes exactly where it stopped
                n = self._walk(self.mapped_file.base, key_hash, cur, buf,
                               max_out if max_out < 256 else 256, begin, end, next_out)
                for i in range(n):
                    out.append(buf[i])
                max_out -= n
                cur = next_out[0]
                if cur == 0 or max_out <= 0:
                    break
        finally:
            self.mapped_file.release()
        return 0

    def select_phy_offsets(self, str key not None, int max_num, int64_t begin, int64_t end):
        """IndexFile.selectPhyOffset for an index key (``topic#key``): the phyOffsets of the
        key's chain whose keyHash matches and whose time is in [begin, end], newest first,
        at most max_num. Raw: may hold other keys with the same keyHash, and duplicates."""
        cdef list out = []
        cdef int32_t nxt
        self._select_into(out, key_hash_of(java_hash_str(key)), -1, max_num, begin, end, &nxt)
        return out

    def walk(self, int32_t key_hash, int32_t start_item, int max_num, int64_t begin,
             int64_t end):
        """Resumable select by keyHash: (offsets, next_item). start_item -1 starts at the slot;
        pass next_item back to continue; next_item 0 means the chain is done."""
        cdef list out = []
        cdef int32_t nxt
        self._select_into(out, key_hash, start_item, max_num, begin, end, &nxt)
        return out, nxt

    # ---- raw access (tests, tools) -----------------------------------------------------------
    def read_item(self, int32_t n):
        """Item n as (keyHash, phyOffset, timeDiff, prevIndex); 0 <= n < index_num."""
        cdef char* base
        cdef const char* item
        if n < 0 or n >= self.index_num:
            raise IndexError(f"item {n} outside [0, {self.index_num})")
        self._hold_base(&base)
        try:
            item = base + self.items_at + <int64_t>n * ITEM_SIZE
            return (rs_get_i32(item), rs_get_i64(item + 4), rs_get_i32(item + 12),
                    rs_get_i32(item + 16))
        finally:
            self.mapped_file.release()

    def read_slot(self, int32_t slot):
        """The value of hash slot `slot` (0 <= slot < hash_slot_num)."""
        cdef char* base
        cdef int32_t v
        if slot < 0 or slot >= self.hash_slot_num:
            raise IndexError(f"slot {slot} outside [0, {self.hash_slot_num})")
        self._hold_base(&base)
        try:
            v = rs_get_i32(base + HEADER_SIZE + <int64_t>slot * SLOT_SIZE)
        finally:
            self.mapped_file.release()
        return v

    def trailing_items(self, int64_t phy_offset):
        """How many of the newest items have this phyOffset (the keys of the last record
        already put, for resuming its re-dispatch)."""
        cdef char* base
        cdef int32_t n, k = 0
        self._hold_base(&base)
        try:
            n = self._index_count - 1
            while n >= 1 and n < self.index_num:
                if rs_get_i64(base + self.items_at + <int64_t>n * ITEM_SIZE + 4) != phy_offset:
                    break
                k += 1
                n -= 1
        finally:
            self.mapped_file.release()
        return k

    def truncate(self, int64_t phy_offset):
        """Remove the newest items whose phyOffset >= phy_offset (items are in CommitLog
        order), unlinking each from its slot. Returns the number removed. The end offset
        becomes the last kept item's; the end timestamp an upper bound of its time. For
        recovery: no concurrent put."""
        cdef char* base
        cdef char* item
        cdef int32_t n, removed = 0, h, prev, slot
        cdef char* slot_p
        cdef int64_t t
        self._check_writable()
        self._hold_base(&base)
        try:
            n = self._index_count - 1
            while n >= 1 and n < self.index_num:
                item = base + self.items_at + <int64_t>n * ITEM_SIZE
                if rs_get_i64(item + 4) < phy_offset:
                    break
                h = rs_get_i32(item)
                prev = rs_get_i32(item + 16)
                # publish the smaller count first: readers then ignore the item
                self._index_count = n
                rs_put_u32(base + H_INDEX_COUNT, <uint32_t>n)
                rs_release_fence()
                if h >= 0:
                    slot_p = base + HEADER_SIZE + <int64_t>(h % self.hash_slot_num) * SLOT_SIZE
                    if rs_get_i32(slot_p) == n:
                        rs_put_u32(slot_p, <uint32_t>(prev if 0 < prev < n else 0))
                        if not (0 < prev < n) and self._slot_count > 0:
                            self._slot_count -= 1
                memset(item, 0, ITEM_SIZE)
                removed += 1
                n -= 1
            if removed:
                if self._index_count > 1:
                    item = base + self.items_at + <int64_t>(self._index_count - 1) * ITEM_SIZE
                    self._end_phy = rs_get_i64(item + 4)
                    t = self._begin_ts + <int64_t>rs_get_i32(item + 12) * 1000 + 999
                    if t < self._end_ts:
                        self._end_ts = t
                else:
                    self._end_phy = self._begin_phy
                    self._end_ts = self._begin_ts
                self._write_header(base)
        finally:
            self.mapped_file.release()
        return removed

    # ---- integrity ---------------------------------------------------------------------------
    def check(self):
        """Why the file's slots and items are not what its puts made (None when they are):
        every item 1..indexCount-1 has keyHash >= 0, timeDiff >= 0 and a phyOffset in
        [beginPhyOffset, endPhyOffset] not below the previous item's; its prevIndex is the
        item put before it in the same slot; and every slot holds the newest item of its
        slot (or a torn put's). Reads the whole file once, without the GIL."""
        cdef char* base
        why = check_header(self._index_count, self.index_num, self._begin_ts, self._end_ts,
                           self._begin_phy, self._end_phy)
        if why is not None:
            return why
        self._hold_base(&base)
        try:
            return check_items(base, self.hash_slot_num, self.index_num, self._index_count,
                               self._begin_phy, self._end_phy)
        finally:
            self.mapped_file.release()

    # ---- lifecycle ---------------------------------------------------------------------------
    def flush(self):
        """IndexFile.flush: write the header, then msync the whole file (GIL released)."""
        cdef char* base
        cdef size_t size = <size_t>self.mapped_file.file_size
        cdef int rc
        if not self.writable:
            return
        if not self.mapped_file.hold():
            return
        try:
            base = self.mapped_file.base
            with nogil:
                self._write_header(base)
                rc = msync(base, size, MS_SYNC)
            if rc != 0:
                raise OSError(f"msync of index file {self.mapped_file.file_name} failed")
        finally:
            self.mapped_file.release()

    def close(self):
        """Flush (when writable) and unmap once no reader holds the file."""
        if self.mapped_file.is_available:
            self.flush()
            self.mapped_file.close()

    def destroy(self, double interval_forcibly_ms=0):
        """Delete the file (MappedFile.destroy); True when it is gone, else call again."""
        return self.mapped_file.destroy(interval_forcibly_ms)


cdef inline bint _time_matched(int64_t fb, int64_t fe, int64_t begin, int64_t end) noexcept nogil:
    return (begin < fb and end > fe) or (begin >= fb and begin <= fe) or (end >= fb and end <= fe)


cdef _check_sizes(int hash_slot_num, int index_num):
    if hash_slot_num < 1:
        raise ValueError(f"max_hash_slot_num must be >= 1, got {hash_slot_num}")
    if index_num < 2:
        raise ValueError(f"max_index_num must be >= 2 (item 0 is never used), got {index_num}")


# ---- query over files ------------------------------------------------------------------------

def query_files(files, str index_key not None, int max_num, int64_t begin, int64_t end):
    """IndexService.queryOffset over `files` (oldest first): newest file first, only files
    whose time range overlaps [begin, end]; stops after a file that begins before `begin`
    or once max_num offsets are found. Raw offsets (collisions, duplicates), newest first.
    The caller caps max_num (maxMsgsNumBatch)."""
    cdef list out = []
    cdef IndexFile f
    cdef int32_t nxt
    cdef int32_t h = key_hash_of(java_hash_str(index_key))
    cdef Py_ssize_t i
    if max_num <= 0:
        return out
    files = tuple(files)
    for i in range(len(files) - 1, -1, -1):
        f = <IndexFile?>files[i]
        if _time_matched(f._begin_ts, f._end_ts, begin, end):
            f._select_into(out, h, -1, max_num - len(out), begin, end, &nxt)
        if f._begin_ts < begin or len(out) >= max_num:
            break
    return out
