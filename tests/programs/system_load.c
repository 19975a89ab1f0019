/* Ground truth for `rec -a` (issue 14, acceptance 3): a program whose CPU use is known.
 *
 *   system_load full SECS      burns a core in burn_full() for SECS seconds of wall time
 *   system_load quarter SECS   in burn_quarter(): 5 ms of CPU, then 15 ms asleep, for SECS
 *                              seconds (a quarter of a core on an idle machine)
 *
 * The test reads the CPU time each run really got (getrusage of the child, /proc/PID/stat),
 * so the answer holds on a loaded machine too: every millisecond of it should be a sample. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "burn.h"

__attribute__((noinline)) void burn_full(double secs) {
    double end = now(CLOCK_MONOTONIC) + secs;
    while (now(CLOCK_MONOTONIC) < end) {
        BURN(SLICE); /* LINE:burn_full */
    }
}

__attribute__((noinline)) void burn_quarter(double secs) {
    double end = now(CLOCK_MONOTONIC) + secs;
    struct timespec nap = {0, 15 * 1000 * 1000};
    while (now(CLOCK_MONOTONIC) < end) {
        double busy_until = now(CLOCK_THREAD_CPUTIME_ID) + 0.005;
        while (now(CLOCK_THREAD_CPUTIME_ID) < busy_until) {
            BURN(SLICE); /* LINE:burn_quarter */
        }
        nanosleep(&nap, NULL);
    }
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: system_load full|quarter SECS\n");
        return 2;
    }
    double secs = atof(argv[2]);
    if (strcmp(argv[1], "full") == 0)
        burn_full(secs);
    else
        burn_quarter(secs);
    return 0;
}
