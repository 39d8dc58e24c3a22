/* Atomic loads and stores of the fields that native loops read or write without the GIL
 * while another thread uses them, and the fences that order a record's bytes against the
 * position that publishes them. Relaxed unless the name says otherwise. */
#ifndef RS_ATOMIC_H
#define RS_ATOMIC_H
#include <stdint.h>

static inline int64_t rs_load_i64(const int64_t *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
static inline int64_t rs_load_acquire_i64(const int64_t *p) {
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
static inline void rs_store_release_i64(int64_t *p, int64_t v) {
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
}
/* Raise *p to v unless it is already at least v (a monotonic high-water mark). */
static inline void rs_store_max_i64(int64_t *p, int64_t v) {
    int64_t cur = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (cur < v && !__atomic_compare_exchange_n(p, &cur, v, 1, __ATOMIC_RELEASE,
                                                   __ATOMIC_RELAXED)) {
    }
}
static inline int rs_load_int(const int *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
static inline int rs_load_acquire_int(const int *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static inline void rs_store_int(int *p, int v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }

/* Orders the stores before it ahead of the stores after it (compiler and CPU): a record's
 * header is published only after its other bytes, so a writer killed mid-record leaves no
 * valid-looking header over a partial record. */
static inline void rs_release_fence(void) { __atomic_thread_fence(__ATOMIC_RELEASE); }
/* Orders the loads after it behind the loads before it: bytes published before a position
 * are read only after the position. */
static inline void rs_acquire_fence(void) { __atomic_thread_fence(__ATOMIC_ACQUIRE); }

/* Fault a page in for writing without changing it: an atomic add of zero is a write the
 * CPU orders with a concurrent writer's stores to the same word, so it can never undo
 * them (a plain store of the old value could). */
static inline void rs_touch_for_write(char *p) { __atomic_fetch_add((int *)p, 0, __ATOMIC_RELAXED); }

#endif
