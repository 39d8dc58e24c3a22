# Index keys of a record and their keyHashes: shared with the file's batch build
# (index_build.pyx) and the dispatch pass (dispatch.pyx).
from libc.stdint cimport int32_t

from rocketstore._native.properties cimport KeyProps
from rocketstore._native.record cimport RecordInfo

cdef enum:
    MAX_KEYS = 16400        # keys per record: 32,767 bytes of properties hold fewer


cdef inline int32_t key_hash_of(int32_t h) noexcept nogil:
    """IndexFile.indexKeyHashMethod of a Java hashCode h: abs(h), Integer.MIN_VALUE -> 0."""
    if h == <int32_t>0x80000000:
        return 0
    return -h if h < 0 else h


# keyHashes of a record's index keys (topic#UNIQ_KEY, then topic#token per KEYS token)
cdef Py_ssize_t key_hashes(const char* topic, int32_t topic_len, const KeyProps* kp,
                           int32_t* out, Py_ssize_t cap) noexcept nogil
cdef Py_ssize_t record_key_hashes(const char* rec, RecordInfo* info, int32_t* out,
                                  Py_ssize_t cap) noexcept nogil
