/* Byte scans over RocketMQ's text fields, eight bytes (SWAR) or sixteen (SSE2) at a time:
 * the property separators \x01 and \x02, NUL, spaces and non-ASCII bytes. */
#ifndef RS_SCAN_H
#define RS_SCAN_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* 8 bytes as a little-endian word, so the lowest set flag is the first byte in memory. */
static inline uint64_t rs_load_le64(const char *p) {
    uint64_t w; memcpy(&w, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    w = __builtin_bswap64(w);
#endif
    return w;
}
/* 8 bytes as they are in memory (a key to compare, not a number) */
static inline uint64_t rs_load_raw64(const char *p) { uint64_t w; memcpy(&w, p, 8); return w; }

static inline int rs_ctz64(uint64_t m) { return __builtin_ctzll(m); }
/* The byte index of the lowest flagged byte of a rs_load_le64 word's mask. */
static inline int rs_first_byte(uint64_t m) { return __builtin_ctzll(m) >> 3; }

/* High bit set in every byte that is < 0x03 (the \x01/\x02 separators, NUL) or >= 0x80
   (non-ASCII). Bytes above a flagged one may be flagged falsely; the lowest is exact. */
static inline uint64_t rs_special(uint64_t w) {
    return ((w - 0x0303030303030303ULL) & ~w & 0x8080808080808080ULL)
           | (w & 0x8080808080808080ULL);
}

/* Nonzero when p[0:n] holds a byte below 3 (NUL, or RocketMQ's property separators 1 and 2):
 * eight bytes a step with the "has a byte less than" word trick, exact for a limit <= 128. */
static inline int rs_has_byte_below3(const char *p, size_t n) {
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    uint64_t hit = 0, w;
    size_t i = 0;
    if (n < 8) {                       /* short text: two overlapping 4-byte loads */
        if (n >= 4) {
            uint32_t a, b;
            memcpy(&a, p, 4);
            memcpy(&b, p + n - 4, 4);
            w = ((uint64_t)b << 32) | a;
            return ((w - 3 * ones) & ~w & highs) != 0;
        }
        return n > 0 && ((unsigned char)p[0] < 3 || (unsigned char)p[n / 2] < 3
                         || (unsigned char)p[n - 1] < 3);
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

/* The first \x02 (the property pair separator) in [p, end), or end; eight bytes a step. */
static inline const char *rs_find_pair_end(const char *p, const char *end) {
    uint64_t w, m;
    while (end - p >= 8) {
        memcpy(&w, p, 8);
        w ^= 0x0202020202020202ULL;
        m = (w - 0x0101010101010101ULL) & ~w & 0x8080808080808080ULL;
        if (m)                          /* exact for the lowest byte that matched */
            return p + (__builtin_ctzll(m) >> 3);
        p += 8;
    }
    while (p < end && p[0] != 2)
        p++;
    return p;
}

/* The first ' ' in [s, e), or e; reads 8 bytes at a time while below readable_end. */
static inline const char *rs_find_space(const char *s, const char *e,
                                        const char *readable_end) {
    while (s < e) {
        if (s + 8 <= readable_end) {
            uint64_t w = rs_load_le64(s) ^ 0x2020202020202020ULL;
            uint64_t m = (w - 0x0101010101010101ULL) & ~w & 0x8080808080808080ULL;
            if (m) {
                s += rs_first_byte(m);
                return s < e ? s : e;
            }
            s += 8;
        } else {
            if (*s == ' ') return s;
            s++;
        }
    }
    return e;
}

/* Bit k of *seps: byte k of the 64 at p is \x01 or \x02; of *high: it is >= 0x80. */
#if defined(__SSE2__)
static inline void rs_scan64(const char *p, uint64_t *seps, uint64_t *high) {
    const __m128i one = _mm_set1_epi8(1), two = _mm_set1_epi8(2);
    uint64_t a = 0, h = 0;
    int k;
    for (k = 0; k < 4; k++) {
        __m128i x = _mm_loadu_si128((const __m128i *)(p + 16 * k));
        __m128i e = _mm_or_si128(_mm_cmpeq_epi8(x, one), _mm_cmpeq_epi8(x, two));
        a |= (uint64_t)(uint32_t)_mm_movemask_epi8(e) << (16 * k);
        h |= (uint64_t)(uint32_t)_mm_movemask_epi8(x) << (16 * k);
    }
    *seps = a;
    *high = h;
}
#else
static inline void rs_scan64(const char *p, uint64_t *seps, uint64_t *high) {
    uint64_t a = 0, h = 0;
    int k;
    for (k = 0; k < 64; k++) {
        unsigned char b = (unsigned char)p[k];
        a |= (uint64_t)(b == 1 || b == 2) << k;
        h |= (uint64_t)(b >= 0x80) << k;
    }
    *seps = a;
    *high = h;
}
#endif

/* 1 when the n <= 16 bytes at p are ASCII, judged from two 8-byte loads (p + 16 must
   not pass readable_end); 0: not known (longer, near the end, or non-ASCII). */
static inline int rs_ascii16(const char *p, int32_t n, const char *readable_end) {
    uint64_t a, b;
    if (n > 16 || p + 16 > readable_end)
        return 0;
    memcpy(&a, p, 8);
    memcpy(&b, p + 8, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    a = __builtin_bswap64(a);
    b = __builtin_bswap64(b);
#endif
    if (n < 8) {
        a &= (((uint64_t)1) << (8 * n)) - 1;
        b = 0;
    } else if (n < 16) {
        b &= n == 8 ? 0 : (((uint64_t)1) << (8 * (n - 8))) - 1;
    }
    return ((a | b) & 0x8080808080808080ULL) == 0;
}

/* n bytes from src to dst as 32-byte blocks: up to 31 bytes past n are read and written
   (the caller guarantees both are there). */
static inline void rs_copy32s(char *dst, const char *src, int64_t n) {
    int64_t k;
    for (k = 0; k < n; k += 32)
        memcpy(dst + k, src + k, 32);
}

#endif
