/* The busy loop the CPU ground-truth programs split their samples with, and the clock some of
 * them time it with.
 *
 * A known CPU split must come from counted work: every function that takes a share runs BURN,
 * and they differ only in its count. Two different loops assumed to cost the same per
 * iteration give a split that holds on some processors only: forkexec.c's parent once ran a
 * register accumulator against cpu_split.c's volatile one, the same speed on one processor,
 * and took 34.7% of the samples instead of 50% on another.
 *
 * BURN is a macro, not a function, so that its instructions (and their line in the debug info)
 * belong to the function and the line that use it: the samples are that function's self
 * samples, at that line, as the tests expect. The accumulator is a volatile local so that each
 * function that burns has a stack frame: gcc sets up no frame pointer in a leaf function that
 * uses no stack, even with -fno-omit-frame-pointer, and the kernel's frame-pointer walk then
 * skips that function's caller. */
#ifndef CROSSPROF_BURN_H
#define CROSSPROF_BURN_H

#include <stdint.h>
#include <time.h>

/* Where each loop's result goes at the end, so the compiler keeps the loop. */
static volatile uint64_t sink __attribute__((unused));

/* Seconds on `clock` (CLOCK_MONOTONIC, CLOCK_THREAD_CPUTIME_ID, ...). */
static inline double now(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* `n` iterations of arithmetic the compiler cannot drop; `n` is evaluated once. */
#define BURN(n)                                                                    \
    do {                                                                           \
        long burn_n = (n);                                                         \
        volatile uint64_t burn_x = sink;                                           \
        for (long burn_i = 0; burn_i < burn_n; burn_i++)                           \
            burn_x = burn_x * 6364136223846793005ULL + 1442695040888963407ULL;     \
        sink = burn_x;                                                             \
    } while (0)

/* The size of the next round of a program that repeats rounds of counted work (hot_a 3 units,
 * hot_b 1): pseudo-random, from half to one and a half times `unit`, `unit` on average, the
 * same sequence in every run. Rounds of one fixed length are sampled at a few fixed points of
 * the round wherever that length is close to a small multiple or fraction of the sampling
 * period (about 1 ms), and how close depends on the processor's speed: cpu_split's 75:25 read
 * 46:54 with rounds of 1.04 ms. Rounds of varying lengths are sampled all over, and each
 * round still splits its work exactly as counted. One thread's. */
static inline long next_unit(long unit) {
    static uint64_t state = 1;
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return unit / 2 + (long)((state >> 33) % (uint64_t)unit);
}

/* The slice the programs that burn for a time (cpu_phases.c, system_load.c) run between two
 * reads of the clock: well under a millisecond. */
#define SLICE 200000

#endif
