/* The allocation-heavy workload of issue 3 (ground truth and benchmark):
 *   short_lived: N short-lived allocations of 16..79 bytes, each freed at once (temporary);
 *   leak_some:   20,000 leaked calloc(1, 100);
 *   grow:        a realloc loop growing one buffer 8 bytes at a time, 10,000 steps, freed.
 * Usage: heap_bench [N]   (default 2,000,000) */
#include <stdlib.h>
#include <string.h>

static void *volatile sink;

__attribute__((noinline)) void short_lived(long n) {
    for (long i = 0; i < n; i++) {
        char *p = malloc(16 + i % 64); /* LINE:short_lived */
        p[0] = (char)i;
        sink = p;
        free(p);
    }
}

__attribute__((noinline)) void leak_some(void) {
    for (int i = 0; i < 20000; i++) sink = calloc(1, 100); /* LINE:leak_some */
}

__attribute__((noinline)) void grow(void) {
    char *buf = NULL;
    for (int i = 1; i <= 10000; i++) {
        buf = realloc(buf, (size_t)i * 8); /* LINE:grow */
        buf[0] = 1;
    }
    sink = buf;
    free(buf);
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 2000000;
    short_lived(n);
    leak_some();
    grow();
    return 0;
}
