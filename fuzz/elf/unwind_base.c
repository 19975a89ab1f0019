/* The image the `unwind` fuzz target splices its input into: a few small functions with
 * their unwind tables and no C library, so each architecture's image is a few KiB. Built
 * by fuzz/elf/build.sh; the images are checked in next to this file. */
volatile long sink;

#ifdef __arm__
/* The EHABI personality routines the tables name; never called here. */
void __aeabi_unwind_cpp_pr0(void) {}
void __aeabi_unwind_cpp_pr1(void) {}
#endif

__attribute__((noinline)) long leaf(long x) {
    long a[4];
    for (int i = 0; i < 4; i++)
        a[i] = x * i;
    sink = a[x & 3];
    return a[1];
}

__attribute__((noinline)) long mid(long x) {
    return leaf(x + 1) * 3 + leaf(x);
}

__attribute__((noinline)) long outer(long x) {
    long r = 0;
    for (long i = 0; i < x; i++)
        r += mid(i);
    return r;
}

void _start(void) {
    sink = outer(10);
    for (;;) {
    }
}
