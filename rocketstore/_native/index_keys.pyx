# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The index keys of a record and their keyHashes, as RocketMQ 4.9's IndexService puts them.

Keys are hashed as Java's ``String.hashCode`` of ``topic + "#" + key``. Topics and properties
are read straight from the mapped CommitLog record and their UTF-8 bytes hashed as Java's
UTF-8 decoder (JDK 8-17 String(bytes, UTF_8), malformed input -> U+FFFD) would decode them,
continuing the polynomial hash from ``hash(topic + "#")``: no Python object per message.
"""
from libc.stdint cimport int32_t, int64_t, uint32_t
from libc.stdlib cimport free, malloc
from libc.string cimport memchr

from rocketstore._native.hashes cimport hash_text, java_hash_str
from rocketstore._native.includes.crc32 cimport rs_crc32_init
from rocketstore._native.mapped_file cimport MappedFile
from rocketstore._native.properties cimport find_key_props
from rocketstore._native.record cimport (
    REC_OK, SYSFLAG_ROLLBACK, SYSFLAG_TRANSACTION_MASK, check_record,
)

rs_crc32_init()     # this module's copy of the CRC tables (check_record is inlined here)


def index_key_hash(str key not None):
    """keyHash of an index key (``topic#key``): abs(Java hashCode), MIN_VALUE -> 0."""
    return key_hash_of(java_hash_str(key))


cdef Py_ssize_t key_hashes(const char* topic, int32_t topic_len, const KeyProps* kp,
                           int32_t* out, Py_ssize_t cap) noexcept nogil:
    """keyHash of every index key of a record whose properties find_key_props read, in
    RocketMQ 4.9's put order: topic#UNIQ_KEY, then topic#token for each non-empty
    space-separated KEYS token (duplicates kept)."""
    cdef Py_ssize_t n = 0
    cdef const char* p
    cdef const char* end
    cdef const char* tok_end
    cdef uint32_t prefix
    if kp.uniq == NULL and kp.keys == NULL:
        return 0
    prefix = hash_text(0, <const unsigned char*>topic, topic_len)
    prefix = prefix * 31 + 35      # '#'
    if kp.uniq != NULL and n < cap:
        out[n] = key_hash_of(<int32_t>hash_text(prefix, <const unsigned char*>kp.uniq,
                                                kp.uniq_len))
        n += 1
    if kp.keys != NULL:
        p = kp.keys
        end = kp.keys + kp.keys_len
        while p < end and n < cap:
            tok_end = <const char*>memchr(p, 32, end - p)
            if tok_end == NULL:
                tok_end = end
            if tok_end > p:
                out[n] = key_hash_of(<int32_t>hash_text(prefix, <const unsigned char*>p,
                                                        tok_end - p))
                n += 1
            p = tok_end + 1
    return n


cdef Py_ssize_t record_key_hashes(const char* rec, RecordInfo* info, int32_t* out,
                                  Py_ssize_t cap) noexcept nogil:
    """key_hashes of the record at rec (info: its layout)."""
    cdef KeyProps kp
    find_key_props(rec + info.props_offset, info.props_len, &kp)
    return key_hashes(rec + info.topic_offset, info.topic_len, &kp, out, cap)


def record_index_key_hashes(MappedFile mf not None, int64_t pos):
    """keyHashes a record at pos of mf gets in the index (empty for a ROLLBACK record)."""
    cdef RecordInfo info
    cdef int32_t* hashes = NULL
    cdef Py_ssize_t n, i
    cdef int64_t limit
    if not mf.hold():
        raise ValueError(f"mapped file {mf.file_name} is being destroyed")
    try:
        hashes = <int32_t*>malloc(MAX_KEYS * sizeof(int32_t))
        if hashes == NULL:
            raise MemoryError()
        limit = mf.read_limit()
        if pos < 0 or pos >= limit:
            raise ValueError(f"position {pos} outside the written part [0, {limit})")
        info = check_record(mf.base + pos, limit - pos, False, -1)
        if info.status != REC_OK:
            raise ValueError(f"no valid record at position {pos} of {mf.file_name}")
        if (info.sys_flag & SYSFLAG_TRANSACTION_MASK) == SYSFLAG_ROLLBACK:
            return []
        n = record_key_hashes(mf.base + pos, &info, hashes, MAX_KEYS)
        return [hashes[i] for i in range(n)]
    finally:
        free(hashes)
        mf.release()
