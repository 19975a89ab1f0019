/* Ground truth for heap events at their own times (the Firefox export's allocation tracks).
 *   spaced(): N blocks, block i of 1000 + i bytes, one every 10 ms (so that each lands on its own
 *             tick of the coarse clock the interposer stamps events with), then frees blocks
 *             N-1 down to 1, one every 10 ms; block 0 (1000 bytes) is never freed.
 *   bulk():   M pairs of malloc(24) and free, for the export's sampling rule.
 * Usage: heap_times [N] [M]   (N defaults to 30, M to 0)
 * Build: gcc -O2 -g; the board runs a stripped copy. */
#include <stdlib.h>
#include <time.h>

static void *volatile sink;

static void pause_ms(long ms) {
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
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
    spaced(n);
    bulk(m);
    return 0;
}
