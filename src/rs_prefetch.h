/* Cache prefetch hints: a prefetch never faults, so the addresses need not be mapped. */
#ifndef RS_PREFETCH_H
#define RS_PREFETCH_H

/* the cache line at p, for reading */
static inline void rs_prefetch(const char *p) { __builtin_prefetch(p, 0); }
/* the cache line at p, for writing */
static inline void rs_prefetch_w(const char *p) { __builtin_prefetch(p, 1); }
/* the cache lines [p, p + 256), for reading */
static inline void rs_prefetch256(const char *p) {
    __builtin_prefetch(p); __builtin_prefetch(p + 64);
    __builtin_prefetch(p + 128); __builtin_prefetch(p + 192);
}

#endif
