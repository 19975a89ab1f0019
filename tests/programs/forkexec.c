/* Ground truth for processes: the parent forks; the child execs CHILD_PROG (cpu_split) with
 * ROUNDS; the parent meanwhile runs parent_work for the same amount of work as the child's whole
 * run (4 units per round), then waits. Expected: both processes appear, the parent's
 * parent_work and the child's hot_a/hot_b share the samples 50:37.5:12.5.
 * parent_work runs cpu_split's own loop (burn.h) on the same sequence of round sizes
 * (next_unit), so those are shares of counted iterations of one loop body: the same on every
 * processor.
 * Usage: forkexec CHILD_PROG ROUNDS */
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "burn.h"

#define UNIT 200000L

__attribute__((noinline)) void parent_work(long rounds) {
    for (long r = 0; r < rounds; r++) BURN(4 * next_unit(UNIT));
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    pid_t child = fork();
    if (child == 0) {
        execl(argv[1], argv[1], argv[2], (char *)NULL);
        _exit(127);
    }
    parent_work(atol(argv[2]));
    int status = 0;
    waitpid(child, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
