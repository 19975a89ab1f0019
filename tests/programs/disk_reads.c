// Reads a block device with O_DIRECT for a given number of rounds, so the time goes to the
// kernel's block and virtio drivers (loadable modules on Debian's kernels: virtio_blk,
// virtio_mmio). Used by tests/tests/board_kernel_modules.rs on the emulated boards, whose
// output disk is /dev/vda. It first sets the disk's I/O scheduler to "none" (when it can), so
// requests go to the driver from this process rather than from a kernel worker thread.
// Built by the test: <arch>-linux-gnu-gcc -O2 disk_reads.c
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    const char *dev = argc > 1 ? argv[1] : "/dev/vda";
    long rounds = argc > 2 ? atol(argv[2]) : 2000;
    const char *name = strrchr(dev, '/');
    char sched[256];
    snprintf(sched, sizeof sched, "/sys/block/%s/queue/scheduler", name ? name + 1 : dev);
    FILE *s = fopen(sched, "w");
    if (s) {
        fputs("none", s);
        fclose(s);
    }
    int fd = open(dev, O_RDONLY | O_DIRECT);
    if (fd < 0) {
        perror(dev);
        return 1;
    }
    void *buf;
    if (posix_memalign(&buf, 4096, 4096) != 0)
        return 1;
    long bytes = 0;
    for (long r = 0; r < rounds; r++) {
        // Spread over the first 16 MiB: no two reads in a row hit the same block.
        off_t at = (off_t)((r * 7919) % 4096) * 4096;
        ssize_t n = pread(fd, buf, 4096, at);
        if (n < 0) {
            perror("pread");
            return 1;
        }
        bytes += n;
    }
    printf("read %ld bytes\n", bytes);
    return 0;
}
