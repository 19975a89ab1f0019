/* Ground truth for heap event counts: every call below uses a size no other code uses, so the
 * test can count exactly. Built without frame pointers (-O2 -fomit-frame-pointer): the stacks
 * must still reach main through level1/level2/level3.
 *   1000 x malloc(10007) + free            -> 1000 Alloc, 1000 Free
 *   calloc(3, 3331) leaked                  -> 1 Alloc of 9993
 *   realloc(NULL, 20011) -> realloc(p, 20021) -> free: Alloc 20011; Free+Alloc 20021; Free
 *   posix_memalign 30011, aligned_alloc 30016, memalign 30029, valloc 30047, pvalloc 30059,
 *   reallocarray(NULL, 7, 4289) = 30023: one Alloc each, all freed
 *   free(NULL) x 5                          -> nothing */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdlib.h>

static void *volatile keep;

__attribute__((noinline)) void level3(int i) {
    void *p = malloc(10007);
    keep = p;
    free(p);
    (void)i;
}
__attribute__((noinline)) void level2(int i) { level3(i); keep = 0; }
__attribute__((noinline)) void level1(int i) { level2(i); keep = 0; }

int main(void) {
    for (int i = 0; i < 1000; i++) level1(i);
    keep = calloc(3, 3331);
    void *p = realloc(NULL, 20011);
    p = realloc(p, 20021);
    free(p);
    void *q = NULL;
    if (posix_memalign(&q, 64, 30011) == 0) free(q);
    keep = aligned_alloc(64, 30016);
    free(keep);
    free(memalign(32, 30029));
    free(valloc(30047));
    free(pvalloc(30059));
    free(reallocarray(NULL, 7, 4289));
    for (int i = 0; i < 5; i++) free(NULL);
    return 0;
}
