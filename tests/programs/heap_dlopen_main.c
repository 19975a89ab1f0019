/* Issue 12: a program that loads, after start, a library that allocates (built with musl for
 * the musl interposer, whose module list cannot be read again from inside malloc there).
 *
 *   main(): dlopen(argv[1]); lib_alloc(1000) from the library: 1000 malloc(48) at one site,
 *   the first 100 kept (4,800 bytes leaked), the other 900 freed right after allocation.
 */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv) {
    if (argc < 2)
        return 1;
    void *h = dlopen(argv[1], RTLD_NOW);
    if (!h) {
        fprintf(stderr, "%s\n", dlerror());
        return 1;
    }
    long (*lib_alloc)(int) = (long (*)(int))dlsym(h, "lib_alloc");
    if (!lib_alloc)
        return 1;
    long done = lib_alloc(1000); /* LINE:call */
    return done == 1000 ? 0 : 2;
}
