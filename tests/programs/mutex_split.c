/* Ground truth for lock contention. For ROUNDS rounds, holder() rests 30 ms, takes the mutex,
 * tells contender() (a semaphore post), keeps the mutex through a 90 ms sleep in hold_lock()
 * and lets it go. contender() waits for the signal in wait_turn() (about 30 ms: the
 * holder's rest) and then for the mutex in take_lock() (about 90 ms), so of its off-CPU time
 * about 75% is in take_lock (blocked on the mutex) and 25% in wait_turn.
 * On a busy machine wake-ups come late and move that split: a contender that wakes 10 ms after
 * the post waits 80 ms for the mutex and 40 for its turn. So the program measures each
 * function's time itself (CLOCK_MONOTONIC, summed over the rounds; the waits are nearly all of
 * it) and prints it at the end, the truth the tests take:
 * "wait_turn_ns W take_lock_ns T rest_ns R hold_lock_ns H".
 * Usage: mutex_split [ROUNDS] */
#define _GNU_SOURCE
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static sem_t held;
static long rounds = 20;
/* Each written by one thread, read by main() after joining it. */
static uint64_t wait_turn_ns, take_lock_ns, rest_ns, hold_lock_ns;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

__attribute__((noinline)) static void nap(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* The empty asm after each call keeps it from becoming a tail call, which would leave the
 * caller out of the stack. */
__attribute__((noinline)) static void hold_lock(void) {
    nap(90);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void rest(void) {
    nap(30);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void *holder(void *arg) {
    (void)arg;
    /* Each round rests first: the first round too, so that contender() is blocked in
     * wait_turn() before the first post (a post before it waits wakes nobody). */
    for (long i = 0; i < rounds; i++) {
        uint64_t t = now_ns();
        rest();
        rest_ns += now_ns() - t;
        pthread_mutex_lock(&lock);
        sem_post(&held);
        t = now_ns();
        hold_lock();
        hold_lock_ns += now_ns() - t;
        pthread_mutex_unlock(&lock);
    }
    return NULL;
}

__attribute__((noinline)) static void wait_turn(void) {
    while (sem_wait(&held) != 0) {
    }
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void take_lock(void) {
    pthread_mutex_lock(&lock);
    pthread_mutex_unlock(&lock);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void *contender(void *arg) {
    (void)arg;
    for (long i = 0; i < rounds; i++) {
        uint64_t t = now_ns();
        wait_turn();
        uint64_t turn = now_ns();
        take_lock();
        wait_turn_ns += turn - t;
        take_lock_ns += now_ns() - turn;
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1) rounds = atol(argv[1]);
    sem_init(&held, 0, 0);
    pthread_t h, c;
    pthread_create(&c, NULL, contender, NULL);
    pthread_create(&h, NULL, holder, NULL);
    pthread_join(h, NULL);
    pthread_join(c, NULL);
    printf("wait_turn_ns %llu take_lock_ns %llu rest_ns %llu hold_lock_ns %llu\n",
           (unsigned long long)wait_turn_ns, (unsigned long long)take_lock_ns,
           (unsigned long long)rest_ns, (unsigned long long)hold_lock_ns);
    return 0;
}
