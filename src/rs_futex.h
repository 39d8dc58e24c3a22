/* A generation word that threads sleep on (Linux futex): waiters need no mutex to take again
 * on wake-up. */
#ifndef RS_FUTEX_H
#define RS_FUTEX_H
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Sleep while *addr == seen, at most rel (NULL: no limit); spurious wake-ups happen. */
static inline void rs_futex_wait(int *addr, int seen, const struct timespec *rel) {
    syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, seen, rel, NULL, 0);
}
/* Advance the generation and wake every thread sleeping on it. */
static inline void rs_futex_bump_and_wake(int *addr) {
    __atomic_add_fetch(addr, 1, __ATOMIC_ACQ_REL);
    syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}
/* Advance the generation and wake at most n threads sleeping on it. */
static inline void rs_futex_bump_and_wake_n(int *addr, int n) {
    __atomic_add_fetch(addr, 1, __ATOMIC_ACQ_REL);
    syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}
/* Wake at most n threads sleeping on addr (the generation stays). */
static inline void rs_futex_wake(int *addr, int n) {
    syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

#endif
