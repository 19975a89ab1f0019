/* Ground truth for comparing off-CPU recordings: two threads, each LOOPS rounds of a little
 * work (burn(): 2 ms of its own CPU time) then a sleep: thread "waiter_a" sleeps A_MS in
 * nap_a(), thread "waiter_b" B_MS in nap_b(). `wait_split 10 10 40` then `wait_split 30 10 40`:
 * nap_a's waits grow from 10 to 30 ms each (400 to 1200 ms in all), nap_b's do not change.
 * The main thread only waits for both in pthread_join(). A loaded machine oversleeps; the
 * program prints what each thread measured in its naps: "nap_a_ns N nap_b_ns M".
 * Usage: wait_split A_MS B_MS LOOPS */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile uint64_t sink;
static long loops;

static uint64_t clock_ns(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Spins until this thread has used `ns` more of CPU time. */
__attribute__((noinline)) static void burn(uint64_t ns) {
    uint64_t x = 1, until = clock_ns(CLOCK_THREAD_CPUTIME_ID) + ns;
    while (clock_ns(CLOCK_THREAD_CPUTIME_ID) < until)
        for (int i = 0; i < 10000; i++) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    sink = x;
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

__attribute__((noinline)) static void nap_a(long ms) {
    sleep_ms(ms);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void nap_b(long ms) {
    sleep_ms(ms);
    __asm__ volatile("" ::: "memory");
}

struct job {
    const char *name;
    long ms;
    void (*nap)(long);
    uint64_t napped_ns;
};

__attribute__((noinline)) static void *waiter(void *arg) {
    struct job *j = arg;
    pthread_setname_np(pthread_self(), j->name);
    for (long i = 0; i < loops; i++) {
        burn(2000000ULL);
        uint64_t t = clock_ns(CLOCK_MONOTONIC);
        j->nap(j->ms);
        j->napped_ns += clock_ns(CLOCK_MONOTONIC) - t;
    }
    __asm__ volatile("" ::: "memory");
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 4) return 2;
    struct job a = {"waiter_a", atol(argv[1]), nap_a, 0};
    struct job b = {"waiter_b", atol(argv[2]), nap_b, 0};
    loops = atol(argv[3]);
    pthread_t ta, tb;
    pthread_create(&ta, NULL, waiter, &a);
    pthread_create(&tb, NULL, waiter, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    printf("nap_a_ns %llu nap_b_ns %llu\n", (unsigned long long)a.napped_ns,
           (unsigned long long)b.napped_ns);
    return 0;
}
