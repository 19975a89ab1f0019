/* Ground truth for fault events: touch_pages() writes one byte to every 4 KiB page of a 64 MiB
 * anonymous mapping with transparent huge pages off (MADV_NOHUGEPAGE), so it takes exactly
 * 16,384 minor faults, every one at an address inside that mapping. Prints the mapping's
 * address and length: "mapping 0x... 67108864", before touching it. With `wait` it then waits
 * for the end of its standard input before touching, so that a recorder can attach (rec -p) to
 * a process whose mapping already exists: the test closes it once rec is recording, which no
 * fixed sleep can promise on a loaded machine.
 * Usage: page_faults [wait] */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

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
    if (argc > 1 && strcmp(argv[1], "wait") == 0) {
        char buf[64];
        ssize_t n;
        do n = read(0, buf, sizeof buf);
        while (n > 0 || (n < 0 && errno == EINTR));
    }
    touch_pages(p);
    return 0;
}
