/* The shared-library half of the deep call tree (see deep.c). Odd levels live here. */
#include <stdint.h>

extern uint64_t deep_exe_level(int level, uint64_t x);
extern volatile uint64_t deep_sink;
extern long deep_unit;

/* The leaf: all CPU time of the deep path is spent here, in the library. */
__attribute__((noinline)) uint64_t deep_leaf(uint64_t x, long n) {
    for (long i = 0; i < n; i++) x = x * 6364136223846793005ULL + 1442695040888963407ULL; /* LINE:leaf */
    deep_sink = x;
    return x;
}

__attribute__((noinline)) uint64_t deep_lib_level(int level, uint64_t x) {
    uint64_t r = level <= 1 ? deep_leaf(x, deep_unit) : deep_exe_level(level - 1, x + 1);
    deep_sink += r; /* not a tail call: the frame stays on the stack */
    return r ^ (uint64_t)level;
}
