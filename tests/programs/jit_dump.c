// A tiny JIT that writes a jitdump (perf's tools/perf/Documentation/jitdump-specification.txt)
// the way runtimes do: it maps the dump file executable once as a marker, so a profiler finds
// it, then logs each function it generates, with CLOCK_MONOTONIC timestamps. x86_64 only.
//
// Phases, each with a known answer:
//   1. jit_hot (with source lines) and jit_cold, called 3:1;
//   2. jit_phase_a, then jit_phase_b loaded at the same address: the same code under two names,
//      each named only for the samples taken while it was live;
//   3. jit_moved, run, then moved (JIT_CODE_MOVE) and run at its new address;
//   4. jit_outer, generated code that calls back into native code (native_spin), called from
//      main: native → JIT → native, for unwinding through JIT frames.
// Every generated function keeps a frame pointer (push rbp; mov rbp, rsp), as JITs do.
// Prints one line per load or move: "load|move NAME ADDR SIZE TIME".
// Usage: jit_dump ROUNDS DIR (the dump is written to DIR/jit-PID.dump).
// Built by tests/tests/jit_dump.rs: gcc -O2 -g jit_dump.c
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

// void f(long n) { while (n--) ; } with a frame:
//   push %rbp; mov %rsp,%rbp; test %rdi,%rdi; jz done; loop: dec %rdi; jnz loop;
//   done: pop %rbp; ret
static const unsigned char loop_code[] = {0x55, 0x48, 0x89, 0xe5, 0x48, 0x85, 0xff, 0x74,
                                          0x05, 0x48, 0xff, 0xcf, 0x75, 0xfb, 0x5d, 0xc3};
// Byte offsets where loop_code's source lines start (prologue, loop, epilogue).
static const unsigned line_offsets[] = {0, 9, 14};
static const unsigned line_numbers[] = {10, 11, 12};

// void outer(long n) { native_spin(n); } with a frame:
//   push %rbp; mov %rsp,%rbp; movabs $native_spin,%rax; call *%rax; pop %rbp; ret
static unsigned char outer_code[] = {0x55, 0x48, 0x89, 0xe5, 0x48, 0xb8, 0, 0, 0,
                                     0,    0,    0,    0,    0,    0xff, 0xd0, 0x5d, 0xc3};

typedef void (*loop_fn)(long);

__attribute__((noinline)) void native_spin(long n) {
    for (volatile long i = 0; i < n; i++)
        ;
}

static FILE *dump;
static uint64_t code_index;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void put32(uint32_t v) { fwrite(&v, 4, 1, dump); }
static void put64(uint64_t v) { fwrite(&v, 8, 1, dump); }
static void prefix(uint32_t id, uint32_t size, uint64_t time) {
    put32(id);
    put32(size);
    put64(time);
}

// JIT_CODE_DEBUG_INFO for loop_code at `addr`.
static void debug_info(unsigned char *addr, const char *file) {
    uint32_t n = sizeof line_offsets / sizeof line_offsets[0];
    uint32_t size = 16 + 16 + n * (8 + 4 + 4 + (uint32_t)strlen(file) + 1);
    prefix(2, size, now_ns());
    put64((uint64_t)(uintptr_t)addr);
    put64(n);
    for (uint32_t i = 0; i < n; i++) {
        put64((uint64_t)(uintptr_t)addr + line_offsets[i]);
        put32(line_numbers[i]);
        put32(0);
        fwrite(file, strlen(file) + 1, 1, dump);
    }
}

// Copies `code` to `addr` (inside `page`) and logs a JIT_CODE_LOAD; returns the code index.
static uint64_t load(unsigned char *page, unsigned char *addr, const unsigned char *code,
                     size_t size, const char *name) {
    mprotect(page, 4096, PROT_READ | PROT_WRITE);
    memcpy(addr, code, size);
    mprotect(page, 4096, PROT_READ | PROT_EXEC);
    uint64_t t = now_ns();
    uint32_t total = 16 + 40 + (uint32_t)strlen(name) + 1 + (uint32_t)size;
    prefix(0, total, t);
    put32((uint32_t)getpid());
    put32((uint32_t)syscall(SYS_gettid));
    put64((uint64_t)(uintptr_t)addr);
    put64((uint64_t)(uintptr_t)addr);
    put64(size);
    put64(++code_index);
    fwrite(name, strlen(name) + 1, 1, dump);
    fwrite(addr, size, 1, dump);
    fflush(dump);
    printf("load %s %lx %zx %llu\n", name, (unsigned long)addr, size, (unsigned long long)t);
    return code_index;
}

// Moves `size` bytes of code from `from` to `to` and logs a JIT_CODE_MOVE.
static void move(unsigned char *page, unsigned char *from, unsigned char *to, size_t size,
                 uint64_t index, const char *name) {
    mprotect(page, 4096, PROT_READ | PROT_WRITE);
    memcpy(to, from, size);
    memset(from, 0xcc, size);
    mprotect(page, 4096, PROT_READ | PROT_EXEC);
    uint64_t t = now_ns();
    prefix(1, 16 + 48, t);
    put32((uint32_t)getpid());
    put32((uint32_t)syscall(SYS_gettid));
    put64((uint64_t)(uintptr_t)to);
    put64((uint64_t)(uintptr_t)from);
    put64((uint64_t)(uintptr_t)to);
    put64(size);
    put64(index);
    fflush(dump);
    printf("move %s %lx %zx %llu\n", name, (unsigned long)to, size, (unsigned long long)t);
}

int main(int argc, char **argv) {
    if (argc < 3)
        return 2;
    long rounds = atol(argv[1]);
    char path[4096];
    snprintf(path, sizeof path, "%s/jit-%d.dump", argv[2], (int)getpid());
    int fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0644);
    if (fd < 0)
        return 1;
    dump = fdopen(fd, "w+");
    // The header: magic, version, header size, ELF machine (x86_64), pad, pid, time, flags.
    put32(0x4A695444);
    put32(1);
    put32(40);
    put32(62);
    put32(0);
    put32((uint32_t)getpid());
    put64(now_ns());
    put64(0);
    fflush(dump);
    // The marker: perf (and rec) find the dump through this executable mapping of it.
    void *marker = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
    if (marker == MAP_FAILED)
        return 1;

    unsigned char *page =
        mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED)
        return 1;
    debug_info(page, "/jit/hot.src");
    load(page, page, loop_code, sizeof loop_code, "jit_hot");
    load(page, page + 64, loop_code, sizeof loop_code, "jit_cold");
    loop_fn hot = (loop_fn)page, cold = (loop_fn)(page + 64);
    for (long r = 0; r < rounds; r++) {
        hot(3000000);
        cold(1000000);
    }

    loop_fn phase = (loop_fn)(page + 128);
    load(page, page + 128, loop_code, sizeof loop_code, "jit_phase_a");
    for (long r = 0; r < rounds / 2; r++)
        phase(2000000);
    load(page, page + 128, loop_code, sizeof loop_code, "jit_phase_b");
    for (long r = 0; r < rounds / 2; r++)
        phase(2000000);

    uint64_t moved = load(page, page + 256, loop_code, sizeof loop_code, "jit_moved");
    for (long r = 0; r < rounds / 4; r++)
        ((loop_fn)(page + 256))(2000000);
    move(page, page + 256, page + 320, sizeof loop_code, moved, "jit_moved");
    for (long r = 0; r < rounds / 4; r++)
        ((loop_fn)(page + 320))(2000000);

    void (*spin)(long) = native_spin;
    memcpy(outer_code + 6, &spin, 8);
    load(page, page + 512, outer_code, sizeof outer_code, "jit_outer");
    for (long r = 0; r < rounds / 2; r++)
        ((loop_fn)(page + 512))(1000000);

    prefix(3, 16, now_ns()); // JIT_CODE_CLOSE
    fclose(dump);
    munmap(marker, 4096);
    return 0;
}
