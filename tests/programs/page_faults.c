/* Ground truth for fault events: touch_pages() writes one byte to every 4 KiB page of a 64 MiB
 * anonymous mapping with transparent huge pages off (MADV_NOHUGEPAGE), so it takes exactly
 * 16,384 minor faults, every one at an address inside that mapping. Prints the mapping's
 * address and length: "mapping 0x... 67108864".
 * Usage: page_faults */
#include <errno.h>
#include <stdio.h>
#include <sys/mman.h>

#define SIZE (64UL << 20)
#define PAGE 4096UL

__attribute__((noinline)) static void touch_pages(volatile char *p) {
    for (unsigned long i = 0; i < SIZE; i += PAGE) p[i] = 1;
}

int main(void) {
    char *p = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 1;
    /* A kernel built without transparent huge pages (Debian's armmp) refuses the advice with
     * EINVAL: it has no huge pages to give anyway. */
    if (madvise(p, SIZE, MADV_NOHUGEPAGE) != 0 && errno != EINVAL) return 2;
    touch_pages(p);
    printf("mapping %p %lu\n", (void *)p, SIZE);
    return 0;
}
