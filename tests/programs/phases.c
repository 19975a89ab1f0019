/* Ground truth for time and thread filters: work whose phases are known in time.
 *
 * main() runs, one after the other (MS milliseconds each, by the monotonic clock):
 *   phase_a: spins; halfway through, alloc_a() makes 1000 blocks of 100 bytes and keeps them;
 *   phase_b: spins; halfway through, alloc_b() makes 500 temporary blocks of 64 bytes (each
 *            freed at once), 50 blocks of 200 bytes it never frees, frees alloc_a's blocks,
 *            and touch_b() writes to each of the 1024 pages of a 4 MiB anonymous mapping
 *            (transparent huge pages off): 1024 minor faults;
 *   phase_c: sleeps MS/2 milliseconds (off-CPU).
 * A second thread, "sleeper", is blocked in wait_forever() on a pipe from main()'s start until
 * main() writes to it at the end.
 *
 * Allocations and page touches happen halfway through their phase, far from its edges. The
 * program prints (to stderr, unbuffered: stdio allocates nothing) the CLOCK_MONOTONIC times,
 * the clock rec stamps events with, of each edge: "phases START AB BC END SLEEPER_TID".
 * Usage: phases [MS] */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile uint64_t sink;
static void *kept[1000];
static int pipe_fd[2];
static volatile long sleeper_tid;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Spins until `until` (ns, monotonic); reads the clock every 100,000 steps. */
static inline __attribute__((always_inline)) void spin_until(uint64_t until) {
    uint64_t x = sink;
    while (now_ns() < until)
        for (int i = 0; i < 100000; i++) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    sink = x;
}

__attribute__((noinline)) static void alloc_a(void) {
    for (int i = 0; i < 1000; i++) kept[i] = malloc(100);
}

__attribute__((noinline)) static void touch_b(void) {
    size_t size = 4UL << 20;
    volatile char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) exit(3);
    if (madvise((void *)p, size, MADV_NOHUGEPAGE) != 0 && errno != EINVAL) exit(4);
    for (size_t i = 0; i < size; i += 4096) p[i] = 1;
}

__attribute__((noinline)) static void alloc_b(void) {
    for (int i = 0; i < 500; i++) {
        void *t = malloc(64);
        sink += (uintptr_t)t;
        free(t);
    }
    for (int i = 0; i < 50; i++) sink += (uintptr_t)malloc(200);
    for (int i = 0; i < 1000; i++) free(kept[i]);
    touch_b();
}

__attribute__((noinline)) static void phase_a(uint64_t start, uint64_t ms) {
    spin_until(start + ms * 500000ULL);
    alloc_a();
    spin_until(start + ms * 1000000ULL);
}

__attribute__((noinline)) static void phase_b(uint64_t start, uint64_t ms) {
    spin_until(start + ms * 500000ULL);
    alloc_b();
    spin_until(start + ms * 1000000ULL);
}

__attribute__((noinline)) static void phase_c(uint64_t ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void wait_forever(void) {
    char c;
    while (read(pipe_fd[0], &c, 1) < 0 && errno == EINTR) {
    }
    __asm__ volatile("" ::: "memory");
}

static void *sleeper(void *arg) {
    (void)arg;
    pthread_setname_np(pthread_self(), "sleeper");
    sleeper_tid = syscall(SYS_gettid);
    wait_forever();
    return NULL;
}

int main(int argc, char **argv) {
    uint64_t ms = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000;
    if (pipe(pipe_fd) != 0) return 2;
    pthread_t t;
    if (pthread_create(&t, NULL, sleeper, NULL) != 0) return 2;
    while (!sleeper_tid) sched_yield();
    uint64_t start = now_ns();
    phase_a(start, ms);
    uint64_t ab = now_ns();
    phase_b(ab, ms);
    uint64_t bc = now_ns();
    phase_c(ms / 2);
    uint64_t end = now_ns();
    if (write(pipe_fd[1], "x", 1) != 1) return 2;
    pthread_join(t, NULL);
    char line[160];
    int n = snprintf(line, sizeof line, "phases %llu %llu %llu %llu %ld\n", (unsigned long long)start,
                     (unsigned long long)ab, (unsigned long long)bc, (unsigned long long)end,
                     (long)sleeper_tid);
    if (write(2, line, (size_t)n) != n) return 2;
    return 0;
}
