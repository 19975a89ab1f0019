/* Ground truth for memory beyond malloc (issue 25, acceptance 4).
 *   map_block():  mmap of 64 MiB of private anonymous memory; main touches every page, holds
 *                 it HOLD ms, and drop_block() unmaps it;
 *   map_small():  mmap of 256 KiB, which grow_block() mremaps to 512 KiB (it may move), and
 *                 trim_block() unmaps the first 128 KiB of: 384 KiB stay mapped to the end;
 *   big_malloc(): malloc and free of 1 MiB, which glibc serves from a mapping of its own made
 *                 inside malloc: heap memory, never one of the program's mappings;
 *   map_file():   mmap and munmap of the program's own file: file-backed, never a mapping.
 * The program writes to the file named by its first argument its own VmRSS (from
 * /proc/self/status) with CLOCK_MONOTONIC times, before the map (after 700 ms of standing
 * still), after the touch, before the unmap, after it and at the end (700 ms later)
 * ("rss NS KB"), and the times right after the 64 MiB map and right after its unmap
 * ("map NS", "unmap NS").
 * Usage: mmap_rss OUT [HOLD_MS]   (HOLD_MS, how long the block is held and how long the
 * program waits after the unmap, defaults to 700)
 * Build: gcc -O2 -g; the board runs a stripped copy. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define BLOCK (64UL << 20)
#define SMALL (256UL << 10)

static FILE *out;
static void *volatile sink;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void pause_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Writes "rss NS KB" with this process's VmRSS now. */
static void note_rss(void) {
    char line[256];
    long kb = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) exit(3);
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kb) == 1) break;
    fclose(f);
    fprintf(out, "rss %llu %ld\n", (unsigned long long)now_ns(), kb);
}

/* noipa: no clones and no inlining, so each site has one plain name. */
__attribute__((noipa)) static char *map_block(void) {
    char *p = mmap(NULL, BLOCK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0); /* LINE:map_block */
    if (p == MAP_FAILED) exit(4);
    return p;
}

__attribute__((noipa)) static void drop_block(char *p) {
    if (munmap(p, BLOCK) != 0) exit(5);
}

__attribute__((noipa)) static char *map_small(void) {
    char *p = mmap(NULL, SMALL, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) exit(6);
    return p;
}

__attribute__((noipa)) static char *grow_block(char *p) {
    char *q = mremap(p, SMALL, 2 * SMALL, MREMAP_MAYMOVE);
    if (q == MAP_FAILED) exit(7);
    return q;
}

__attribute__((noipa)) static void trim_block(char *p) {
    if (munmap(p, SMALL / 2) != 0) exit(8);
}

__attribute__((noipa)) static void big_malloc(void) {
    char *p = malloc(1 << 20);
    if (!p) exit(9);
    memset(p, 1, 1 << 20);
    sink = p;
    free(p);
}

__attribute__((noipa)) static void map_file(const char *self) {
    int fd = open(self, O_RDONLY);
    if (fd < 0) exit(10);
    void *p = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) exit(11);
    sink = p;
    munmap(p, 4096);
    close(fd);
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    long hold = argc > 2 ? atol(argv[2]) : 700;
    out = fopen(argv[1], "w");
    if (!out) return 2;
    big_malloc();
    map_file("/proc/self/exe");
    char *s = grow_block(map_small());
    memset(s, 2, 2 * SMALL);
    trim_block(s);
    pause_ms(700);
    note_rss();
    char *p = map_block();
    fprintf(out, "map %llu\n", (unsigned long long)now_ns());
    for (size_t i = 0; i < BLOCK; i += 4096) p[i] = (char)i | 1;
    note_rss();
    pause_ms(hold);
    note_rss();
    drop_block(p);
    fprintf(out, "unmap %llu\n", (unsigned long long)now_ns());
    note_rss();
    pause_ms(hold);
    note_rss();
    fclose(out);
    return 0;
}
