/* Ground truth for fault events: touch_pages() writes one byte to every 4 KiB page of a 64 MiB
 * anonymous mapping with transparent huge pages off (MADV_NOHUGEPAGE), so it takes exactly
 * 16,384 minor faults, every one at an address inside that mapping. Prints the mapping's
 * address and length: "mapping 0x... 67108864", before touching it. With WAIT_MS it then sleeps
 * that long before touching, so that a recorder can attach (rec -p) to a process whose mapping
 * already exists.
 * Usage: page_faults [WAIT_MS] */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#define SIZE (64UL << 20)
#define PAGE 4096UL

__attribute__((noinline)) static void touch_pages(volatile char *p) {
    for (unsigned long i = 0; i < SIZE; i += PAGE) p[i] = 1;
}

int main(int argc, char **argv) {
    char *p = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 1;
    /* A kernel built without transparent huge pages (Debian's armmp) refuses the advice with
     * EINVAL: it has no huge pages to give anyway. */
    if (madvise(p, SIZE, MADV_NOHUGEPAGE) != 0 && errno != EINVAL) return 2;
    printf("mapping %p %lu\n", (void *)p, SIZE);
    fflush(stdout);
    if (argc > 1) {
        long ms = atol(argv[1]);
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0) {
        }
    }
    touch_pages(p);
    return 0;
}
