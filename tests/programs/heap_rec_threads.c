/* Ground truth for ordering and races in the recorder (rec --heap): 8 threads, each makes
 * 20,000 malloc(5000 + t) and frees them at once (t = thread number 0..7). Expected per size:
 * 20,000 Alloc and 20,000 Free, no Lost record, and per address an Alloc/Free alternation. */
#include <pthread.h>
#include <stdlib.h>

static void *volatile sink;

static void *worker(void *arg) {
    long t = (long)arg;
    for (int i = 0; i < 20000; i++) {
        char *p = malloc(5000 + t);
        p[0] = 1;
        sink = p;
        free(p);
    }
    return NULL;
}

int main(void) {
    pthread_t th[8];
    for (long t = 0; t < 8; t++) pthread_create(&th[t], NULL, worker, (void *)t);
    for (int t = 0; t < 8; t++) pthread_join(th[t], NULL);
    return 0;
}
