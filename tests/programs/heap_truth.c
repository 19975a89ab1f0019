/* Ground truth for the heap analysis (issue 3), compared with heaptrack_print on the same binary.
 *   churn():     N short-lived allocations of 16..79 bytes, each freed at once (all temporary)
 *   leak_some(): 20,000 calloc(1, 100), never freed (2,000,000 bytes leaked)
 *   grow():      a buffer grown by realloc in 1,000 steps of 64 bytes, then freed
 * Usage: heap_truth [N]   (N defaults to 2,000,000)
 * Build: gcc -O2 -g (no frame pointers needed); the board runs a stripped copy. */
#include <stdlib.h>

static void *volatile sink;

/* noipa: no clones (churn.constprop.0) and no inlining, so each site has one plain name. */
__attribute__((noipa)) void churn(long n) {
    for (long i = 0; i < n; i++) {
        char *p = malloc(16 + (size_t)(i % 64)); /* LINE:churn */
        if (!p) abort();
        p[0] = (char)i;
        __asm__ volatile("" : : "r"(p) : "memory"); /* p escapes: the pair is not elided */
        free(p);
    }
}

__attribute__((noipa)) void leak_some(int n) {
    for (int i = 0; i < n; i++) {
        sink = calloc(1, 100); /* LINE:leak */
    }
}

__attribute__((noipa)) long grow(int steps) {
    char *buf = NULL;
    size_t cap = 0;
    for (int i = 0; i < steps; i++) {
        cap += 64;
        char *n = realloc(buf, cap); /* LINE:grow */
        if (!n) abort();
        buf = n;
        buf[cap - 1] = (char)i;
    }
    long r = buf[cap - 1];
    free(buf);
    return r;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 2000000;
    churn(n);
    leak_some(20000); /* LINE:main_leak */
    return grow(1000) == (char)999 ? 0 : 1;
}
