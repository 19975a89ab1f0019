/* The library heap_dlopen_stress.c loads and unloads in a loop: see there. Built with
 * -fno-builtin, so that the compiler keeps every malloc/free pair. */
#include <stdlib.h>

long lib_churn(int n) {
    long done = 0;
    for (int i = 0; i < n; i++) {
        char *p = malloc(40); /* LINE:lib_malloc */
        if (!p)
            break;
        p[0] = (char)i;
        free(p);
        done++;
    }
    return done;
}
