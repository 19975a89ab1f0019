/* Ground truth for comparisons: each round, hot_a does A units of work and hot_b B units, both
 * called from main, so hot_a takes A/(A+B) of the samples. `split_ab 3 1 R` splits 75:25,
 * `split_ab 1 1 R` 50:50: between the two, hot_a's share falls by 25 points and hot_b's rises
 * by 25. Usage: split_ab A B ROUNDS */
#include <stdint.h>
#include <stdlib.h>

#define UNIT 200000

static volatile uint64_t sink;

__attribute__((noinline)) void hot_a(long units) {
    volatile uint64_t x = sink;
    for (long i = 0; i < units * UNIT; i++) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    sink = x;
}

__attribute__((noinline)) void hot_b(long units) {
    volatile uint64_t x = sink;
    for (long i = 0; i < units * UNIT; i++) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    sink = x;
}

int main(int argc, char **argv) {
    if (argc < 4) return 2;
    long a = atol(argv[1]), b = atol(argv[2]), rounds = atol(argv[3]);
    for (long r = 0; r < rounds; r++) {
        hot_a(a);
        hot_b(b);
    }
    return 0;
}
