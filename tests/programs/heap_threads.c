/* Ground truth for heap events from concurrent threads (issue 3): 8 threads allocate and free
 * at the same time; each does N rounds of malloc/malloc/free/realloc/free and leaks one block
 * of 1000+T bytes. Totals must equal heaptrack_print's: no event lost or doubled.
 * All 8 threads are alive together (a barrier) and use small stacks, so the C library never
 * reuses or frees a thread stack and its TLS block: its own allocations are the same in every
 * run. Usage: heap_threads [N]   (N defaults to 50,000) */
#include <pthread.h>
#include <stdlib.h>

static void *volatile sink;
static long rounds = 50000;
static pthread_barrier_t start;

__attribute__((noipa)) static void *worker(void *arg) {
    long id = (long)arg;
    pthread_barrier_wait(&start);
    for (long i = 0; i < rounds; i++) {
        char *a = malloc(24 + (size_t)(i % 40)); /* LINE:a */
        char *b = malloc(100 + (size_t)id);       /* LINE:b */
        __asm__ volatile("" : : "r"(a), "r"(b) : "memory");
        free(a);
        b = realloc(b, 200 + (size_t)(i % 8));    /* LINE:realloc */
        __asm__ volatile("" : : "r"(b) : "memory");
        free(b);
    }
    void *leak = malloc(1000 + (size_t)id); /* LINE:leak */
    __asm__ volatile("" : : "r"(leak) : "memory"); /* no tail call: the site stays worker */
    return leak;
}

int main(int argc, char **argv) {
    if (argc > 1) rounds = atol(argv[1]);
    pthread_barrier_init(&start, NULL, 8);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    pthread_t t[8];
    for (long i = 0; i < 8; i++) pthread_create(&t[i], &attr, worker, (void *)i);
    for (int i = 0; i < 8; i++) {
        void *r;
        pthread_join(t[i], &r);
        sink = r;
    }
    return 0;
}
