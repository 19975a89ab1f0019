/* Ground truth for code without unwind info: two hand-written assembly functions with no CFI
 * (no .eh_frame entry covers them), as libjpeg-turbo's SIMD routines and most hand-written
 * assembly are. spin_leaf counts down its argument and returns, pushing nothing: a sampled
 * instruction there has its return address at the stack pointer (x86_64) or in the link
 * register (AArch64). spin_framed keeps a frame pointer, as such code does when it calls out,
 * and calls spin_leaf. run_leaf and run_framed (C, with tables) each spin the same count per
 * round, so the two share the CPU 50/50 and every sample's stack is known:
 *   spin_leaf <- run_leaf <- main
 *   spin_leaf <- spin_framed <- run_framed <- main   (and spin_framed itself, rarely)
 * Usage: asm_nocfi ROUNDS */
#include <stdlib.h>

void spin_leaf(unsigned long n);
void spin_framed(unsigned long n);

#if defined(__x86_64__)
__asm__(".text\n"
        ".globl spin_leaf\n.type spin_leaf,@function\n"
        "spin_leaf:\n"
        "  mov %rdi, %rax\n"
        "1: dec %rax\n"
        "  jnz 1b\n"
        "  ret\n"
        ".size spin_leaf, .-spin_leaf\n"
        ".globl spin_framed\n.type spin_framed,@function\n"
        "spin_framed:\n"
        "  push %rbp\n"
        "  mov %rsp, %rbp\n"
        "  call spin_leaf\n"
        "  pop %rbp\n"
        "  ret\n"
        ".size spin_framed, .-spin_framed\n");
#elif defined(__aarch64__)
__asm__(".text\n"
        ".globl spin_leaf\n.type spin_leaf,%function\n"
        "spin_leaf:\n"
        "1: subs x0, x0, #1\n"
        "  b.ne 1b\n"
        "  ret\n"
        ".size spin_leaf, .-spin_leaf\n"
        ".globl spin_framed\n.type spin_framed,%function\n"
        "spin_framed:\n"
        "  stp x29, x30, [sp, #-16]!\n"
        "  mov x29, sp\n"
        "  bl spin_leaf\n"
        "  ldp x29, x30, [sp], #16\n"
        "  ret\n"
        ".size spin_framed, .-spin_framed\n");
#else
#error "asm_nocfi: x86_64 or AArch64 only"
#endif

#define SPIN 20000000UL

/* The empty statements after the calls keep them calls, not tail jumps. */
__attribute__((noinline)) void run_leaf(void) {
    spin_leaf(SPIN);
    __asm__ volatile("");
}
__attribute__((noinline)) void run_framed(void) {
    spin_framed(SPIN);
    __asm__ volatile("");
}

int main(int argc, char **argv) {
    long rounds = argc > 1 ? atol(argv[1]) : 20;
    for (long i = 0; i < rounds; i++) {
        run_leaf();
        run_framed();
    }
    return 0;
}
