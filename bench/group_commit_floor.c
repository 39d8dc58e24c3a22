/* The SYNC_FLUSH group commit of rocketstore's store, written as plainly as possible in C:
 * what threaded producers can get on this machine with no Python, no GIL and no store.
 * bench/durability.py compiles and runs it beside the store and the one-thread loop.
 *
 * usage: group_commit_floor RECORDS_FILE SIZES_FILE OUT_FILE THREADS
 *        group_commit_floor handoff N
 *   RECORDS_FILE  the records, back to back (the bytes the store wrote)
 *   SIZES_FILE    their sizes, one native uint32 each
 *   OUT_FILE      created and posix_fallocate'd (as the store's segments), then written
 *
 * THREADS producer threads each take the next record, copy it into a shared buffer under a
 * mutex and wait (futex) until a flush thread has pwritten and fdatasynced past it. Each
 * flush round takes everything copied so far. Like the store's rounds, a round after one that
 * woke more than one producer first waits for them to ask again (at most 2 ms, or 0.5 ms
 * with none asking); a finished round wakes all its producers at once (with no GIL they do
 * not queue for anything). Prints "ready" once the file and the threads are set up, starts
 * on a line from stdin, and prints one more line when done: seconds flushes records.
 *
 * "handoff N": two threads wake each other through a futex N times each way; prints the
 * one-way hand-off in microseconds with the threads placed by the scheduler (on a 2-CPU
 * machine mostly one on each CPU, the sleeper's CPU idle), then pinned to one CPU.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define FILL_MAX_S 0.002
#define FILL_GAP_S 0.0005

static const char *records;
static const uint32_t *sizes;
static size_t n_records, next_record;
static char *buffer;
static int out_fd;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_cv, fill_cv;
static int64_t copied;            /* bytes in the buffer */
static int64_t waiting;           /* producers waiting for the next round */
static int64_t arrivals;          /* producers that asked since the last round ended */
static int64_t last_riders;       /* producers the last round woke */
static double last_event;
static int producers_left;
static _Atomic int64_t flushed;   /* durable up to here */
static _Atomic int done_seq;      /* bumped at the end of each round */
static long rounds;
static pthread_barrier_t start;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void deadline(struct timespec *ts, double at) {
    ts->tv_sec = (time_t)at;
    ts->tv_nsec = (long)((at - (double)ts->tv_sec) * 1e9);
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

static void die(const char *what) {
    perror(what);
    exit(2);
}

static void *producer(void *arg) {
    (void)arg;
    static size_t offset_of_next;   /* under mu */
    pthread_barrier_wait(&start);
    for (;;) {
        pthread_mutex_lock(&mu);
        if (next_record >= n_records) {
            producers_left--;
            pthread_cond_signal(&work_cv);
            pthread_mutex_unlock(&mu);
            return NULL;
        }
        uint32_t size = sizes[next_record++];
        memcpy(buffer + copied, records + offset_of_next, size);
        offset_of_next += size;
        copied += size;
        int64_t mine = copied;
        int seen = atomic_load(&done_seq);
        waiting++;
        arrivals++;
        last_event = now();
        pthread_cond_signal(&work_cv);
        pthread_cond_signal(&fill_cv);
        pthread_mutex_unlock(&mu);
        while (atomic_load(&flushed) < mine) {
            syscall(SYS_futex, &done_seq, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
            seen = atomic_load(&done_seq);
        }
    }
}

static void *flusher(void *arg) {
    (void)arg;
    int64_t written = 0;
    for (;;) {
        pthread_mutex_lock(&mu);
        while (waiting == 0 && producers_left > 0)
            pthread_cond_wait(&work_cv, &mu);
        if (waiting == 0) {
            pthread_mutex_unlock(&mu);
            return NULL;
        }
        if (last_riders > 1) {
            double t0 = now();
            while (arrivals < last_riders && producers_left > 0) {
                double until = last_event + FILL_GAP_S;
                if (until > t0 + FILL_MAX_S)
                    until = t0 + FILL_MAX_S;
                if (now() >= until)
                    break;
                struct timespec ts;
                deadline(&ts, until);
                pthread_cond_timedwait(&fill_cv, &mu, &ts);
            }
        }
        int64_t end = copied;
        last_riders = waiting;
        waiting = 0;
        arrivals = 0;
        pthread_mutex_unlock(&mu);
        while (written < end) {
            ssize_t n = pwrite(out_fd, buffer + written, (size_t)(end - written), written);
            if (n < 0 && errno != EINTR)
                die("pwrite");
            if (n > 0)
                written += n;
        }
        if (fdatasync(out_fd) != 0)
            die("fdatasync");
        rounds++;
        pthread_mutex_lock(&mu);
        last_event = now();
        pthread_mutex_unlock(&mu);
        atomic_store(&flushed, end);
        atomic_fetch_add(&done_seq, 1);
        syscall(SYS_futex, &done_seq, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
    }
}

static void *read_file(const char *path, size_t *len) {
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0)
        die(path);
    char *p = malloc((size_t)st.st_size + 1);
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t n = read(fd, p + got, (size_t)st.st_size - got);
        if (n <= 0)
            die(path);
        got += (size_t)n;
    }
    close(fd);
    *len = got;
    return p;
}

/* Hand-off: two threads wake each other in turn through a futex, n times each way. */
static _Atomic int turn;

static void *handoff_peer(void *arg) {
    long n = *(long *)arg;
    for (long i = 0; i < n; i++) {
        while (atomic_load(&turn) != 1)
            syscall(SYS_futex, &turn, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
        atomic_store(&turn, 0);
        syscall(SYS_futex, &turn, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    }
    return NULL;
}

static double handoff_us(long n) {
    pthread_t peer;
    atomic_store(&turn, 0);
    if (pthread_create(&peer, NULL, handoff_peer, &n) != 0)
        die("pthread_create");
    double t0 = now();
    for (long i = 0; i < n; i++) {
        atomic_store(&turn, 1);
        syscall(SYS_futex, &turn, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
        while (atomic_load(&turn) != 0)
            syscall(SYS_futex, &turn, FUTEX_WAIT_PRIVATE, 1, NULL, NULL, 0);
    }
    double t = now() - t0;
    pthread_join(peer, NULL);
    return t / (double)(2 * n) * 1e6;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "handoff") == 0) {
        /* one-way hand-off in us: the threads where the scheduler puts them, then both
         * pinned to the CPU this one runs on */
        long n = atol(argv[2]);
        double free_us = handoff_us(n);
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(sched_getcpu(), &one);
        if (sched_setaffinity(0, sizeof one, &one) != 0)
            die("sched_setaffinity");
        printf("%.3f %.3f\n", free_us, handoff_us(n));
        return 0;
    }
    if (argc != 5) {
        fprintf(stderr, "usage: %s RECORDS_FILE SIZES_FILE OUT_FILE THREADS\n", argv[0]);
        return 2;
    }
    size_t records_len, sizes_len;
    records = read_file(argv[1], &records_len);
    sizes = read_file(argv[2], &sizes_len);
    n_records = sizes_len / sizeof(uint32_t);
    int threads = atoi(argv[4]);
    if (threads < 1 || threads > 4096) {
        fprintf(stderr, "THREADS must be 1..4096\n");
        return 2;
    }
    size_t total = 0;
    for (size_t i = 0; i < n_records; i++)
        total += sizes[i];
    if (total != records_len) {
        fprintf(stderr, "the sizes add up to %zu bytes, the records file has %zu\n", total,
                records_len);
        return 2;
    }
    buffer = malloc(total + 1);
    out_fd = open(argv[3], O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (out_fd < 0)
        die(argv[3]);
    off_t room = (off_t)total < (256L << 20) ? (256L << 20) : (off_t)total;
    if (posix_fallocate(out_fd, 0, room) != 0 || fsync(out_fd) != 0)
        die("posix_fallocate");

    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&work_cv, &attr);
    pthread_cond_init(&fill_cv, &attr);
    producers_left = threads;
    pthread_t flush_thread, *producer_threads = calloc((size_t)threads, sizeof(pthread_t));
    pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
    if (pthread_create(&flush_thread, NULL, flusher, NULL) != 0)
        die("pthread_create");
    for (int i = 0; i < threads; i++)
        if (pthread_create(&producer_threads[i], NULL, producer, NULL) != 0)
            die("pthread_create");
    /* the caller reads its disk counters between these two lines */
    printf("ready\n");
    fflush(stdout);
    char line[16];
    if (!fgets(line, sizeof line, stdin))
        die("stdin");
    double t0 = now();
    pthread_barrier_wait(&start);
    for (int i = 0; i < threads; i++)
        pthread_join(producer_threads[i], NULL);
    pthread_join(flush_thread, NULL);
    double seconds = now() - t0;
    if (atomic_load(&flushed) != (int64_t)total) {
        fprintf(stderr, "flushed %lld of %zu bytes\n", (long long)atomic_load(&flushed), total);
        return 1;
    }
    printf("%.6f %ld %zu\n", seconds, rounds, n_records);
    close(out_fd);
    return 0;
}
