/* System calls with known counts, results and callers (issue 30): 1,000 getpid from
 * getpid_loop, 500 write from write_loop of which the 100 to a closed descriptor fail with
 * EBADF, and 200 sleeps of 1 ms from sleep_loop. Each loop is its own function so that the
 * report's calling stacks name it. */
#include <fcntl.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

__attribute__((noinline)) static void getpid_loop(void) {
    for (int i = 0; i < 1000; i++) syscall(SYS_getpid);
}

__attribute__((noinline)) static void write_loop(int fd) {
    for (int i = 0; i < 400; i++) (void)!write(fd, "x", 1);
    for (int i = 0; i < 100; i++) (void)!write(-1, "x", 1);
}

__attribute__((noinline)) static void sleep_loop(void) {
    struct timespec ms = {0, 1000000};
    for (int i = 0; i < 200; i++) nanosleep(&ms, NULL);
}

int main(void) {
    int fd = open("/dev/null", O_WRONLY);
    if (fd < 0) {
        perror("/dev/null");
        return 1;
    }
    getpid_loop();
    write_loop(fd);
    sleep_loop();
    return 0;
}
