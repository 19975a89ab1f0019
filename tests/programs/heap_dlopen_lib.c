/* The library heap_dlopen_main.c loads: see there. Built with -fno-builtin, so that the
 * compiler keeps every malloc/free pair. */
#include <stdlib.h>

void *lib_kept[100];

long lib_alloc(int n) {
    long done = 0;
    for (int i = 0; i < n; i++) {
        char *p = malloc(48); /* LINE:lib_malloc */
        if (i < 100)
            lib_kept[i] = p;
        else
            free(p);
        done++;
    }
    return done;
}
