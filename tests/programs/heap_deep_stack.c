/* Ground truth for the heap interposer's frame limit (128 frames, crossprof_heap_wire's
 * MAX_FRAMES): DEEP_ALLOCS allocations made 200 calls deep, whose stacks the interposer cuts
 * at the limit, and SHALLOW_ALLOCS made from main, whose stacks are whole. Every block is
 * freed. Usage: heap_deep_stack */
#include <stdlib.h>

#define DEPTH 200
#define DEEP_ALLOCS 7
#define SHALLOW_ALLOCS 5

void *volatile sink;

__attribute__((noinline)) void descend(int depth) {
    if (depth == 0) {
        for (int i = 0; i < DEEP_ALLOCS; i++) {
            sink = malloc(64);
            free(sink);
        }
        return;
    }
    descend(depth - 1);
    __asm__ volatile("" ::: "memory"); /* keeps the call from becoming a jump */
}

int main(void) {
    descend(DEPTH);
    for (int i = 0; i < SHALLOW_ALLOCS; i++) {
        sink = malloc(32);
        free(sink);
    }
    return 0;
}
