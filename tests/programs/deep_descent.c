/* Ground truth for joining stacks the stack copy cut short (issue 24): one thread descends a
 * recursion DEPTH levels deep, spinning the same work at every level on the way down, so its
 * samples fall evenly on every depth and their stacks are exactly
 *   spin <- descend (k times, 1 <= k <= DEPTH) <- run <- main
 * Each level's frame is about 80 bytes, so the deepest stacks are far larger than a stack
 * copy: only a join with the same descent's shallower samples completes them. The depth of
 * the samples is uniform, so the mean k is (DEPTH + 1) / 2.
 * Usage: deep_descent CPU_SECONDS: whole descents until the process has used that much CPU
 * time (at least one), so that a sampler gets the same number of samples on a fast machine, a
 * slow one or a loaded one. */
#include <stdlib.h>
#include <time.h>

#define DEPTH 1000
#define SPIN 80000UL

__attribute__((noinline)) void spin(unsigned long n) {
    for (volatile unsigned long i = 0; i < n; i++) {
    }
}

__attribute__((noinline)) int descend(int level) {
    volatile char pad[64];
    pad[0] = (char)level;
    spin(SPIN);
    int r = level < DEPTH ? descend(level + 1) : 0;
    return r + pad[0];
}

__attribute__((noinline)) void run(void) {
    descend(1);
    __asm__ volatile("");
}

static double cpu_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 1.0;
    do {
        run();
    } while (cpu_seconds() < seconds);
    return 0;
}
