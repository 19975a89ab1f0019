/* Ground truth for a long, bounded heap recording (tests/tests/heap_max_size.rs):
 * heap_ring SECONDS K LEAKS keeps a ring of K live blocks (slot i: ring_size(i) bytes,
 * allocated by ring_slot), replacing one slot after another (free, then malloc of the same
 * size) about 100000 times a second, after leaking LEAKS blocks (block i: 1000 + i bytes,
 * allocated by leak_some) at the start. At any moment the live set is the LEAKS leaked
 * blocks and K ring blocks (K - 1 between a slot's free and its malloc). */
#include <stdlib.h>
#include <time.h>

static size_t ring_size(long i) { return 32 + (size_t)(i * 37 % 200); }

__attribute__((noinline)) void *ring_slot(long i) { return malloc(ring_size(i)); }

__attribute__((noinline)) void *leak_some(long i) { return malloc(1000 + (size_t)i); }

int main(int argc, char **argv) {
    long secs = argc > 1 ? atol(argv[1]) : 10;
    long k = argc > 2 ? atol(argv[2]) : 1000;
    long leaks = argc > 3 ? atol(argv[3]) : 50;
    volatile void *keep;
    for (long i = 0; i < leaks; i++) keep = leak_some(i);
    (void)keep;
    void **ring = calloc((size_t)k, sizeof *ring);
    for (long i = 0; i < k; i++) ring[i] = ring_slot(i);
    struct timespec start, now, pause = {0, 1000000};
    clock_gettime(CLOCK_MONOTONIC, &start);
    long slot = 0;
    for (;;) {
        for (int n = 0; n < 100; n++) {
            free(ring[slot]);
            ring[slot] = ring_slot(slot);
            slot = (slot + 1) % k;
        }
        nanosleep(&pause, 0);
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - start.tv_sec >= secs) break;
    }
    for (long i = 0; i < k; i++) free(ring[i]);
    free(ring);
    return 0;
}
