/* Ground truth for stack-copy unwinding (built -O2 with the compiler's default flags, i.e. no
 * frame pointers on x86_64 and AArch64):
 *   main -> deep_path -> 12 levels alternating between this executable and libdeep.so ->
 *           deep_leaf (in libdeep.so)                              2 units of work per round
 *   main -> recurse(RECURSION_DEPTH) -> ... -> recurse(0) -> deep_leaf  1 unit of work per round
 * So deep_path has 2/3 of the samples and recurse 1/3 (total), and every sample's stack ends
 * in main and the C library's start code. Both paths spend their time in the same leaf, so
 * the split holds under an emulator that runs different code at different speeds. A unit's
 * size (the leaf's iterations per call, deep_unit) varies from round to round (burn.h's
 * next_unit), so that sampling cannot lock onto rounds of one length.
 * Usage: deep [ROUNDS] */
#include <stdint.h>
#include <stdlib.h>

#include "burn.h"

#define LEVELS 12
#define RECURSION_DEPTH 20
#define UNIT 400000

volatile uint64_t deep_sink;
long deep_unit = UNIT;
extern uint64_t deep_lib_level(int level, uint64_t x);
extern uint64_t deep_leaf(uint64_t x, long n);

__attribute__((noinline)) uint64_t deep_exe_level(int level, uint64_t x) {
    uint64_t r = deep_lib_level(level - 1, x + 2);
    deep_sink += r;
    return r ^ (uint64_t)level;
}

__attribute__((noinline)) uint64_t deep_path(uint64_t x) {
    uint64_t r = deep_exe_level(LEVELS, x) + deep_exe_level(LEVELS, x + 1); /* LINE:deep_path */
    deep_sink += r;
    return r;
}

__attribute__((noinline)) uint64_t recurse(int depth, uint64_t x) {
    uint64_t r = depth == 0 ? deep_leaf(x, deep_unit) : recurse(depth - 1, x + 3);
    deep_sink += r;
    return r + (uint64_t)depth;
}

int main(int argc, char **argv) {
    long rounds = argc > 1 ? atol(argv[1]) : 1000;
    uint64_t x = (uint64_t)argc;
    for (long r = 0; rounds == 0 || r < rounds; r++) {
        deep_unit = next_unit(UNIT);
        x += deep_path(x);
        x += recurse(RECURSION_DEPTH, x);
    }
    return (int)(x & 0);
}
