// A tiny JIT: copies machine code for two busy loops into anonymous memory at run time,
// makes it executable, names the two functions in /tmp/perf-PID.map as JIT runtimes do, and
// spends its time in them (jit_hot three times as long as jit_cold: the same code, three times
// the count, in rounds whose size varies (burn.h's next_unit) so that sampling cannot lock onto
// them). With a second argument `nomap` it writes no map and prints the code's address
// instead. x86_64 only.
// Built by tests/tests/jit_maps.rs: gcc -O2 jit_map.c
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "burn.h"

// void f(long n) { while (n--) ; }:
//   test %rdi,%rdi; jz done; loop: dec %rdi; jnz loop; done: ret
static const unsigned char loop_code[] = {0x48, 0x85, 0xff, 0x74, 0x05, 0x48,
                                          0xff, 0xcf, 0x75, 0xfb, 0xc3};

typedef void (*loop_fn)(long);

int main(int argc, char **argv) {
    long rounds = argc > 1 ? atol(argv[1]) : 100;
    unsigned char *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED)
        return 1;
    memcpy(page, loop_code, sizeof loop_code);
    memcpy(page + 64, loop_code, sizeof loop_code);
    if (mprotect(page, 4096, PROT_READ | PROT_EXEC) != 0)
        return 1;
    if (argc > 2 && strcmp(argv[2], "nomap") == 0) {
        loop_fn hot = (loop_fn)page;
        for (long r = 0; r < rounds; r++)
            hot(3000000);
        printf("%lx %zx\n", (unsigned long)page, sizeof loop_code);
        return 0;
    }
    char path[64];
    snprintf(path, sizeof path, "/tmp/perf-%d.map", (int)getpid());
    FILE *f = fopen(path, "w");
    if (!f)
        return 1;
    fprintf(f, "%lx %zx jit_hot\n", (unsigned long)page, sizeof loop_code);
    fprintf(f, "%lx %zx jit_cold\n", (unsigned long)(page + 64), sizeof loop_code);
    fclose(f);
    loop_fn hot = (loop_fn)page, cold = (loop_fn)(page + 64);
    for (long r = 0; r < rounds; r++) {
        long unit = next_unit(1000000);
        hot(3 * unit);
        cold(unit);
    }
    printf("%s\n", path);
    return 0;
}
