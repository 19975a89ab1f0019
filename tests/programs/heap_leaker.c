/* Ground truth for rec's bounded memory on a leaking daemon (tests/tests/heap_bounded.rs):
 * heap_leaker SECS RATE allocates about RATE blocks a second for SECS seconds (block i:
 * leak_size(i) bytes, allocated by leak_one) and keeps them all, then frees the even-numbered
 * ones (in release, from the last to the first, at the same pace) and exits with the odd-numbered ones still
 * live. It prints "allocated N leaked M BYTES" on stdout: the counts the report must give.
 * The pointer table is mmap'ed and the output written with write(2), so that the only
 * malloc calls are those counted here. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static size_t leak_size(long i) { return 16 + (size_t)(i % 7) * 8; }

__attribute__((noinline)) void *leak_one(long i) { return malloc(leak_size(i)); }

__attribute__((noinline)) void release(void *p) { free(p); }

int main(int argc, char **argv) {
    long secs = argc > 1 ? atol(argv[1]) : 3;
    long rate = argc > 2 ? atol(argv[2]) : 100000;
    long cap = secs * rate + rate;
    void **blocks = mmap(0, (size_t)cap * sizeof *blocks, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (blocks == MAP_FAILED) return 1;
    struct timespec start, now, pause = {0, 1000000};
    clock_gettime(CLOCK_MONOTONIC, &start);
    long n = 0;
    for (;;) {
        for (long k = 0; k < rate / 1000 && n < cap; k++, n++) blocks[n] = leak_one(n);
        nanosleep(&pause, 0);
        clock_gettime(CLOCK_MONOTONIC, &now);
        long ms = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
        if (ms >= secs * 1000 || n >= cap) break;
    }
    long leaked = 0, bytes = 0;
    for (long i = n - 1; i >= 0; i--) {
        if (i % 2 == 0) {
            release(blocks[i]);
        } else {
            leaked++;
            bytes += (long)leak_size(i);
        }
        /* At the allocations' pace: a daemon, not a burst at exit. */
        if (i % (2 * (rate / 1000 + 1)) == 0) nanosleep(&pause, 0);
    }
    char line[96];
    int len = snprintf(line, sizeof line, "allocated %ld leaked %ld %ld\n", n, leaked, bytes);
    return write(1, line, (size_t)len) == len ? 0 : 1;
}
