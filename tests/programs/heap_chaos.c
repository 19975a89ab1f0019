/* The classic traps, with exact expected counts (sizes no other code uses):
 *   main:    a thread makes 300 x malloc(40001) leaked;
 *            raise(SIGUSR1) 100 times, the handler does malloc(40019) + free;
 *            a second thread sends SIGUSR2 to main 2,000 times while main makes 20,000
 *            malloc(40003)/free pairs; when a SIGUSR2 interrupts the code of whatever module
 *            defines malloc (the interposer under rec --heap), the handler makes
 *            malloc(40021)/free and counts it (interrupting the C library's own malloc would
 *            be the program's bug, so it does not allocate then);
 *            fork: the child makes 100 x malloc(40009) leaked and _exit(0)s;
 *            then exec of itself with "exec": the new image makes 50 x malloc(40013) and exits.
 *   "kill":  200 x malloc(40031) leaked, then SIGKILLs itself.
 *   "long N DONE GO": malloc(40037)/free pairs until the file GO exists (the test kills rec,
 *            then creates it; at most 2 minutes, should the test die first), then N more,
 *            then writes "done" to the file DONE: it allocates before and after rec dies,
 *            however fast the processor.
 * Prints "usr2_allocs=K" (the handler's count) on stdout before the exec. */
#define _GNU_SOURCE
#include <link.h>
#include <pthread.h>
#include <ucontext.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void *volatile sink;
static volatile sig_atomic_t usr2_allocs;
static volatile int storm_done;
static pthread_t main_thread;

static void on_usr1(int sig) { (void)sig; void *p = malloc(40019); sink = p; free(p); }
static uintptr_t malloc_lo, malloc_hi;

static int find_malloc_module(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    uintptr_t target = (uintptr_t)data;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && target >= lo && target < hi) {
            malloc_lo = lo;
            malloc_hi = hi;
            return 1;
        }
    }
    return 0;
}

static void on_usr2(int sig, siginfo_t *si, void *ctx) {
    (void)sig; (void)si;
    ucontext_t *uc = ctx;
#if defined(__x86_64__)
    uintptr_t pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
    uintptr_t pc = (uintptr_t)uc->uc_mcontext.pc;
#else
    uintptr_t pc = 0;
#endif
    if (pc >= malloc_lo && pc < malloc_hi) {
        void *p = malloc(40021); sink = p; free(p); usr2_allocs++;
    }
}

static void *leaker(void *arg) { (void)arg; for (int i = 0; i < 300; i++) sink = malloc(40001); return NULL; }
static void *stormer(void *arg) {
    (void)arg;
    for (int i = 0; i < 2000 && !storm_done; i++) { pthread_kill(main_thread, SIGUSR2); usleep(50); }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "exec") == 0) {
        for (int i = 0; i < 50; i++) sink = malloc(40013);
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "kill") == 0) {
        for (int i = 0; i < 200; i++) sink = malloc(40031);
        kill(getpid(), SIGKILL);
        return 1;
    }
    if (argc > 4 && strcmp(argv[1], "long") == 0) {
        long n = atol(argv[2]);
        time_t give_up = time(NULL) + 120;
        while (access(argv[4], F_OK) != 0 && time(NULL) < give_up)
            for (int i = 0; i < 10000; i++) { void *p = malloc(40037); sink = p; free(p); }
        for (long i = 0; i < n; i++) { void *p = malloc(40037); sink = p; free(p); }
        FILE *f = fopen(argv[3], "w");
        if (f) { fputs("done\n", f); fclose(f); }
        return 0;
    }
    main_thread = pthread_self();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigaction(SIGUSR1, &sa, NULL);
    void *(*volatile m)(size_t) = malloc;
    dl_iterate_phdr(find_malloc_module, (void *)(uintptr_t)m);
    sa.sa_handler = NULL;
    sa.sa_sigaction = on_usr2;
    sa.sa_flags = SA_RESTART | SA_SIGINFO;
    sigaction(SIGUSR2, &sa, NULL);
    pthread_t t1, t2;
    pthread_create(&t1, NULL, leaker, NULL);
    for (int i = 0; i < 100; i++) raise(SIGUSR1);
    pthread_create(&t2, NULL, stormer, NULL);
    for (int i = 0; i < 20000; i++) { void *p = malloc(40003); sink = p; free(p); }
    storm_done = 1;
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    pid_t c = fork();
    if (c == 0) {
        for (int i = 0; i < 100; i++) sink = malloc(40009);
        _exit(0);
    }
    int st;
    waitpid(c, &st, 0);
    printf("usr2_allocs=%d\n", (int)usr2_allocs);
    fflush(stdout);
    execl("/proc/self/exe", argv[0], "exec", (char *)NULL);
    return 127;
}
