/* A two-thread deadlock with a known shape, for `rec --snapshot` (issue 28): each thread takes
 * two mutexes in opposite order, after a barrier guarantees both hold their first one, so both
 * block for ever in pthread_mutex_lock, called from take_second() <- worker_*() <- the thread
 * entry. main blocks in pthread_join. It prints "deadlocked PID" once both threads are past
 * the barrier; they are inside the lock a moment later. */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static pthread_mutex_t first = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t second = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t both_hold_one;

__attribute__((noinline)) static void take_second(pthread_mutex_t *m) {
    pthread_mutex_lock(m);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void *worker_one(void *arg) {
    (void)arg;
    pthread_mutex_lock(&first);
    pthread_barrier_wait(&both_hold_one);
    take_second(&second);
    pthread_mutex_unlock(&second);
    pthread_mutex_unlock(&first);
    return NULL;
}

__attribute__((noinline)) static void *worker_two(void *arg) {
    (void)arg;
    pthread_mutex_lock(&second);
    pthread_barrier_wait(&both_hold_one);
    take_second(&first);
    pthread_mutex_unlock(&first);
    pthread_mutex_unlock(&second);
    return NULL;
}

int main(void) {
    pthread_t a, b;
    pthread_barrier_init(&both_hold_one, NULL, 3);
    pthread_create(&a, NULL, worker_one, NULL);
    pthread_create(&b, NULL, worker_two, NULL);
    pthread_barrier_wait(&both_hold_one);
    printf("deadlocked %d\n", (int)getpid());
    fflush(stdout);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    return 0;
}
