/* Ground truth for heap events at their own times (the Firefox export's allocation tracks).
 *   spin():   first, a thread "spinner" spins SPIN milliseconds of its own CPU time while
 *             main() waits for it, so that the first CPU samples come from a thread other than
 *             the allocating one (CPU time, not wall time: a loaded machine would give a
 *             wall-clock spin too little CPU for any sample);
 *   spaced(): N blocks, block i of 1000 + i bytes, one every 10 ms (so that each lands on its own
 *             tick of the coarse clock the interposer stamps events with), then frees blocks
 *             N-1 down to 1, one every 10 ms; block 0 (1000 bytes) is never freed.
 *   bulk():   M pairs of malloc(24) and free, for the export's sampling rule.
 * Usage: heap_times [N] [M] [SPIN]   (N defaults to 30, M and SPIN to 0)
 * Build: gcc -O2 -g; the board runs a stripped copy. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

static void *volatile sink;

static void pause_ms(long ms) {
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

/* Milliseconds of this thread's CPU time. */
static uint64_t cpu_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void *spin(void *arg) {
    uint64_t until = cpu_ms() + (uint64_t)(long)arg;
    volatile uint64_t x = 1;
    while (cpu_ms() < until)
        for (int i = 0; i < 100000; i++) x = x * 6364136223846793005ULL + 1;
    return NULL;
}

/* noipa: no clones and no inlining, so each site has one plain name. */
__attribute__((noipa)) void spaced(int n) {
    void **blocks = calloc((size_t)n, sizeof *blocks);
    if (!blocks) abort();
    for (int i = 0; i < n; i++) {
        pause_ms(10);
        blocks[i] = malloc(1000 + (size_t)i); /* LINE:spaced */
        if (!blocks[i]) abort();
        sink = blocks[i];
    }
    for (int i = n - 1; i >= 1; i--) {
        pause_ms(10);
        free(blocks[i]);
    }
    sink = blocks[0];
    free(blocks);
}

__attribute__((noipa)) void bulk(long m) {
    for (long i = 0; i < m; i++) {
        char *p = malloc(24); /* LINE:bulk */
        if (!p) abort();
        p[0] = (char)i;
        __asm__ volatile("" : : "r"(p) : "memory"); /* p escapes: the pair is not elided */
        free(p);
    }
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 30;
    long m = argc > 2 ? atol(argv[2]) : 0;
    long spin_ms = argc > 3 ? atol(argv[3]) : 0;
    if (spin_ms > 0) {
        /* Created before any of spaced()'s allocations; its stack is mmap'd, not malloc'd. */
        pthread_t t;
        if (pthread_create(&t, NULL, spin, (void *)spin_ms) != 0) abort();
        pthread_setname_np(t, "spinner");
        pthread_join(t, NULL);
    }
    spaced(n);
    bulk(m);
    return 0;
}
