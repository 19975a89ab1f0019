/* Runs a command on an emulated board and prints, after its output, one line:
 *   timed wall_ns <ns> cpu_ns <ns> status <wait status>
 * wall time from fork to exit of the command, CPU time (user + system) of its whole process
 * tree as wait4 reports it (for `rec ... -- app`, rec and the app both). Static; used by
 * bench/board_heap_cost.py through tests/tests/board_heap_cost.rs. */
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long ns(struct timespec t) { return t.tv_sec * 1000000000LL + t.tv_nsec; }

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    pid_t pid = fork();
    if (pid == 0) {
        execv(argv[1], argv + 1);
        _exit(127);
    }
    int status = 0;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) < 0) return 2;
    clock_gettime(CLOCK_MONOTONIC, &b);
    struct rusage kids;
    getrusage(RUSAGE_CHILDREN, &kids);
    long long cpu = (kids.ru_utime.tv_sec + kids.ru_stime.tv_sec) * 1000000000LL +
                    (kids.ru_utime.tv_usec + kids.ru_stime.tv_usec) * 1000LL;
    fflush(stdout);
    printf("timed wall_ns %lld cpu_ns %lld status %d\n", ns(b) - ns(a), cpu, status);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
