/* Ground truth for comparisons: each round, hot_a does A units of work and hot_b B units, both
 * called from main, so hot_a takes A/(A+B) of the samples. `split_ab 3 1 R` splits 75:25,
 * `split_ab 1 1 R` 50:50: between the two, hot_a's share falls by 25 points and hot_b's rises
 * by 25. Both run the same loop (burn.h), differing only in its count; a unit's size varies
 * from round to round (burn.h's next_unit), so that sampling cannot lock onto the rounds.
 * Usage: split_ab A B ROUNDS */
#include <stdlib.h>

#include "burn.h"

#define UNIT 200000

__attribute__((noinline)) void hot_a(long units, long unit) {
    BURN(units * unit);
}

__attribute__((noinline)) void hot_b(long units, long unit) {
    BURN(units * unit);
}

int main(int argc, char **argv) {
    if (argc < 4) return 2;
    long a = atol(argv[1]), b = atol(argv[2]), rounds = atol(argv[3]);
    for (long r = 0; r < rounds; r++) {
        long unit = next_unit(UNIT);
        hot_a(a, unit);
        hot_b(b, unit);
    }
    return 0;
}
