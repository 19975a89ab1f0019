/* Ground truth for unwinding through signal frames: `interrupted` raises SIGUSR1 every round;
 * the handler's work (3x the main loop's) runs on the signal frame. Every sample in
 * in_handler_work must unwind through the sigreturn trampoline into raise <- interrupted <-
 * main. Built -O2 without frame pointers.
 * Usage: signal_frames [ROUNDS] */
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
static volatile uint64_t sink;
__attribute__((noinline)) void in_handler_work(void) {
    uint64_t x = sink;
    for (long i = 0; i < 3000000; i++) x = x * 6364136223846793005ULL + 1442695040888963407ULL; /* LINE:handler */
    sink = x;
}
static void handler(int sig) { (void)sig; in_handler_work(); }
__attribute__((noinline)) void interrupted(long n) {
    for (long r = 0; r < n; r++) {
        uint64_t x = sink;
        for (long i = 0; i < 1000000; i++) x = x * 3 + 1;
        sink = x;
        raise(SIGUSR1);
    }
}
int main(int argc, char **argv) {
    struct sigaction sa; memset(&sa, 0, sizeof sa); sa.sa_handler = handler; sigaction(SIGUSR1, &sa, NULL);
    interrupted(argc > 1 ? atol(argv[1]) : 300);
    return 0;
}
