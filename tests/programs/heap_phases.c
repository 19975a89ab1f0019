/* A daemon-like program with a known number of allocations per phase, for `rec --heap -p PID`
 * (issue 27): it runs phase N when it reads the line "N" on standard input, prints
 * "phase N done" after it, and on "q" checks its data and prints "result ok" (or "result BAD").
 *
 * phase 1: 300 blocks of 48 bytes kept (freed in phase 2: frees of blocks allocated before an
 *          attach that happens between the phases), 100 malloc/free pairs of 16 bytes.
 * phase 2: two_temporary: 1000 x malloc(64) each freed at once (temporary);
 *          two_leak: 200 x calloc(1, 32) never freed;
 *          two_grow: 1 malloc(16) then 50 reallocs growing by 16, freed.
 * phase 3: 500 x malloc(128) freed, and the phase-2 leaks checked (still zeroed).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *kept[300];
static void *leaks[200];

__attribute__((noinline)) static void one_keep(void) {
    for (int i = 0; i < 300; i++) kept[i] = malloc(48);
}

__attribute__((noinline)) static void one_churn(void) {
    for (int i = 0; i < 100; i++) {
        char *p = malloc(16);
        p[0] = (char)i;
        free(p);
    }
}

__attribute__((noinline)) static void two_temporary(void) {
    for (int i = 0; i < 1000; i++) {
        volatile char *p = malloc(64); /* LINE:two_temporary */
        p[0] = (char)i;
        free((void *)p);
    }
}

__attribute__((noinline)) static void two_leak(void) {
    for (int i = 0; i < 200; i++) leaks[i] = calloc(1, 32); /* LINE:two_leak */
}

__attribute__((noinline)) static void two_grow(void) {
    char *p = malloc(16);
    for (int i = 2; i <= 51; i++) p = realloc(p, 16 * i); /* LINE:two_grow */
    free(p);
}

__attribute__((noinline)) static void two_release(void) {
    for (int i = 0; i < 300; i++) free(kept[i]);
}

__attribute__((noinline)) static void three_churn(void) {
    for (int i = 0; i < 500; i++) {
        volatile char *p = malloc(128);
        p[0] = (char)i;
        free((void *)p);
    }
}

int main(void) {
    char line[32];
    int ok = 1;
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("ready\n");
    while (fgets(line, sizeof line, stdin)) {
        if (line[0] == '1') {
            one_keep();
            one_churn();
        } else if (line[0] == '2') {
            two_temporary();
            two_leak();
            two_grow();
            two_release();
        } else if (line[0] == '3') {
            three_churn();
            for (int i = 0; i < 200; i++)
                for (int j = 0; j < 32; j++) ok &= ((char *)leaks[i])[j] == 0;
        } else if (line[0] == 'q') {
            printf("result %s\n", ok ? "ok" : "BAD");
            return ok ? 0 : 1;
        } else {
            continue;
        }
        printf("phase %c done\n", line[0]);
    }
    return 2;
}
