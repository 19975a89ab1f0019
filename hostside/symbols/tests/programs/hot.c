// Two hot functions whose names and marker lines the tests check exactly. hot_b is static, so it
// is in .symtab (and MiniDebugInfo) but never in .dynsym.
// Build (done by the tests): gcc -O2 -g -Wl,--build-id hot.c -o hot
#include <stdlib.h>

static volatile unsigned long sink;

__attribute__((noinline)) void hot_a(long n) {
    for (long i = 0; i < n; i++) sink = sink * 6364136223846793005UL + 1442695040888963407UL; // LINE:hot_a
}

__attribute__((noinline)) static void hot_b(long n) {
    for (long i = 0; i < n; i++) sink = sink * 3 + 7; // LINE:hot_b
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 10;
    hot_a(n);
    hot_b(n);
    return 0;
}
