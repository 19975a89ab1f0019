// A shared library for the .dynsym fallback: once stripped, only exported names remain.
// Build (done by the tests): gcc -O2 -g -fPIC -shared -Wl,--build-id lib.c -o libhot.so
static volatile unsigned long sink;

__attribute__((noinline)) void lib_hot(long n) {
    for (long i = 0; i < n; i++) sink = sink * 5 + 1; // LINE:lib_hot
}

__attribute__((noinline)) void lib_cold(long n) {
    for (long i = 0; i < n; i++) sink = sink + 3; // LINE:lib_cold
}
