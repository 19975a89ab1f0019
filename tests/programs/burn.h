/* The busy loop of the CPU ground-truth programs (cpu_phases.c, system_load.c), and the
 * clock they time it with.
 *
 * SPIN is a macro, not a function, so that its instructions (and their line in the debug
 * info) belong to the function and the line that use it, as the tests expect. */
#ifndef CROSSPROF_BURN_H
#define CROSSPROF_BURN_H

#include <time.h>

/* Where the loop's result goes at the end, so the compiler keeps the loop. */
static volatile unsigned long sink;

/* Seconds on `clock` (CLOCK_MONOTONIC, CLOCK_THREAD_CPUTIME_ID, ...). */
static double now(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Arithmetic the compiler cannot drop, on an unsigned long `x`; 200,000 rounds take well
 * under a millisecond. */
#define SPIN(x)                                                    \
    for (int i = 0; i < 200000; i++) {                             \
        x = x * 6364136223846793005UL + 1442695040888963407UL;     \
        x ^= x >> 29;                                              \
    }

#endif
