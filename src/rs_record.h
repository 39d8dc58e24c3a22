/* Checks of CommitLog record fields that the body CRC does not cover, and the search for the
 * next record after damage (resynchronisation). */
#ifndef RS_RECORD_H
#define RS_RECORD_H
#include <stdint.h>
#include <string.h>

/* RocketMQ's topic characters: [%|a-zA-Z0-9_-] (TopicValidator). */
static const unsigned char rs_topic_chars[256] = {
    ['%'] = 1, ['|'] = 1, ['_'] = 1, ['-'] = 1,
    ['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1,
    ['5'] = 1, ['6'] = 1, ['7'] = 1, ['8'] = 1, ['9'] = 1,
    ['a'] = 1, ['b'] = 1, ['c'] = 1, ['d'] = 1, ['e'] = 1, ['f'] = 1, ['g'] = 1,
    ['h'] = 1, ['i'] = 1, ['j'] = 1, ['k'] = 1, ['l'] = 1, ['m'] = 1, ['n'] = 1,
    ['o'] = 1, ['p'] = 1, ['q'] = 1, ['r'] = 1, ['s'] = 1, ['t'] = 1, ['u'] = 1,
    ['v'] = 1, ['w'] = 1, ['x'] = 1, ['y'] = 1, ['z'] = 1,
    ['A'] = 1, ['B'] = 1, ['C'] = 1, ['D'] = 1, ['E'] = 1, ['F'] = 1, ['G'] = 1,
    ['H'] = 1, ['I'] = 1, ['J'] = 1, ['K'] = 1, ['L'] = 1, ['M'] = 1, ['N'] = 1,
    ['O'] = 1, ['P'] = 1, ['Q'] = 1, ['R'] = 1, ['S'] = 1, ['T'] = 1, ['U'] = 1,
    ['V'] = 1, ['W'] = 1, ['X'] = 1, ['Y'] = 1, ['Z'] = 1,
};

/* 1 when the n bytes at p are a legal topic (1..127 of the characters above). */
static inline int rs_topic_legal(const char *p, int32_t n) {
    int32_t i;
    if (n <= 0 || n > 127)
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
