/* A ground truth of allocation sites that needs no unwinding (issue 25): an LD_PRELOAD that
 * counts every malloc-family allocation by the return address of the call, the allocation
 * site, and writes at exit one line per site to the file named by $SITE_COUNT_OUT:
 *   <module path> <offset of the return address in the module, hex> <allocations>
 * "Allocations" as heaptrack counts them: malloc, calloc, realloc, reallocarray and the
 * aligned variants, each successful call once (free and failed calls are none).
 * No stacks, no files until exit, no threads of its own; a fixed table in an anonymous
 * mapping (no malloc), one spin lock.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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

/* Sites: open addressing, return address -> count. */
#define BITS 16
static struct site { uintptr_t ra; unsigned long n; } *sites;
static volatile int lock;

static void take(void) { while (__atomic_test_and_set(&lock, __ATOMIC_ACQUIRE)) {} }
static void give(void) { __atomic_clear(&lock, __ATOMIC_RELEASE); }

static void init(void) {
    static int started;
    if (started) return;
    started = 1;
    sites = mmap(0, sizeof *sites << BITS, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (sites == MAP_FAILED) sites = 0;
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

static void *counted(void *p, void *ra) {
    if (!p || !sites) return p;
    uintptr_t a = (uintptr_t)ra & ~(uintptr_t)1; /* the Thumb bit */
    size_t mask = ((size_t)1 << BITS) - 1, i = (size_t)((a >> 1) * 2654435761u) & mask;
    take();
    while (sites[i].ra && sites[i].ra != a) i = (i + 1) & mask;
    sites[i].ra = a;
    sites[i].n++;
    give();
    return p;
}

#define RA __builtin_return_address(0)

void *malloc(size_t n) {
    if (!real_malloc) { init(); if (!real_malloc) return boot_alloc(n); }
    return counted(real_malloc(n), RA);
}

void *calloc(size_t n, size_t m) {
    if (!real_calloc) {
        init();
        if (!real_calloc) { void *p = boot_alloc(n * m); if (p) memset(p, 0, n * m); return p; }
    }
    return counted(real_calloc(n, m), RA);
}

static void *realloc_at(void *old, size_t n, void *ra) {
    if (!real_realloc) init();
    if (from_boot(old)) {
        void *p = real_malloc(n);
        if (p) memcpy(p, old, n);
        return counted(p, ra);
    }
    return counted(real_realloc(old, n), ra);
}

void *realloc(void *old, size_t n) { return realloc_at(old, n, RA); }

void *reallocarray(void *old, size_t n, size_t m) {
    if (m && n > (size_t)-1 / m) return 0;
    return realloc_at(old, n * m, RA);
}

void free(void *p) {
    if (!p || from_boot(p)) return;
    if (!real_free) init();
    real_free(p);
}

int posix_memalign(void **out, size_t align, size_t n) {
    if (!real_posix_memalign) init();
    int r = real_posix_memalign(out, align, n);
    if (r == 0) counted(*out, RA);
    return r;
}

void *aligned_alloc(size_t align, size_t n) {
    if (!real_aligned_alloc) init();
    return counted(real_aligned_alloc(align, n), RA);
}

void *memalign(size_t align, size_t n) {
    if (!real_memalign) init();
    return counted(real_memalign(align, n), RA);
}

__attribute__((destructor)) static void report(void) {
    const char *path = getenv("SITE_COUNT_OUT");
    if (!path || !sites) return;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return;
    take();
    for (size_t i = 0; i < ((size_t)1 << BITS); i++) {
        if (!sites[i].ra) continue;
        Dl_info info;
        char line[4096];
        const char *name = "?";
        uintptr_t base = 0;
        if (dladdr((void *)sites[i].ra, &info) && info.dli_fname) {
            name = info.dli_fname;
            base = (uintptr_t)info.dli_fbase;
        }
        int n = snprintf(line, sizeof line, "%s %lx %lu\n", name,
                         (unsigned long)(sites[i].ra - base), sites[i].n);
        if (n > 0 && write(fd, line, (size_t)n) != n) break;
    }
    give();
    close(fd);
}
