/* Drives an attach to tests/programs/heap_phases.c where no shell is at hand (the boards' init
 * runs plain command lines): `heap_attach_driver PROGRAM MARKER STOP -- TOOL ARGS...` starts
 * PROGRAM, runs its phase 1, starts TOOL ARGS... -p PID with its output on a pipe (echoed) and
 * waits for a line containing MARKER (the tool has attached), runs phase 2, then with STOP
 * "stop" sends the tool SIGINT and waits for it, runs phase 3 and quits the program. It
 * prints the program's "result" line and exits 0 when the program ended well and the tool
 * exited 0, else 1. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static FILE *to_prog, *from_prog;

static void expect(const char *what) {
    char line[128];
    if (!fgets(line, sizeof line, from_prog) || strncmp(line, what, strlen(what)) != 0) {
        fprintf(stderr, "heap_attach_driver: expected \"%s\", got \"%s\"\n", what, line);
        exit(1);
    }
}

static void phase(const char *n) {
    char done[32];
    fprintf(to_prog, "%s\n", n);
    fflush(to_prog);
    snprintf(done, sizeof done, "phase %s done", n);
    expect(done);
}

int main(int argc, char **argv) {
    if (argc < 6 || strcmp(argv[4], "--") != 0) {
        fprintf(stderr, "usage: heap_attach_driver PROGRAM MARKER stop|wait -- TOOL ARGS...\n");
        return 2;
    }
    int in[2], out[2], tool_out[2];
    if (pipe(in) || pipe(out)) return 2;
    pid_t prog = fork();
    if (prog == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[1]);
        close(out[0]);
        execl(argv[1], argv[1], (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    to_prog = fdopen(in[1], "w");
    from_prog = fdopen(out[0], "r");
    expect("ready");
    phase("1");
    char pid[16];
    snprintf(pid, sizeof pid, "%d", (int)prog);
    int n = argc - 5;
    char **args = calloc(n + 3, sizeof *args);
    for (int i = 0; i < n; i++) args[i] = argv[5 + i];
    args[n] = "-p";
    args[n + 1] = pid;
    /* Made after the program started, which must not hold its write end open. */
    if (pipe(tool_out)) return 2;
    pid_t tool = fork();
    if (tool == 0) {
        dup2(tool_out[1], 1);
        dup2(tool_out[1], 2);
        close(tool_out[0]);
        close(in[1]);
        close(out[0]);
        execvp(args[0], args);
        _exit(127);
    }
    close(tool_out[1]);
    FILE *from_tool = fdopen(tool_out[0], "r");
    char line[512];
    int attached = 0;
    while (!attached && fgets(line, sizeof line, from_tool)) {
        fputs(line, stderr);
        attached = strstr(line, argv[2]) != NULL;
    }
    if (!attached) {
        fprintf(stderr, "heap_attach_driver: the tool never said \"%s\"\n", argv[2]);
        kill(prog, SIGKILL);
        return 1;
    }
    phase("2");
    int status = 0;
    if (strcmp(argv[3], "stop") == 0) {
        kill(tool, SIGINT);
        while (fgets(line, sizeof line, from_tool)) fputs(line, stderr);
        waitpid(tool, &status, 0);
    }
    phase("3");
    fprintf(to_prog, "q\n");
    fflush(to_prog);
    char result[64] = "";
    if (!fgets(result, sizeof result, from_prog)) strcpy(result, "no result\n");
    printf("%s", result);
    int prog_status = 0;
    waitpid(prog, &prog_status, 0);
    if (strcmp(argv[3], "stop") != 0) {
        while (fgets(line, sizeof line, from_tool)) fputs(line, stderr);
        waitpid(tool, &status, 0);
    }
    int good = WIFEXITED(prog_status) && WEXITSTATUS(prog_status) == 0 &&
               strncmp(result, "result ok", 9) == 0 && WIFEXITED(status) &&
               WEXITSTATUS(status) == 0;
    if (!good) fprintf(stderr, "heap_attach_driver: program status %d, tool status %d\n", prog_status, status);
    return good ? 0 : 1;
}
