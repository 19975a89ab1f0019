/* A program that samples itself: a SIGPROF handler copies the interrupted registers and the
 * top of the stack, the way `rec --call-graph dwarf` gets them from the kernel. It lets the
 * host-side unwinders be tested on real code of another architecture under qemu-user, which
 * has no perf_event_open.
 *
 * Call tree (like deep.c, in one file): main -> run_deep -> level(12) -> ... -> level(1) ->
 * leaf (2 units per round); main -> recurse(20) -> ... -> recurse(0) -> leaf (1 unit). Both
 * paths spend their time in the same leaf, so the 2:1 split holds even where an emulator runs
 * different code at different speeds. The leaf's iterations per call vary from round to round
 * (burn.h's next_unit), so that the timer cannot lock onto rounds of one length.
 *
 * Output file (in the target's byte order): per sample: u32 nregs, u64 regs[nregs] in perf's
 * register order for the architecture (ARM: r0..r15; RISC-V: pc, ra, sp, s0), u32 len,
 * u8 stack[len] (from sp up).
 * Usage: self_sample OUT_FILE [ROUNDS] */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <ucontext.h>

#include "burn.h"

#define MAX_SAMPLES 4000
#define STACK_BYTES 4096

extern void *__libc_stack_end;
static long unit = 200000;
static unsigned char buf[MAX_SAMPLES][STACK_BYTES];
static uint32_t lens[MAX_SAMPLES];
static uint64_t regs[MAX_SAMPLES][16];
#if defined(__arm__)
#define NREGS 16
#elif defined(__riscv) && __riscv_xlen == 64
#define NREGS 4
#else
#error "self_sample supports 32-bit ARM and 64-bit RISC-V"
#endif
static volatile int n_samples;

static void on_prof(int sig, siginfo_t *si, void *ctx) {
    (void)sig;
    (void)si;
    int n = n_samples;
    if (n >= MAX_SAMPLES) return;
    ucontext_t *uc = ctx;
#if defined(__arm__)
    const unsigned long *r = &uc->uc_mcontext.arm_r0;
    for (int i = 0; i < 16; i++) regs[n][i] = r[i];
    uintptr_t sp = uc->uc_mcontext.arm_sp;
#else
    /* __gregs[0] is the pc, then x1 (ra), x2 (sp), ..., x8 (s0). */
    const unsigned long *g = uc->uc_mcontext.__gregs;
    regs[n][0] = g[0];
    regs[n][1] = g[1];
    regs[n][2] = g[2];
    regs[n][3] = g[8];
    uintptr_t sp = g[2];
#endif
    uintptr_t end = (uintptr_t)__libc_stack_end;
    uint32_t len = end > sp ? (uint32_t)(end - sp) : 0;
    if (len > STACK_BYTES) len = STACK_BYTES;
    memcpy(buf[n], (void *)sp, len);
    lens[n] = len;
    n_samples = n + 1;
}

__attribute__((noinline)) uint64_t leaf(uint64_t x, long n) {
    for (long i = 0; i < n; i++) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    sink = x;
    return x;
}

__attribute__((noinline)) uint64_t level(int depth, uint64_t x) {
    uint64_t r = depth <= 1 ? leaf(x, unit) : level(depth - 1, x + 1);
    sink += r;
    return r ^ (uint64_t)depth;
}

__attribute__((noinline)) uint64_t run_deep(uint64_t x) {
    uint64_t r = level(12, x) + level(12, x + 1);
    sink += r;
    return r;
}

__attribute__((noinline)) uint64_t recurse(int depth, uint64_t x) {
    uint64_t r = depth == 0 ? leaf(x, unit) : recurse(depth - 1, x + 3);
    sink += r;
    return r + (uint64_t)depth;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    long rounds = argc > 2 ? atol(argv[2]) : 200;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_prof;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(SIGPROF, &sa, NULL);
    struct itimerval it = {{0, 2000}, {0, 2000}};
    setitimer(ITIMER_PROF, &it, NULL);
    uint64_t x = (uint64_t)argc;
    for (long r = 0; r < rounds; r++) {
        unit = next_unit(200000);
        x += run_deep(x);
        x += recurse(20, x);
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_PROF, &off, NULL);
    FILE *f = fopen(argv[1], "wb");
    if (!f) return 1;
    for (int i = 0; i < n_samples; i++) {
        uint32_t nregs = NREGS;
        fwrite(&nregs, 4, 1, f);
        fwrite(regs[i], 8, NREGS, f);
        fwrite(&lens[i], 4, 1, f);
        fwrite(buf[i], 1, lens[i], f);
    }
    fclose(f);
    return (int)(x & 0);
}
