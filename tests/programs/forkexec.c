/* Ground truth for processes: the parent forks; the child execs CHILD_PROG (cpu_split) with
 * ROUNDS; the parent meanwhile runs parent_work for the same amount of work as the child's whole
 * run (4 units per round), then waits. Expected: both processes appear, the parent's
 * parent_work and the child's hot_a/hot_b share the samples 50:37.5:12.5.
 * Usage: forkexec CHILD_PROG ROUNDS */
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile uint64_t sink;

__attribute__((noinline)) void parent_work(long rounds) {
    uint64_t x = sink;
    for (long i = 0; i < rounds * 4 * 200000L; i++) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    sink = x;
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
