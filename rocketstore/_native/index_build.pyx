# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The batch build of an IndexFile from CommitLog records (IndexService.buildIndex), without
the GIL and without a Python object per message."""
from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport free, malloc

from rocketstore._native.includes.crc32 cimport rs_crc32_init
from rocketstore._native.includes.python cimport (
    PyEval_RestoreThread, PyEval_SaveThread, PyThreadState,
)
from rocketstore._native.index_file cimport IndexFile
from rocketstore._native.index_keys cimport MAX_KEYS, record_key_hashes
from rocketstore._native.mapped_file cimport MappedFile
from rocketstore._native.record cimport (
    REC_OK, SYSFLAG_ROLLBACK, SYSFLAG_TRANSACTION_MASK, RecordInfo, check_record,
)

import numpy as np

rs_crc32_init()     # this module's copy of the CRC tables (check_record is inlined here)


def build_index(IndexFile f not None, MappedFile commitlog_file not None, positions,
                Py_ssize_t start=0, Py_ssize_t key_start=0):
    """Index the records at `positions` (file-relative, in order) of a CommitLog file into f,
    as IndexService.buildIndex: records whose offset is below f's endPhyOffset (already
    indexed) and ROLLBACK records are skipped; each record puts topic#UNIQ_KEY, then
    topic#token per non-empty KEYS token. A position that is not a valid record is skipped.

    Starts at record `start`, skipping its first `key_start` keys. Returns (next_record,
    next_key): (len(positions), 0) when all are done; otherwise f stopped at key next_key of
    record next_record, full (create the next file) or needing blocks on disk (f.needs_room:
    f.make_room()), and the caller calls again with those two values."""
    cdef const int64_t[::1] pos = np.ascontiguousarray(positions, dtype=np.int64)
    cdef Py_ssize_t n = pos.shape[0], i, k, nkeys, ks
    cdef char* ibase
    cdef const char* cbase
    cdef const char* rec
    cdef int64_t limit, p, from_offset
    cdef RecordInfo info
    cdef int32_t* hashes
    cdef bint full = False
    cdef PyThreadState* _save = NULL
    f._check_writable()
    if start < 0 or key_start < 0:
        raise ValueError(f"start ({start}) and key_start ({key_start}) must be >= 0")
    if start >= n:
        return (n, 0)
    hashes = <int32_t*>malloc(MAX_KEYS * sizeof(int32_t))
    if hashes == NULL:
        raise MemoryError()
    try:
        f._hold_base(&ibase)
        try:
            if not commitlog_file.hold():
                raise ValueError(f"mapped file {commitlog_file.file_name} is being destroyed")
            try:
                cbase = commitlog_file.base
                limit = commitlog_file.read_limit()
                from_offset = commitlog_file.file_from_offset
                i = start
                ks = key_start
                # hashing and slot updates cost ~0.15 us a record: release for all but a few
                _save = PyEval_SaveThread() if n - i >= 32 else NULL
                try:
                    while i < n:
                        p = pos[i]
                        if p < 0 or p >= limit:
                            i += 1
                            ks = 0
                            continue
                        rec = cbase + p
                        info = check_record(rec, limit - p, False, from_offset + p)
                        if info.status != REC_OK or info.phy_offset < f._end_phy \
                                or (info.sys_flag & SYSFLAG_TRANSACTION_MASK) == SYSFLAG_ROLLBACK:
                            i += 1
                            ks = 0
                            continue
                        nkeys = record_key_hashes(rec, &info, hashes, MAX_KEYS)
                        k = ks
                        while k < nkeys:
                            if not f._put(ibase, hashes[k], info.phy_offset, info.store_ts):
                                full = True
                                break
                            k += 1
                        if full:
                            ks = k
                            break
                        i += 1
                        ks = 0
                finally:
                    if _save != NULL:
                        PyEval_RestoreThread(_save)
            finally:
                commitlog_file.release()
        finally:
            f.mapped_file.release()
    finally:
        free(hashes)
    return (i, ks)
