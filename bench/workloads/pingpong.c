/* A context-switch-heavy workload for the off-CPU overhead benchmark: two threads pass a
 * token back and forth ROUNDS times through two pipes, so each round blocks each thread once
 * (two context switches per round, about 50,000 a second on one core).
 * Usage: pingpong [ROUNDS] */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

static int ping[2], pong[2];
static long rounds = 100000;

__attribute__((noinline)) static void *echo(void *arg) {
    (void)arg;
    char c;
    for (long i = 0; i < rounds; i++) {
        if (read(ping[0], &c, 1) != 1 || write(pong[1], &c, 1) != 1) abort();
    }
    return NULL;
}

__attribute__((noinline)) static void serve(void) {
    char c = 'x';
    for (long i = 0; i < rounds; i++) {
        if (write(ping[1], &c, 1) != 1 || read(pong[0], &c, 1) != 1) abort();
    }
}

int main(int argc, char **argv) {
    if (argc > 1) rounds = atol(argv[1]);
    if (pipe(ping) || pipe(pong)) return 1;
    pthread_t t;
    pthread_create(&t, NULL, echo, NULL);
    serve();
    pthread_join(t, NULL);
    return 0;
}
