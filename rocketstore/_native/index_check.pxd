# The integrity check of an IndexFile (IndexFile.check): its header, then its items and slots.
from libc.stdint cimport int32_t, int64_t


cdef str check_header(int32_t count, int32_t index_num, int64_t begin_ts, int64_t end_ts,
                      int64_t begin_phy, int64_t end_phy)
cdef str check_items(const char* base, int32_t hash_slot_num, int32_t index_num,
                     int32_t count, int64_t begin_phy, int64_t end_phy)
