/* Ground truth for threads: worker N (N = 1..4) does N units of work (burn.h's loop, counted),
 * so the four threads take 10%, 20%, 30% and 40% of the samples. Each thread is named
 * "workerN", unless the second argument is "unnamed": then the threads keep the name they
 * inherit (the program's).
 * Usage: threads [UNITS [unnamed]] */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "burn.h"

static long units = 150;
static int named = 1;

__attribute__((noinline)) static uint64_t spin(long n) {
    BURN(n * 1000000L);
    return sink;
}

static void *worker(void *arg) {
    long id = (long)arg;
    char name[16];
    snprintf(name, sizeof name, "worker%ld", id);
    if (named) pthread_setname_np(pthread_self(), name);
    volatile uint64_t r = spin(id * units / 10);
    (void)r;
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1) units = atol(argv[1]);
    if (argc > 2 && strcmp(argv[2], "unnamed") == 0) named = 0;
    pthread_t t[4];
    for (long i = 0; i < 4; i++) pthread_create(&t[i], NULL, worker, (void *)(i + 1));
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    return 0;
}
