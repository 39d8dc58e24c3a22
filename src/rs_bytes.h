/* Big-endian loads and stores for RocketMQ's on-disk formats (Java ByteBuffer order).
 * memcpy + bswap compiles to one mov+bswap (or movbe); unaligned access is safe. */
#ifndef RS_BYTES_H
#define RS_BYTES_H
#include <stdint.h>
#include <string.h>

static inline void rs_put_u16(char *p, uint16_t v) { v = __builtin_bswap16(v); memcpy(p, &v, 2); }
static inline void rs_put_u32(char *p, uint32_t v) { v = __builtin_bswap32(v); memcpy(p, &v, 4); }
static inline void rs_put_u64(char *p, uint64_t v) { v = __builtin_bswap64(v); memcpy(p, &v, 8); }
static inline uint16_t rs_get_u16(const char *p) { uint16_t v; memcpy(&v, p, 2); return __builtin_bswap16(v); }
static inline uint32_t rs_get_u32(const char *p) { uint32_t v; memcpy(&v, p, 4); return __builtin_bswap32(v); }
static inline uint64_t rs_get_u64(const char *p) { uint64_t v; memcpy(&v, p, 8); return __builtin_bswap64(v); }
static inline int16_t rs_get_i16(const char *p) { return (int16_t)rs_get_u16(p); }
static inline int32_t rs_get_i32(const char *p) { return (int32_t)rs_get_u32(p); }
static inline int64_t rs_get_i64(const char *p) { return (int64_t)rs_get_u64(p); }

/* Orders the stores before it ahead of the stores after it (compiler and CPU): a record's
 * header is published only after its other bytes, so a writer killed mid-record leaves no
 * valid-looking header over a partial record. */
static inline void rs_release_fence(void) { __atomic_thread_fence(__ATOMIC_RELEASE); }

/* Nonzero when p[0:n] holds a byte below 3 (NUL, or RocketMQ's property separators 1 and 2):
 * eight bytes a step with the "has a byte less than" word trick, exact for a limit <= 128. */
static inline int rs_has_byte_below3(const char *p, size_t n) {
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    uint64_t hit = 0, w;
    size_t i = 0;
    if (n < 8) {                       /* short text: pad with 0xFF bytes (never a hit) */
        w = ~0ULL;
        memcpy(&w, p, n);
        return ((w - 3 * ones) & ~w & highs) != 0;
    }
    for (; i + 8 <= n; i += 8) {
        memcpy(&w, p + i, 8);
        hit |= (w - 3 * ones) & ~w & highs;
    }
    if (i < n) {                       /* the last 8 bytes again, overlapping */
        memcpy(&w, p + n - 8, 8);
        hit |= (w - 3 * ones) & ~w & highs;
    }
    return hit != 0;
}

#endif
