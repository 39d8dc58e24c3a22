/* Checks of CommitLog record fields that the body CRC does not cover, and the search for the
 * next record after damage (resynchronisation). */
#ifndef RS_RECORD_H
#define RS_RECORD_H
#include <stdint.h>
#include <string.h>

#include "rs_vocabulary.h"

/* RocketMQ's topic characters (TopicValidator), from rocketstore/common/topics.py. */
static const unsigned char rs_topic_chars[256] = { RS_TOPIC_CHAR_INITIALIZERS };

/* 1 when the n bytes at p are a legal topic (1..RS_MAX_TOPIC_LENGTH of the characters above). */
static inline int rs_topic_legal(const char *p, int32_t n) {
    int32_t i;
    if (n <= 0 || n > RS_MAX_TOPIC_LENGTH)
        return 0;
    for (i = 0; i < n; i++)
        if (!rs_topic_chars[(unsigned char)p[i]])
            return 0;
    return 1;
}

/* 1 when the n bytes at a and at b are equal; short runs (topics) compare with at most two
 * overlapping loads a side, never outside [a, a + n) and [b, b + n). */
static inline int rs_short_equal(const char *a, const char *b, int32_t n) {
    uint64_t x, y, u, v;
    uint32_t s, t, w, z;
    if (n >= 8) {
        if (n > 16)
            return memcmp(a, b, (size_t)n) == 0;
        memcpy(&x, a, 8); memcpy(&y, b, 8);
        memcpy(&u, a + n - 8, 8); memcpy(&v, b + n - 8, 8);
        return ((x ^ y) | (u ^ v)) == 0;
    }
    if (n >= 4) {
        memcpy(&s, a, 4); memcpy(&t, b, 4);
        memcpy(&w, a + n - 4, 4); memcpy(&z, b + n - 4, 4);
        return ((s ^ t) | (w ^ z)) == 0;
    }
    while (n-- > 0)
        if (a[n] != b[n])
            return 0;
    return 1;
}

/* The first position in [p, p + n) holding byte a or byte b, or n when there is none. Reads
 * 8 bytes at a time (zero-filled regions, the common case, go at memory speed). */
static inline int64_t rs_find_either_byte(const char *p, int64_t n, unsigned char a,
                                          unsigned char b) {
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    const uint64_t pa = ones * a, pb = ones * b;
    int64_t i = 0;
    while (i + 8 <= n) {
        uint64_t w, x, y, m;
        memcpy(&w, p + i, 8);
        x = w ^ pa;
        y = w ^ pb;
        m = ((x - ones) & ~x & highs) | ((y - ones) & ~y & highs);
        if (m) {
            int64_t k;
            for (k = 0; k < 8; k++) {   /* the exact first one (the trick may over-report) */
                unsigned char c = (unsigned char)p[i + k];
                if (c == a || c == b)
                    return i + k;
            }
        }
        i += 8;
    }
    for (; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c == a || c == b)
            return i;
    }
    return n;
}

#endif
