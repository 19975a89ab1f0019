/* A real-time CPU hog for the scheduling-latency test (issue 30): ROUNDS rounds of a 3 ms busy
 * burst in burn() then a 7 ms sleep. Run at a real-time priority above a measuring thread's on
 * the same CPU, each burst delays that thread's wakeups until it ends. */
#include <stdlib.h>
#include <time.h>

static long now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000L + t.tv_nsec / 1000;
}

__attribute__((noinline)) static void burn(long us) {
    long end = now_us() + us;
    volatile unsigned long x = 0;
    while (now_us() < end) x++;
}

int main(int argc, char **argv) {
    long rounds = argc > 1 ? atol(argv[1]) : 300;
    struct timespec pause = {0, 7000000};
    for (long i = 0; i < rounds; i++) {
        burn(3000);
        nanosleep(&pause, NULL);
    }
    return 0;
}
