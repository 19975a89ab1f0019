/* Drives a `rec --snapshot` of a hung program where no shell is at hand (the boards' init runs
 * plain command lines): `snapshot_driver PROGRAM -- REC ARGS...` starts PROGRAM with its
 * standard output on a pipe, waits for its "deadlocked PID" line and 300 ms more (the threads
 * are then inside the lock), runs REC ARGS... with "-p PID" appended, and then checks that the
 * program is still there: every thread still sleeping (state S), none stopped or gone. It
 * prints "alive: N threads sleeping" or what it found instead, kills the program and exits
 * with rec's status (or 99 when the program was harmed). */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int thread_states(int pid, int *sleeping) {
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/task", pid);
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    *sleeping = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char path[128], buf[512];
        snprintf(path, sizeof path, "%s/%s/stat", dir, e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        size_t got = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[got] = 0;
        char *close = strrchr(buf, ')');
        n++;
        if (close && close[1] == ' ' && close[2] == 'S') (*sleeping)++;
    }
    closedir(d);
    return n;
}

int main(int argc, char **argv) {
    if (argc < 4 || strcmp(argv[2], "--") != 0) {
        fprintf(stderr, "usage: snapshot_driver PROGRAM -- REC ARGS...\n");
        return 2;
    }
    int fds[2];
    if (pipe(fds) != 0) return 2;
    pid_t prog = fork();
    if (prog == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        execl(argv[1], argv[1], (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    FILE *in = fdopen(fds[0], "r");
    char line[128];
    if (!in || !fgets(line, sizeof line, in) || strncmp(line, "deadlocked ", 11) != 0) {
        fprintf(stderr, "snapshot_driver: %s did not say it deadlocked\n", argv[1]);
        kill(prog, SIGKILL);
        return 2;
    }
    struct timespec wait = {0, 300 * 1000 * 1000};
    nanosleep(&wait, NULL);
    char pid[16];
    snprintf(pid, sizeof pid, "%d", (int)prog);
    int n = argc - 3;
    char **args = calloc(n + 3, sizeof *args);
    for (int i = 0; i < n; i++) args[i] = argv[3 + i];
    args[n] = "-p";
    args[n + 1] = pid;
    pid_t rec = fork();
    if (rec == 0) {
        execv(args[0], args);
        _exit(127);
    }
    int status = 0;
    waitpid(rec, &status, 0);
    nanosleep(&wait, NULL);
    int sleeping = 0, threads = thread_states(prog, &sleeping);
    int exited = waitpid(prog, NULL, WNOHANG) != 0;
    int harmed = exited || threads != 3 || sleeping != threads;
    printf("%s: %d threads, %d sleeping\n", harmed ? "HARMED" : "alive", threads, sleeping);
    fflush(stdout);
    kill(prog, SIGKILL);
    waitpid(prog, NULL, 0);
    if (harmed) return 99;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 98;
}
