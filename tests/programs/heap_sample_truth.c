/* Ground truth for sampled heap mode (rec --heap-sample): three sites of known allocations.
 *   small():  400,000 malloc(32), each freed at once   (12,800,000 bytes)
 *   medium(): 20,000 malloc(4096), never freed         (81,920,000 bytes leaked)
 *   large():  200 malloc(1 MiB), each freed at once     (209,715,200 bytes)
 * Build: gcc -O2 -g. */
#include <stdlib.h>

static void *volatile sink;

__attribute__((noipa)) void small(void) {
    for (int i = 0; i < 400000; i++) {
        char *p = malloc(32);
        if (!p) abort();
        __asm__ volatile("" : : "r"(p) : "memory");
        free(p);
    }
}

__attribute__((noipa)) void medium(void) {
    for (int i = 0; i < 20000; i++) {
        sink = malloc(4096);
    }
}

__attribute__((noipa)) void large(void) {
    for (int i = 0; i < 200; i++) {
        char *p = malloc(1 << 20);
        if (!p) abort();
        __asm__ volatile("" : : "r"(p) : "memory");
        free(p);
    }
}

int main(void) {
    small();
    medium();
    large();
    return 0;
}
