/* Ground truth for unwinding through signal frames: `interrupted` raises SIGUSR1 every round;
 * the handler's work (3x the main loop's) runs on the signal frame. Every sample in
 * in_handler_work must unwind through the sigreturn trampoline into raise <- interrupted <-
 * main. Built -O2 without frame pointers.
 * With -DOWN_RESTORER (32-bit ARM only) the handler returns into a restorer of its own, like
 * musl's ARM-state __restore_rt and without any unwind table entry (glibc's restorer has EHABI
 * annotations that describe the signal frame; this one leaves it to the unwinder to recognise
 * the trampoline's instructions).
 * Usage: signal_frames [ROUNDS] */
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#ifdef OWN_RESTORER
#include <sys/syscall.h>
#include <unistd.h>
__asm__(".text\n.balign 4\n.arm\n.globl own_restorer\n.type own_restorer, %function\n"
        "own_restorer:\n\tmov r7, #173\n\tsvc 0\n.size own_restorer, .-own_restorer\n");
void own_restorer(void);
/* The kernel's struct sigaction on ARM. */
struct kernel_sigaction { void (*handler)(int); unsigned long flags; void (*restorer)(void); unsigned long mask[2]; };
#define KERNEL_SA_RESTORER 0x04000000UL
#endif
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
#ifdef OWN_RESTORER
    /* SA_SIGINFO: the kernel pushes an rt_sigframe, which rt_sigreturn (173) expects. */
    struct kernel_sigaction k = { handler, SA_SIGINFO | KERNEL_SA_RESTORER, own_restorer, {0, 0} };
    if (syscall(SYS_rt_sigaction, SIGUSR1, &k, NULL, 8) != 0) return 1;
#else
    struct sigaction sa; memset(&sa, 0, sizeof sa); sa.sa_handler = handler; sigaction(SIGUSR1, &sa, NULL);
#endif
    interrupted(argc > 1 ? atol(argv[1]) : 300);
    return 0;
}
