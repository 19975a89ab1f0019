/* Ground truth for stack scanning (x86_64): a hand-written assembly function with no CFI that
 * keeps no frame pointer and uses %rbp for data, after pushing registers and making room for
 * locals, as libjpeg-turbo's SSE2 Huffman encoder does: neither the return-address rule (the
 * word at the stack pointer is a saved register) nor the frame-pointer rule can find its
 * caller. It is reached two ways, each spinning the same count per round (a 50/50 split):
 *   spin_pushed <- run_direct <- main      (a call)
 *   spin_pushed <- run_tail <- main        (through spin_tail, which tail-jumps to it, so its
 *                                           own frame is gone, as libjpeg-turbo's wrappers)
 * Usage: asm_scan ROUNDS */
#include <stdlib.h>

void spin_pushed(unsigned long n);
void spin_tail(unsigned long n);

#if defined(__x86_64__)
__asm__(".text\n"
        ".globl spin_pushed\n.type spin_pushed,@function\n"
        "spin_pushed:\n"
        "  push %rbx\n"
        "  push %rbp\n"
        "  push %r12\n"
        "  sub $40, %rsp\n"
        "  mov %rdi, %rbp\n"
        "  mov %rdi, (%rsp)\n"
        "1: dec %rbp\n"
        "  mov %rbp, 8(%rsp)\n"
        "  jnz 1b\n"
        "  add $40, %rsp\n"
        "  pop %r12\n"
        "  pop %rbp\n"
        "  pop %rbx\n"
        "  ret\n"
        ".size spin_pushed, .-spin_pushed\n"
        ".globl spin_tail\n.type spin_tail,@function\n"
        "spin_tail:\n"
        "  jmp spin_pushed\n"
        ".size spin_tail, .-spin_tail\n");
#else
#error "asm_scan: x86_64 only"
#endif

#define SPIN 20000000UL

/* The empty statements after the calls keep them calls, not tail jumps. */
__attribute__((noinline)) void run_direct(void) {
    spin_pushed(SPIN);
    __asm__ volatile("");
}
__attribute__((noinline)) void run_tail(void) {
    spin_tail(SPIN);
    __asm__ volatile("");
}

int main(int argc, char **argv) {
    long rounds = argc > 1 ? atol(argv[1]) : 20;
    for (long i = 0; i < rounds; i++) {
        run_direct();
        run_tail();
    }
    return 0;
}
