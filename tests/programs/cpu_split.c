/* Ground truth for CPU sampling: hot_a does exactly 3x the work of hot_b, both called from main.
 * Expected split of samples: hot_a 75%, hot_b 25% (self and total), chain hot_x <- main.
 * Usage: cpu_split [ROUNDS]   (0 = run until killed, for attach tests)
 * The marker comments name the lines the report must point at. They stay on these lines: the
 * recordings checked in under tests/fixtures/ were made from this file, and their debug info
 * points here. */
#include <stdlib.h>

#include "burn.h"

#define UNIT 200000

/* hot_a and hot_b run the same loop (burn.h) and differ only in its count, so their 3:1 split
 * of work is a 3:1 split of CPU time on any processor. */

__attribute__((noinline)) void hot_a(long unit) {
    BURN(3 * unit); /* LINE:hot_a */
}

/* A third of hot_a's work. */

__attribute__((noinline)) void hot_b(long unit) {
    BURN(unit); /* LINE:hot_b */
}

/* ROUNDS rounds of 4 units each, of varying sizes (burn.h's next_unit: UNIT on average). */
int main(int argc, char **argv) {
    long rounds = argc > 1 ? atol(argv[1]) : 2000;
    for (long r = 0, unit = next_unit(UNIT); rounds == 0 || r < rounds; r++, unit = next_unit(UNIT)) {
        hot_a(unit); /* LINE:call_a */
        hot_b(unit); /* LINE:call_b */
    }
    return 0;
}
