/* Ground truth for stack usage per thread (issue 28): three threads recurse to known depths
 * through frames of a known size (a volatile FRAME-byte array each), then stay at the bottom:
 *   "small": a 256 KiB stack (pthread_attr_setstacksize), ~92% of it used: near its limit;
 *   "large": a 1 MiB stack, ~30% used;
 *   the main thread: its [stack] mapping, whose limit is RLIMIT_STACK, ~100 KiB used.
 * At the bottom each thread either burns CPU (mode "burn": CPU samples land there) or sleeps
 * (mode "sleep": only the off-CPU switch-out samples of `rec --off-cpu` see the bottom).
 * Each prints its own truth: the top of the mapping that holds its stack (from
 * /proc/self/maps, read before descending) minus the address of a local at the bottom, and
 * the usable size of its stack (pthread_getattr_np; 0 for the main thread):
 *   truth NAME TID USED_BYTES STACK_SIZE
 * The threads run one after the other, so each has the CPU to itself at its bottom. In sleep
 * mode each also says "bottom NAME" when it gets there, before sleeping, so that a test can
 * look at it then (a snapshot), and sleeps MS milliseconds (400 unless told).
 * Usage: stack_depth burn|sleep [MS] */
#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "burn.h"

#define FRAME 1024

struct job {
    const char *name;
    size_t stack_size; /* requested; 0 for the main thread */
    int depth;
    int sleep;
    uintptr_t top;  /* end of the mapping holding the stack */
    uintptr_t used; /* top minus a local's address at the bottom */
    size_t usable;  /* what pthread_getattr_np says the stack is */
};

/* The end of the /proc/self/maps mapping that holds `addr`. */
static uintptr_t mapping_top(uintptr_t addr) {
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    uintptr_t top = 0;
    while (f && fgets(line, sizeof line, f)) {
        uintptr_t lo, hi;
        if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR, &lo, &hi) == 2 && lo <= addr && addr < hi)
            top = hi;
    }
    if (f)
        fclose(f);
    return top;
}

/* How long a thread sleeps at its bottom in sleep mode. */
static long sleep_ms = 400;

/* The deepest point: measure, then burn 400 ms of this thread's CPU time or sleep 400 ms. */
__attribute__((noinline)) void stack_bottom(struct job *j) {
    volatile char here = 0;
    j->used = j->top - (uintptr_t)&here;
    if (j->sleep) {
        printf("bottom %s\n", j->name);
        fflush(stdout);
        struct timespec ts = {sleep_ms / 1000, (sleep_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        return;
    }
    double t0 = now(CLOCK_THREAD_CPUTIME_ID);
    while (now(CLOCK_THREAD_CPUTIME_ID) - t0 < 0.4)
        BURN(100000);
    (void)here;
}

/* One FRAME-byte frame per level. */
__attribute__((noinline)) void stack_descend(int depth, struct job *j) {
    volatile char pad[FRAME];
    pad[0] = (char)depth;
    if (depth > 0)
        stack_descend(depth - 1, j);
    else
        stack_bottom(j);
    pad[FRAME - 1] = pad[0]; /* no tail call: the frame stays until the bottom returns */
}

static void run(struct job *j) {
    volatile char here = 0;
    j->top = mapping_top((uintptr_t)&here);
    pthread_attr_t a;
    void *addr = NULL;
    if (j->stack_size && pthread_getattr_np(pthread_self(), &a) == 0) {
        pthread_attr_getstack(&a, &addr, &j->usable);
        pthread_attr_destroy(&a);
    }
    stack_descend(j->depth, j);
    printf("truth %s %ld %" PRIuPTR " %zu\n", j->name, (long)syscall(SYS_gettid), j->used,
           j->usable);
    fflush(stdout);
}

static void *thread_main(void *arg) {
    struct job *j = arg;
    pthread_setname_np(pthread_self(), j->name);
    run(j);
    return NULL;
}

static void in_thread(struct job *j) {
    pthread_attr_t a;
    pthread_t t;
    pthread_attr_init(&a);
    pthread_attr_setstacksize(&a, j->stack_size);
    if (pthread_create(&t, &a, thread_main, j) != 0) {
        perror("pthread_create");
        exit(1);
    }
    pthread_join(t, NULL);
    pthread_attr_destroy(&a);
}

int main(int argc, char **argv) {
    int sleep = argc > 1 && strcmp(argv[1], "sleep") == 0;
    if (argc > 2)
        sleep_ms = atol(argv[2]);
    struct job small = {"small", 256 << 10, 225, sleep, 0, 0, 0};
    struct job large = {"large", 1 << 20, 300, sleep, 0, 0, 0};
    struct job main_job = {"stack_depth", 0, 100, sleep, 0, 0, 0};
    in_thread(&small);
    in_thread(&large);
    run(&main_job);
    return 0;
}
