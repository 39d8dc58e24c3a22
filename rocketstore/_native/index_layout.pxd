# The bytes of an IndexFile (docs/format.md "IndexFile"), all big-endian: a 40-byte header,
# hash_slot_num 4-byte slots, index_num 20-byte items. Shared by the file (index_file.pyx),
# its check (index_check.pyx) and the dispatch pass (dispatch.pyx).

cdef enum:
    HEADER_SIZE = 40        # the file's header; the 4-byte hash slots follow
    SLOT_SIZE = 4
    ITEM_SIZE = 20          # keyHash i32, phyOffset i64, timeDiff i32 (s), prevIndex i32
    # header fields
    H_BEGIN_TS = 0
    H_END_TS = 8
    H_BEGIN_PHY = 16
    H_END_PHY = 24
    H_SLOT_COUNT = 32
    H_INDEX_COUNT = 36
