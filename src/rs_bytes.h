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

#endif
