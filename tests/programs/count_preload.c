/* A third opinion on heap counts (issue 25): the plainest possible LD_PRELOAD that counts
 * every call to the malloc family and the blocks still live when the process ends, with
 * no stacks, no files, no threads of its own. Where rec and heaptrack disagree on a program,
 * this says which one counted what the program did.
 *
 * When its destructor runs (from the dynamic loader's exit handler) it asks libstdc++ to
 * release its start-up pool, as heaptrack and rec do, then writes one line to the file named
 * by $COUNT_PRELOAD_OUT:
 *   calls N malloc N calloc N realloc N free N memalign N live_blocks N live_bytes N
 * That is not the end: exit handlers registered before the loader's (C++ static destructors
 * of libraries initialized before main) run after it, and glibc frees its blocks of exit
 * handlers as it goes. So every free from then on writes the line again: the file holds the
 * counts as the process left them.
 * "calls" counts what heaptrack counts: every malloc, calloc, realloc and aligned allocation
 * (realloc counts once; a failed one, or free(NULL), is not an allocation).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void (*real_free)(void *);
static int (*real_posix_memalign)(void **, size_t, size_t);
static void *(*real_aligned_alloc)(size_t, size_t);
static void *(*real_memalign)(size_t, size_t);

/* Allocations made while dlsym looks the real functions up. */
static char boot[65536];
static size_t boot_used;

enum { MALLOC, CALLOC, REALLOC, FREE, MEMALIGN, KINDS };
static unsigned long counts[KINDS];

/* Live blocks: open addressing, address -> size, in an anonymous mapping (2^24 slots). */
#define BITS 24
static struct slot { uintptr_t addr; size_t size; } *table;
static unsigned long live_blocks, live_bytes;
static volatile int lock;
/* The output file, once the destructor ran (-1 before). */
static int out_fd = -1;

static void take(void) { while (__atomic_test_and_set(&lock, __ATOMIC_ACQUIRE)) {} }
static void give(void) { __atomic_clear(&lock, __ATOMIC_RELEASE); }

static size_t home(uintptr_t a) { return (size_t)((a >> 4) * 0x9e3779b97f4a7c15ull >> (64 - BITS)); }

static void remember(void *p, size_t size) {
    if (!p || !table) return;
    size_t i = home((uintptr_t)p), mask = (1u << BITS) - 1;
    while (table[i].addr && table[i].addr != (uintptr_t)p) i = (i + 1) & mask;
    if (table[i].addr) { live_bytes -= table[i].size; live_blocks--; }
    table[i].addr = (uintptr_t)p;
    table[i].size = size;
    live_blocks++;
    live_bytes += size;
}

static void forget(void *p) {
    if (!p || !table) return;
    size_t mask = (1u << BITS) - 1, i = home((uintptr_t)p);
    while (table[i].addr && table[i].addr != (uintptr_t)p) i = (i + 1) & mask;
    if (!table[i].addr) return;
    live_blocks--;
    live_bytes -= table[i].size;
    /* Backward-shift deletion. */
    size_t hole = i;
    for (size_t j = (i + 1) & mask; table[j].addr; j = (j + 1) & mask) {
        size_t h = home(table[j].addr);
        if (((j - h) & mask) >= ((j - hole) & mask)) { table[hole] = table[j]; hole = j; }
    }
    table[hole].addr = 0;
}

static void init(void) {
    static int started;
    if (started) return;
    started = 1;
    table = mmap(0, sizeof *table << BITS, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (table == MAP_FAILED) table = 0;
    real_malloc = dlsym(RTLD_NEXT, "malloc");
    real_calloc = dlsym(RTLD_NEXT, "calloc");
    real_realloc = dlsym(RTLD_NEXT, "realloc");
    real_free = dlsym(RTLD_NEXT, "free");
    real_posix_memalign = dlsym(RTLD_NEXT, "posix_memalign");
    real_aligned_alloc = dlsym(RTLD_NEXT, "aligned_alloc");
    real_memalign = dlsym(RTLD_NEXT, "memalign");
}

static int from_boot(void *p) { return (char *)p >= boot && (char *)p < boot + sizeof boot; }

static void *boot_alloc(size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (boot_used + n > sizeof boot) return 0;
    void *p = boot + boot_used;
    boot_used += n;
    return p;
}

static void *counted(int kind, void *p, size_t size) {
    if (!p) return p;
    take();
    counts[kind]++;
    remember(p, size);
    give();
    return p;
}

void *malloc(size_t n) {
    if (!real_malloc) { init(); if (!real_malloc) return boot_alloc(n); }
    return counted(MALLOC, real_malloc(n), n);
}

void *calloc(size_t n, size_t m) {
    if (!real_calloc) {
        init();
        if (!real_calloc) { void *p = boot_alloc(n * m); if (p) memset(p, 0, n * m); return p; }
    }
    return counted(CALLOC, real_calloc(n, m), n * m);
}

void *realloc(void *old, size_t n) {
    if (!real_realloc) init();
    if (from_boot(old)) {
        void *p = malloc(n);
        if (p) memcpy(p, old, n);
        return p;
    }
    void *p = real_realloc(old, n);
    if (!p) return p;
    take();
    forget(old);
    give();
    return counted(REALLOC, p, n);
}

static void write_counts(void);

void free(void *p) {
    if (!p || from_boot(p)) return;
    if (!real_free) init();
    take();
    counts[FREE]++;
    forget(p);
    give();
    real_free(p);
    if (out_fd >= 0) write_counts();
}

int posix_memalign(void **out, size_t align, size_t n) {
    if (!real_posix_memalign) init();
    int r = real_posix_memalign(out, align, n);
    if (r == 0) counted(MEMALIGN, *out, n);
    return r;
}

void *aligned_alloc(size_t align, size_t n) {
    if (!real_aligned_alloc) init();
    return counted(MEMALIGN, real_aligned_alloc(align, n), n);
}

void *memalign(size_t align, size_t n) {
    if (!real_memalign) init();
    return counted(MEMALIGN, real_memalign(align, n), n);
}

/* Rewrites the counts line at the start of the output file. */
static void write_counts(void) {
    char line[256];
    take();
    unsigned long calls = counts[MALLOC] + counts[CALLOC] + counts[REALLOC] + counts[MEMALIGN];
    int n = snprintf(line, sizeof line,
                     "calls %lu malloc %lu calloc %lu realloc %lu free %lu memalign %lu "
                     "live_blocks %lu live_bytes %lu\n",
                     calls, counts[MALLOC], counts[CALLOC], counts[REALLOC], counts[FREE],
                     counts[MEMALIGN], live_blocks, live_bytes);
    give();
    if (pwrite(out_fd, line, (size_t)n, 0) != n || ftruncate(out_fd, n) != 0) _exit(3);
}

__attribute__((destructor)) static void report(void) {
    void (*freeres)(void) = dlsym(RTLD_DEFAULT, "_ZN9__gnu_cxx9__freeresEv");
    if (freeres) freeres();
    const char *path = getenv("COUNT_PRELOAD_OUT");
    if (!path) return;
    out_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out_fd >= 0) write_counts();
}
