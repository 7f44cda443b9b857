/* Where the results go, and making sure they got there: --json FILE is
 * written under a temporary name and renamed over FILE after the run, so a
 * run that fails (at start or later) never destroys an earlier result; a
 * report that cannot be written (a full disk, a closed stdout) is an error,
 * not a silent exit 0.
 * SPDX-License-Identifier: MIT */
#include "output.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "report.h"
#include "xalloc.h"

void output_reserve_stdio(void)
{
    /* With descriptor 1 closed, the first socket would take it and the
     * report would be written into the connection. /dev/null opened for
     * reading keeps the slot taken, and writes to it fail, as they
     * should. */
    for (int fd = 0; fd <= 2; fd++)
        if (fcntl(fd, F_GETFD) < 0 && errno == EBADF && open("/dev/null", O_RDONLY) != fd)
            die("cannot reserve descriptor %d: %s", fd, strerror(errno));
}

/* --json - sent the text report to stderr: stdout is then the JSON's. */
static bool report_on_stderr;
/* Why writing to stdout first failed, or 0. */
static int stdout_error;

void output_flush_stdout(void)
{
    errno = 0;
    if (fflush(stdout) != 0 && !stdout_error)
        stdout_error = errno ? errno : EIO;
}

void output_check_stdout(void)
{
    if (report_on_stderr)
        return;
    output_flush_stdout();
    if (stdout_error || ferror(stdout))
        die("cannot write the report to standard output: %s",
            strerror(stdout_error ? stdout_error : EIO));
}

/* "FILE.PID.tmp", beside the file it replaces. */
static char *temp_name(const char *target)
{
    return xasprintf("%s.%ld.tmp", target, (long)getpid());
}

/* Opens the temporary file (new, never an existing one), with the mode of
 * the file it will replace, if any. */
static int open_temp(const struct output_json *o, const char *tmp)
{
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0 && o->keep_mode)
        fchmod(fd, o->mode);
    return fd;
}

/* For "-" the document takes stdout to itself: the original stdout is kept
 * for it, and descriptor 1 becomes stderr, so the text report and anything
 * a script prints go to stderr. */
static void open_stdout(struct output_json *o)
{
    int fd = dup(STDOUT_FILENO);
    if (fd < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0 || !(o->f = fdopen(fd, "w")))
        die("cannot write JSON to stdout: %s", strerror(errno));
    report_on_stderr = true;
}

void output_json_open(struct output_json *o, const char *path)
{
    struct stat st;
    memset(o, 0, sizeof *o);
    o->path = path;
    if (strcmp(path, "-") == 0) {
        open_stdout(o);
        return;
    }
    bool exists = stat(path, &st) == 0;
    if (exists && S_ISDIR(st.st_mode))
        die("cannot open %s: %s", path, strerror(EISDIR));
    /* A device or a pipe (/dev/stdout, a FIFO) is written in place: there
     * is no earlier result in it to keep, nor a file to rename over it. */
    if (exists && !S_ISREG(st.st_mode)) {
        if (!(o->f = fopen(path, "w")))
            die("cannot open %s: %s", path, strerror(errno));
        return;
    }
    if (exists && access(path, W_OK) != 0)
        die("cannot open %s: %s", path, strerror(errno));
    /* The file a symbolic link points to is the one replaced. */
    o->target = exists ? realpath(path, NULL) : xstrdup(path);
    if (!o->target)
        die("cannot open %s: %s", path, strerror(errno));
    o->keep_mode = exists;
    o->mode = st.st_mode & 07777;
    /* Whether the file can be written (its directory exists, it may be
     * written) is found out now, before the run, without touching it. */
    char *tmp = temp_name(o->target);
    int fd = open_temp(o, tmp);
    if (fd < 0)
        die("cannot open %s: %s", path, strerror(errno));
    close(fd);
    unlink(tmp);
    free(tmp);
}

void output_json_abandon(struct output_json *o)
{
    if (o->f)
        fclose(o->f);
    o->f = NULL;
    free(o->target);
    o->target = NULL;
}

void output_json_write(struct output_json *o, const struct result *r)
{
    const char *what = strcmp(o->path, "-") == 0 ? "JSON to stdout" : o->path;
    if (o->f) {
        bool ok = report_json(o->f, r);
        if (fclose(o->f) != 0 || !ok)
            die("cannot write %s: %s", what, strerror(errno));
        o->f = NULL;
        return;
    }
    char *tmp = temp_name(o->target);
    int fd = open_temp(o, tmp);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    bool ok = f && report_json(f, r);
    if (f && fclose(f) != 0)
        ok = false;
    if (!ok || rename(tmp, o->target) != 0) {
        int err = errno;
        if (fd >= 0)
            unlink(tmp);
        die("cannot write %s: %s", what, strerror(err));
    }
    free(tmp);
    free(o->target);
    o->target = NULL;
}
