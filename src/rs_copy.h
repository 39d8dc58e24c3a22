/* Copies of a few bytes without a call: record fields (topic, property names and values)
 * are mostly shorter than 32 bytes, where memcpy's call and size dispatch cost more than
 * the copy. */
#ifndef RS_COPY_H
#define RS_COPY_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* dst[0:n] = src[0:n] (no overlap): two overlapping moves of the largest size <= n up to
 * 32 bytes, memcpy beyond. */
static inline void rs_copy_small(char *dst, const char *src, size_t n) {
    if (n >= 8) {
        if (n <= 16) {
            uint64_t a, b;
            memcpy(&a, src, 8);
            memcpy(&b, src + n - 8, 8);
            memcpy(dst, &a, 8);
            memcpy(dst + n - 8, &b, 8);
        } else if (n <= 32) {
            char a[16], b[16];
            memcpy(a, src, 16);
            memcpy(b, src + n - 16, 16);
            memcpy(dst, a, 16);
            memcpy(dst + n - 16, b, 16);
        } else {
            memcpy(dst, src, n);
        }
    } else if (n >= 4) {
        uint32_t a, b;
        memcpy(&a, src, 4);
        memcpy(&b, src + n - 4, 4);
        memcpy(dst, &a, 4);
        memcpy(dst + n - 4, &b, 4);
    } else if (n >= 2) {
        uint16_t a, b;
        memcpy(&a, src, 2);
        memcpy(&b, src + n - 2, 2);
        memcpy(dst, &a, 2);
        memcpy(dst + n - 2, &b, 2);
    } else if (n == 1) {
        dst[0] = src[0];
    }
}

#endif
