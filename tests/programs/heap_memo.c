/* Ground truth for the interposer's unwind memo (recorder/heap/src/stack/memo.rs): the same
 * malloc call site reached at the same stack depth through different callers, alternately,
 * and through a recursion of varying depth. The memo must never hand one of these stacks the
 * other's id. The size tells the paths apart (the memo never sees sizes):
 *   24 bytes: leaf <- via_a <- main      32 bytes: leaf <- via_b <- main
 *   40 + 8*d bytes: leaf <- down (d+1 times) <- main,  d = 0..3
 * ROUNDS rounds (argv[1], default 20000); every block is freed. */
#include <stdlib.h>

static volatile unsigned long sink;

__attribute__((noinline)) static void *leaf(size_t n)
{
    void *p = malloc(n);
    __asm__ volatile("" : : "r"(p) : "memory");
    return p;
}

/* Two callers of the same shape, so that leaf runs at the same depth under both. */
__attribute__((noinline)) static void *via_a(unsigned k)
{
    void *p = leaf(24);
    sink += k;
    return p;
}

__attribute__((noinline)) static void *via_b(unsigned k)
{
    void *p = leaf(32);
    sink += k;
    return p;
}

__attribute__((noinline)) static void *down(int d, size_t n)
{
    void *p = d == 0 ? leaf(n) : down(d - 1, n);
    __asm__ volatile("" : : "r"(p) : "memory");
    return p;
}

int main(int argc, char **argv)
{
    unsigned rounds = argc > 1 ? (unsigned)atoi(argv[1]) : 20000;
    for (unsigned i = 0; i < rounds; i++) {
        free(via_a(i));
        free(via_b(i * 3));
        int d = i % 4;
        free(down(d, 40 + 8 * (size_t)d));
    }
    return 0;
}
