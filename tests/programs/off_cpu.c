/* Ground truth for off-CPU time. The main thread runs ITERATIONS rounds of: burn() spins for
 * 10 ms, then nap() sleeps 30 ms; so nap() is off-CPU 75% of the thread's wall time. burn()
 * spins by the wall clock, so on a busy machine its preemptions stay in its own 10 ms. A second thread, waiter(), spins 5 ms of its own CPU time (so that CPU samples see its stack
 * however busy the machine: a wall-clock spin may end before the thread ever runs) and then
 * blocks in wait_for_go() on a condition variable until main() signals it after the last
 * round: its wait is the length of the run.
 * A nap that oversleeps (the machine is busy) is longer than 30 ms; the program prints what it
 * measured itself: "nap_ns N run_ns M wait_ns W" (time in nap(), time from the start of main
 * to the waiter's release, time the waiter spent in wait_for_go(): on a busy machine, or an
 * emulated board, the waiter's start and its spin take a share of the run no test can assume).
 * Usage: off_cpu [ITERATIONS] */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int go = 0;
static volatile uint64_t sink;
static uint64_t nap_total_ns;
static uint64_t wait_total_ns;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Spins until `until_ns` on the monotonic clock. */
__attribute__((noinline)) static void burn(uint64_t until_ns) {
    uint64_t x = 1;
    while (now_ns() < until_ns)
        for (int i = 0; i < 100; i++) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    sink = x;
}

/* Spins until this thread has used `ns` of CPU time. */
__attribute__((noinline)) static void spin_cpu(uint64_t ns) {
    struct timespec ts;
    uint64_t x = 1, used = 0;
    while (used < ns) {
        /* Long user-mode stretches between clock reads: the clock is a system call, and an
         * unprivileged recording (exclude_kernel) drops the samples that land in it. */
        for (int i = 0; i < 100000; i++) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        used = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
    }
    sink = x;
}

__attribute__((noinline)) static void nap(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void wait_for_go(void) {
    pthread_mutex_lock(&lock);
    while (!go) pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void *waiter(void *arg) {
    (void)arg;
    spin_cpu(5000000ULL);
    uint64_t t = now_ns();
    wait_for_go();
    wait_total_ns = now_ns() - t;
    __asm__ volatile("" ::: "memory");
    return NULL;
}

/* Round i burns until 40*i + 10 ms after the start: a round that began late (its nap overslept,
 * or burn() was preempted just before its end) burns less, so rounds keep their 40 ms. */
__attribute__((noinline)) static void work_loop(long iterations) {
    uint64_t start = now_ns();
    for (long i = 0; i < iterations; i++) {
        burn(start + (uint64_t)(40 * i + 10) * 1000000ULL);
        uint64_t t = now_ns();
        nap(30);
        nap_total_ns += now_ns() - t;
    }
}

int main(int argc, char **argv) {
    uint64_t start = now_ns();
    long iterations = argc > 1 ? atol(argv[1]) : 50;
    pthread_t t;
    pthread_create(&t, NULL, waiter, NULL);
    work_loop(iterations);
    pthread_mutex_lock(&lock);
    go = 1;
    pthread_cond_signal(&cond);
    pthread_mutex_unlock(&lock);
    uint64_t run = now_ns() - start;
    pthread_join(t, NULL);
    printf("nap_ns %llu run_ns %llu wait_ns %llu\n", (unsigned long long)nap_total_ns,
           (unsigned long long)run, (unsigned long long)wait_total_ns);
    return 0;
}
