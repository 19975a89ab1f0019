/* Ground truth for `rec --max-size` (issue 14, acceptance 5): a program whose phases are
 * known in time.
 *
 *   cpu_phases FIRST MIDDLE LAST   burns FIRST seconds of CPU time in phase_first(), then
 *                              MIDDLE in phase_middle(), then LAST in phase_last(), and
 *                              prints each phase's CPU time (ns) as "phase NAME CPU_NS"
 *
 * Phases are measured in CPU time, not wall time, so the samples (and bytes) each phase
 * produces do not depend on how busy the machine is. A flight recording bounded to a few
 * seconds' worth of samples must hold phase_last() and none of phase_first(). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "burn.h"

#define PHASE(name)                                                \
    __attribute__((noinline)) void name(double secs) {            \
        double cpu = now(CLOCK_THREAD_CPUTIME_ID);                 \
        double end = cpu + secs;                                   \
        while (now(CLOCK_THREAD_CPUTIME_ID) < end) {               \
            BURN(SLICE);                                           \
        }                                                          \
        printf("phase %s %.0f\n", #name,                           \
               (now(CLOCK_THREAD_CPUTIME_ID) - cpu) * 1e9);        \
        fflush(stdout);                                            \
    }

PHASE(phase_first)
PHASE(phase_middle)
PHASE(phase_last)

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: cpu_phases FIRST MIDDLE LAST\n");
        return 2;
    }
    phase_first(atof(argv[1]));
    phase_middle(atof(argv[2]));
    phase_last(atof(argv[3]));
    return 0;
}
