/* Blocks until its fifo is opened for writing, then execs the command:
 *     waitexec FIFO PROGRAM [ARGS...]
 * The real-world CPU suite launches it under rec so that perf can attach to the same process
 * before the program runs, and both profilers then follow the exec. It is static so that no
 * C library mapping of its own is left in perf's picture of the address space: after an
 * exec, perf 6.1 attached with -p keeps the old mappings and fails to unwind through the new
 * C library. */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv) {
    char c;
    if (argc < 3) {
        fprintf(stderr, "usage: waitexec FIFO PROGRAM [ARGS...]\n");
        return 2;
    }
    int fd = open(argv[1], O_RDONLY);
    if (fd < 0) {
        perror(argv[1]);
        return 2;
    }
    (void)read(fd, &c, 1);
    close(fd);
    execv(argv[2], argv + 2);
    perror(argv[2]);
    return 127;
}
