/* Hex text of ids (offsetMsgId, UNIQ_KEY: upper case) and IPv6 groups (lower case). */
#ifndef RS_HEX_H
#define RS_HEX_H
#include <stddef.h>
#include <stdint.h>
#if defined(__SSE2__) && defined(__x86_64__)
#include <emmintrin.h>
#endif

static const char rs_hex_upper_digits[17] = "0123456789ABCDEF";
static const char rs_hex_lower_digits[17] = "0123456789abcdef";

/* The 2 * n upper-case hex digits of p[0:n] into out. */
static inline void rs_hex_upper(char *out, const unsigned char *p, size_t n) {
    size_t i;
    for (i = 0; i < n; i++) {
        out[2 * i] = rs_hex_upper_digits[p[i] >> 4];
        out[2 * i + 1] = rs_hex_upper_digits[p[i] & 15];
    }
}

/* The 16 upper-case hex digits of v, most significant first. */
static inline void rs_hex16(char *out, uint64_t v) {
#if defined(__SSE2__) && defined(__x86_64__)
    __m128i x = _mm_cvtsi64_si128((long long)__builtin_bswap64(v));
    __m128i mask = _mm_set1_epi8(0x0F);
    __m128i n = _mm_unpacklo_epi8(_mm_and_si128(_mm_srli_epi16(x, 4), mask),
                                  _mm_and_si128(x, mask));
    __m128i letters = _mm_and_si128(_mm_cmpgt_epi8(n, _mm_set1_epi8(9)),
                                    _mm_set1_epi8('A' - '0' - 10));
    _mm_storeu_si128((__m128i *)out,
                     _mm_add_epi8(_mm_add_epi8(n, _mm_set1_epi8('0')), letters));
#else
    int i;
    for (i = 0; i < 16; i++) {
        unsigned d = (unsigned)(v >> (60 - 4 * i)) & 15;
        out[i] = (char)(d < 10 ? '0' + d : 'A' + d - 10);
    }
#endif
}

#endif
