/* CRC-32 (IEEE 802.3, zlib's crc32): what RocketMQ's UtilAll.crc32 computes for BODYCRC. */
#ifndef RS_CRC32_H
#define RS_CRC32_H
#include <stddef.h>
#include <stdint.h>

/* Fills the tables once; idempotent. Call before the first rs_crc32 (module init does). */
void rs_crc32_init(void);
/* Continues crc over buf[0:len]; start with crc = 0. Same result as zlib.crc32(buf, crc). */
uint32_t rs_crc32(uint32_t crc, const void *buf, size_t len);
/* Which implementation runs here: "pclmul", "armv8-crc" or "slicing-by-16". */
const char *rs_crc32_impl(void);

#endif
