# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""ConsumeQueue unit writes: 20-byte units (commitLogOffset int64, size int32, tagsCode int64)."""
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc

import numpy as np

from rocketstore._native.includes.python cimport (
    PyEval_RestoreThread, PyEval_SaveThread, PyThreadState,
)
from rocketstore._native.mapped_file cimport MappedFile
from rocketstore._native.record cimport (
    SYSFLAG_PREPARED, SYSFLAG_ROLLBACK, SYSFLAG_TRANSACTION_MASK,
)

cdef int _target_of(Target* t, MappedFile mf, int64_t max_phy) except -1:
    if mf.read_only:
        raise PermissionError(f"{mf.file_name} is read-only")
    t.base = mf.wbase
    t.wrote = &mf.wrote_pos
    t.from_offset = mf.file_from_offset
    t.file_size = mf.file_size
    t.alloc = &mf.alloc_pos
    t.max_phy = max_phy
    t.blocked = False
    t.allow_gap = False
    return 0


def write_units(MappedFile mf not None, const int64_t[::1] phys, const int32_t[::1] sizes,
                const int64_t[::1] tags, const int64_t[::1] queue_offsets, Py_ssize_t start,
                int64_t max_physic_offset, bint allow_gap=False):
    """Write units start.. into mf at their logical positions (see _place_unit). A unit past
    the end of the units written is only placed (blank units before it) with allow_gap; else
    it stops the call as if it belonged to another file.

    Returns (next_index, max_physic_offset, skipped, blank_units). next_index < len(phys) means
    the next unit belongs to a later file, or past mf's blocks on disk (allocate_to first)."""
    cdef Py_ssize_t i, n = phys.shape[0]
    cdef Py_ssize_t skipped = 0, blanks = 0
    cdef int placed
    cdef Target t
    cdef PyThreadState* _save = NULL
    if sizes.shape[0] != n or tags.shape[0] != n or queue_offsets.shape[0] != n:
        raise ValueError("phys, sizes, tags and queue_offsets must have the same length")
    _target_of(&t, mf, max_physic_offset)
    t.allow_gap = allow_gap
    if not mf.hold():
        raise ValueError(f"mapped file {mf.file_name} is being destroyed")
    try:
        _save = PyEval_SaveThread() if n - start >= 4096 else NULL   # small: keep the GIL
        try:
            i = start
            while i < n:
                placed = _place_unit(&t, phys[i], sizes[i], tags[i], queue_offsets[i], &blanks)
                if placed == NEXT_FILE:
                    break
                if placed == SKIPPED:
                    skipped += 1
                i += 1
        finally:
            if _save != NULL:
                PyEval_RestoreThread(_save)
    finally:
        mf.release()
    return i, t.max_phy, skipped, blanks


def group_records(const int32_t[::1] topic_ids, const int32_t[::1] queue_ids,
                  const int32_t[::1] sys_flags):
    """Queue of each record of a dispatch batch, without sorting (log order is each queue's
    order): returns (group_ids, keys), group_ids[i] an index into keys, keys[g] =
    topic_id << 32 | queue_id (queue id as unsigned 32 bits) in first-seen order; -1 for a
    prepared or rolled-back transaction record, which gets no unit."""
    cdef Py_ssize_t i, n = topic_ids.shape[0], cap = 16, ngroups = 0
    cdef uint64_t key, slot, mask
    cdef int32_t tran
    cdef PyThreadState* _save = NULL
    if queue_ids.shape[0] != n or sys_flags.shape[0] != n:
        raise ValueError("topic_ids, queue_ids and sys_flags must have the same length")
    while cap < 2 * n:
        cap *= 2
    mask = cap - 1
    table_keys = np.empty(cap, np.uint64)
    table_vals = np.full(cap, -1, np.int32)
    groups = np.empty(n, np.int32)
    keys = np.empty(n, np.int64)
    cdef uint64_t[::1] tk = table_keys
    cdef int32_t[::1] tv = table_vals
    cdef int32_t[::1] g = groups
    cdef int64_t[::1] k = keys
    # a few ns a record: releasing the GIL for less than a big batch costs the dispatch thread
    # a wait for it (up to the switch interval while a producer holds it)
    _save = PyEval_SaveThread() if n >= 4096 else NULL
    try:
        for i in range(n):
            tran = sys_flags[i] & SYSFLAG_TRANSACTION_MASK
            if tran == SYSFLAG_PREPARED or tran == SYSFLAG_ROLLBACK:
                g[i] = -1
                continue
            key = (<uint64_t><uint32_t>topic_ids[i]) << 32 | <uint32_t>queue_ids[i]
            slot = (key * 0x9E3779B97F4A7C15ULL) >> 40 & mask
            while tv[slot] >= 0 and tk[slot] != key:
                slot = (slot + 1) & mask
            if tv[slot] < 0:
                tk[slot] = key
                tv[slot] = <int32_t>ngroups
                k[ngroups] = <int64_t>key
                ngroups += 1
            g[i] = tv[slot]
    finally:
        if _save != NULL:
            PyEval_RestoreThread(_save)
    return groups, keys[:ngroups]


def write_grouped_units(list files not None, int64_t[::1] max_phys,
                        const int32_t[::1] group_ids, const int64_t[::1] phys,
                        const int32_t[::1] sizes, const int64_t[::1] tags,
                        const int64_t[::1] queue_offsets, uint8_t[::1] slow):
    """Write the units of many queues in one pass, in record order: record i goes to
    files[group_ids[i]] (a queue's last ConsumeQueue file; None when it has none) as
    write_units would, max_phys[g] is read and updated. A record whose unit is not in that
    file (a roll, a queue's first file) gets slow[i] = 1, and so does every later record of
    its queue: the caller writes those through ConsumeQueue.put_units, in order. Group -1
    (no unit) is skipped. Returns the number of slow records."""
    cdef Py_ssize_t i, g, n = group_ids.shape[0], ngroups = len(files), nslow = 0
    cdef Py_ssize_t blanks = 0
    cdef Target* targets
    cdef MappedFile mf
    cdef list held = []
    cdef PyThreadState* _save = NULL
    if (phys.shape[0] != n or sizes.shape[0] != n or tags.shape[0] != n
            or queue_offsets.shape[0] != n or slow.shape[0] != n):
        raise ValueError("group_ids, phys, sizes, tags, queue_offsets and slow must have the "
                         "same length")
    if max_phys.shape[0] != ngroups:
        raise ValueError(f"max_phys has {max_phys.shape[0]} entries for {ngroups} files")
    targets = <Target*>malloc(max(ngroups, 1) * sizeof(Target))
    if targets == NULL:
        raise MemoryError()
    try:
        for g in range(ngroups):
            f = files[g]
            targets[g].base = NULL
            targets[g].max_phy = max_phys[g]
            targets[g].blocked = True
            if f is None:
                continue
            mf = <MappedFile?>f
            _target_of(&targets[g], mf, max_phys[g])
            if not mf.hold():
                raise ValueError(f"mapped file {mf.file_name} is being destroyed")
            held.append(mf)
        for i in range(n):
            if group_ids[i] >= ngroups:
                raise ValueError(f"group_ids[{i}] = {group_ids[i]} has no file entry")
        _save = PyEval_SaveThread() if n >= 4096 else NULL     # see group_records
        try:
            for i in range(n):
                g = group_ids[i]
                if g < 0:
                    continue
                if not targets[g].blocked and _place_unit(
                        &targets[g], phys[i], sizes[i], tags[i], queue_offsets[i],
                        &blanks) != NEXT_FILE:
                    continue
                targets[g].blocked = True
                slow[i] = 1
                nslow += 1
        finally:
            if _save != NULL:
                PyEval_RestoreThread(_save)
        for g in range(ngroups):
            max_phys[g] = targets[g].max_phy
    finally:
        for mf in held:
            mf.release()
        free(targets)
    return nslow
