/* The whole userland of an emulated test board: PID 1 of an initramfs the test harness builds
 * (tests/src/boards.rs). It mounts proc, sys and devtmpfs, loads the virtio modules the harness
 * put next to it, runs the job, and writes every file the job left in /out to the virtual disk
 * /dev/vda, then powers off. No shell, no busybox: one static binary.
 *
 * /job holds command lines, one argument per line (typically `/rec --out /out/t.zst -- ...`),
 * with a line `--next--` between commands; they run one after the other. The stdout and stderr
 * of command N go to /out/jobN.log.
 *
 * Disk layout (read by the harness): "CROSSPROF-OUT\n", then per file "FILE <name> <size>\n"
 * followed by <size> raw bytes, then "STATUS <N> <wait status>\n" per command, then "END\n".
 *
 * Built statically with Debian's cross gcc, e.g.
 *   aarch64-linux-gnu-gcc -static -O2 -o init tests/boards/init.c */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void say(const char *what) {
    fprintf(stderr, "board-init: %s\n", what);
}

static void power_off(void) {
    sync();
    reboot(RB_POWER_OFF);
    for (;;) pause();
}

static void load_module(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return; /* built in, or not needed */
    if (syscall(SYS_finit_module, fd, "", 0) != 0 && errno != EEXIST)
        fprintf(stderr, "board-init: cannot load %s: %s\n", path, strerror(errno));
    close(fd);
}

static int write_all(int fd, const void *buf, size_t n) {
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static void copy_out(int disk, const char *name) {
    char path[512];
    snprintf(path, sizeof path, "/out/%s", name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) return;
    char hdr[600];
    int n = snprintf(hdr, sizeof hdr, "FILE %s %lld\n", name, (long long)st.st_size);
    write_all(disk, hdr, (size_t)n);
    static char buf[1 << 16];
    long long left = st.st_size;
    while (left > 0) {
        ssize_t r = read(fd, buf, sizeof buf);
        if (r <= 0) break;
        write_all(disk, buf, (size_t)r);
        left -= r;
    }
    /* Keep the layout parseable even if the file shrank under us. */
    memset(buf, 0, sizeof buf);
    while (left > 0) {
        size_t k = left > (long long)sizeof buf ? sizeof buf : (size_t)left;
        write_all(disk, buf, k);
        left -= (long long)k;
    }
    close(fd);
}

int main(void) {
    mount("proc", "/proc", "proc", 0, NULL);
    mount("sysfs", "/sys", "sysfs", 0, NULL);
    mount("devtmpfs", "/dev", "devtmpfs", 0, NULL);
    /* The tracepoints rec samples (wakeups, system calls) are found through tracefs. */
    mount("tracefs", "/sys/kernel/tracing", "tracefs", 0, NULL);
    load_module("/lib/modules/virtio_mmio.ko");
    load_module("/lib/modules/virtio_blk.ko");

    /* Read the job: one argument per line. */
    static char job[8192];
    int jf = open("/job", O_RDONLY | O_CLOEXEC);
    ssize_t jn = jf >= 0 ? read(jf, job, sizeof job - 1) : -1;
    if (jn <= 0) {
        say("no /job");
        power_off();
    }
    job[jn] = 0;
    char *args[256];
    int nargs = 0;
    for (char *line = strtok(job, "\n"); line && nargs < 255; line = strtok(NULL, "\n")) args[nargs++] = line;
    args[nargs] = NULL;

    mkdir("/out", 0755);
    int statuses[32], njobs = 0;
    for (int at = 0; at < nargs && njobs < 32;) {
        char **argv = &args[at];
        int n = 0;
        while (at + n < nargs && strcmp(args[at + n], "--next--") != 0) n++;
        args[at + n] = NULL; /* the separator or the end */
        at += n + 1;
        if (n == 0) continue;
        char logname[32];
        snprintf(logname, sizeof logname, "/out/job%d.log", njobs);
        int status = -1;
        pid_t pid = fork();
        if (pid == 0) {
            int log = open(logname, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (log >= 0) {
                dup2(log, 1);
                dup2(log, 2);
            }
            execv(argv[0], argv);
            fprintf(stderr, "board-init: cannot execute %s: %s\n", argv[0], strerror(errno));
            _exit(127);
        }
        /* PID 1 also reaps orphans: wait for the command itself. */
        for (;;) {
            int s;
            pid_t w = wait(&s);
            if (w == pid) {
                status = s;
                break;
            }
            if (w < 0 && errno != EINTR) break;
        }
        statuses[njobs++] = status;
    }

    /* The disk appears once virtio_blk has probed it. */
    int disk = -1;
    for (int i = 0; i < 200 && disk < 0; i++) {
        disk = open("/dev/vda", O_WRONLY | O_CLOEXEC);
        if (disk < 0) usleep(25000);
    }
    if (disk < 0) {
        say("no /dev/vda to write the results to");
        power_off();
    }
    const char *magic = "CROSSPROF-OUT\n";
    write_all(disk, magic, strlen(magic));
    DIR *d = opendir("/out");
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        if (e->d_name[0] != '.') copy_out(disk, e->d_name);
    for (int i = 0; i < njobs; i++) {
        char line[64];
        int n = snprintf(line, sizeof line, "STATUS %d %d\n", i, statuses[i]);
        write_all(disk, line, (size_t)n);
    }
    write_all(disk, "END\n", 4);
    fsync(disk);
    close(disk);
    say("done");
    power_off();
    return 0;
}
