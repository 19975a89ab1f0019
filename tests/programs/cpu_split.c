/* Ground truth for CPU sampling: hot_a does exactly 3x the work of hot_b, both called from main.
 * Expected split of samples: hot_a 75%, hot_b 25% (self and total), chain hot_x <- main.
 * Usage: cpu_split [ROUNDS]   (0 = run until killed, for attach tests)
 * The marker comments name the lines the report must point at.
 * The accumulators are volatile locals so that each hot function has a stack frame: gcc sets
 * up no frame pointer in a leaf function that uses no stack, even with -fno-omit-frame-pointer,
 * and the kernel's frame-pointer walk then skips that function's caller. */
#include <stdint.h>
#include <stdlib.h>

#define UNIT 200000

static volatile uint64_t sink;

__attribute__((noinline)) void hot_a(void) {
    volatile uint64_t x = sink;
    for (long i = 0; i < 3 * UNIT; i++) x = x * 6364136223846793005ULL + 1442695040888963407ULL; /* LINE:hot_a */
    sink = x;
}

__attribute__((noinline)) void hot_b(void) {
    volatile uint64_t x = sink;
    for (long i = 0; i < UNIT; i++) x = x * 6364136223846793005ULL + 1442695040888963407ULL; /* LINE:hot_b */
    sink = x;
}

int main(int argc, char **argv) {
    long rounds = argc > 1 ? atol(argv[1]) : 2000;
    for (long r = 0; rounds == 0 || r < rounds; r++) {
        hot_a(); /* LINE:call_a */
        hot_b(); /* LINE:call_b */
    }
    return 0;
}
