/* Issue 25: no lock but the heap interposer's own inside malloc. Four threads allocate while a
 * fifth loads a library with dlopen, allocates through it and unloads it with dlclose, in a
 * loop, for `seconds`. A heap interposer that takes the loader's lock from inside an
 * allocation can hang here: the loader allocates and frees with its lock held.
 *
 *   heap_dlopen_stress LIB SECONDS
 *   - each worker: bursts of 50 malloc(24)+free at the worker_malloc marker, then 1 ms of sleep;
 *   - the loader: dlopen(LIB), lib_churn(10) (10 malloc(40)+free at the library's
 *     lib_malloc marker), dlclose, 1 ms of sleep;
 *   until SECONDS have passed. Prints "workers N" (all workers' allocations at
 *   worker_malloc) and "cycles C" (the library's site then has 10*C allocations).
 * Every allocation above is freed: nothing at these sites leaks. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define WORKERS 4
#define BURST 50
#define PER_CYCLE 10

static double deadline;
static const char *lib_path;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

__attribute__((noinline)) static long burst(void) {
    long n = 0;
    for (int i = 0; i < BURST; i++) {
        char *p = malloc(24); /* LINE:worker_malloc */
        if (!p)
            break;
        p[0] = (char)i;
        free(p);
        n++;
    }
    return n;
}

static void *worker(void *arg) {
    long *count = arg;
    while (now() < deadline) {
        *count += burst();
        usleep(1000);
    }
    return NULL;
}

__attribute__((noinline)) static int cycle(void) {
    void *h = dlopen(lib_path, RTLD_NOW);
    if (!h) {
        fprintf(stderr, "%s\n", dlerror());
        return -1;
    }
    long (*churn)(int) = (long (*)(int))dlsym(h, "lib_churn");
    long done = churn ? churn(PER_CYCLE) : -1; /* LINE:call */
    dlclose(h);
    return done == PER_CYCLE ? 0 : -1;
}

static void *loader(void *arg) {
    long *cycles = arg;
    while (now() < deadline) {
        if (cycle() != 0) {
            *cycles = -1;
            return NULL;
        }
        ++*cycles;
        usleep(1000);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 3)
        return 1;
    lib_path = argv[1];
    deadline = now() + atof(argv[2]);
    pthread_t w[WORKERS], l;
    long counts[WORKERS] = {0}, cycles = 0;
    if (pthread_create(&l, NULL, loader, &cycles) != 0)
        return 1;
    for (int i = 0; i < WORKERS; i++)
        if (pthread_create(&w[i], NULL, worker, &counts[i]) != 0)
            return 1;
    long total = 0;
    for (int i = 0; i < WORKERS; i++) {
        pthread_join(w[i], NULL);
        total += counts[i];
    }
    pthread_join(l, NULL);
    if (cycles < 0)
        return 2;
    printf("workers %ld\ncycles %ld\n", total, cycles);
    return 0;
}
