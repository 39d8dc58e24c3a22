# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Why an IndexFile's slots and items are not what its puts made (IndexFile.check).

Every item 1..indexCount-1 has keyHash >= 0, timeDiff >= 0 and a phyOffset in
[beginPhyOffset, endPhyOffset] not below the previous item's; its prevIndex is the item put
before it in the same slot; and every slot holds the newest item of its slot (or a torn
put's). The items and slots are read once, without the GIL.
"""
from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport calloc, free

from rocketstore._native.includes.byteorder cimport rs_get_i32, rs_get_i64
from rocketstore._native.index_layout cimport HEADER_SIZE, ITEM_SIZE, SLOT_SIZE


cdef str check_header(int32_t count, int32_t index_num, int64_t begin_ts, int64_t end_ts,
                      int64_t begin_phy, int64_t end_phy):
    """Why the header's counters and ranges are impossible; None when they are not."""
    if count < 1 or count > index_num:
        return f"indexCount {count} outside [1, {index_num}]"
    if count > 1 and begin_phy > end_phy:
        return f"beginPhyOffset {begin_phy} after endPhyOffset {end_phy}"
    if count > 1 and begin_ts > end_ts:
        return f"beginTimestamp {begin_ts} after endTimestamp {end_ts}"
    return None


cdef str check_items(const char* base, int32_t hash_slot_num, int32_t index_num,
                     int32_t count, int64_t begin_phy, int64_t end_phy):
    """Why the items and slots of the file mapped at base (held by the caller, its header
    checked) are not what its puts made; None when they are."""
    cdef int32_t* heads
    cdef const char* reason = NULL
    cdef int32_t n, h, prev, s, v, bad = -1
    cdef int64_t phy, last_phy
    cdef int64_t items_at = HEADER_SIZE + <int64_t>hash_slot_num * SLOT_SIZE
    cdef const char* item
    heads = <int32_t*>calloc(hash_slot_num, sizeof(int32_t))
    if heads == NULL:
        raise MemoryError()
    try:
        with nogil:
            last_phy = begin_phy
            for n in range(1, count):
                item = base + items_at + <int64_t>n * ITEM_SIZE
                h = rs_get_i32(item)
                phy = rs_get_i64(item + 4)
                prev = rs_get_i32(item + 16)
                if h < 0:
                    reason = "negative keyHash"
                elif rs_get_i32(item + 12) < 0:
                    reason = "negative timeDiff"
                elif phy < last_phy or phy > end_phy or (n == 1 and phy != begin_phy):
                    reason = "phyOffset out of order or outside the header's range"
                elif prev != heads[h % hash_slot_num]:
                    reason = "prevIndex is not the slot's previous item"
                if reason != NULL:
                    bad = n
                    break
                heads[h % hash_slot_num] = n
                last_phy = phy
            if reason == NULL and count > 1 and last_phy != end_phy:
                reason = "endPhyOffset is not the last item's phyOffset"
            if reason == NULL:
                for s in range(hash_slot_num):
                    v = rs_get_i32(base + HEADER_SIZE + <int64_t>s * SLOT_SIZE)
                    if v == heads[s]:
                        continue
                    if v == count and count < index_num:
                        # a torn put: item `count` written and linked, the counter not
                        item = base + items_at + <int64_t>count * ITEM_SIZE
                        h = rs_get_i32(item)
                        if h >= 0 and h % hash_slot_num == s and \
                                rs_get_i32(item + 16) == heads[s]:
                            continue
                    reason = "hash slot does not point to its newest item"
                    bad = s
                    break
    finally:
        free(heads)
    if reason == NULL:
        return None
    text = (<bytes>reason).decode()
    return f"{'hash slot' if text.startswith('hash slot') else 'item'} {bad}: {text}"
