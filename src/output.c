/* Where the results go, and making sure they got there: no two outputs on
 * one file, nor one on the script or an input; --json FILE is written
 * under a temporary name and renamed over FILE after the run, so a run that
 * fails (at start or later) never destroys an earlier result; a report or
 * an output file that cannot be written (a full disk, a closed stdout) is
 * an error, each said in one line, not a silent exit 0.
 * SPDX-License-Identifier: MIT */
#include "output.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
/* An output file could not be written: said already, exit 1 at the end. */
static bool any_failed;

void output_flush_stdout(void)
{
    errno = 0;
    if (fflush(stdout) != 0 && !stdout_error)
        stdout_error = errno ? errno : EIO;
}

void output_failed(const char *option, const char *path, int err)
{
    if (strcmp(path, "-") == 0)
        fprintf(stderr, "volley: cannot write to stdout (%s): %s\n", option,
                strerror(err ? err : EIO));
    else
        fprintf(stderr, "volley: cannot write %s (%s): %s\n", path, option,
                strerror(err ? err : EIO));
    any_failed = true;
}

void output_check(void)
{
    if (!report_on_stderr) {
        output_flush_stdout();
        if (stdout_error || ferror(stdout)) {
            fprintf(stderr, "volley: cannot write the report to standard output: %s\n",
                    strerror(stdout_error ? stdout_error : EIO));
            any_failed = true;
        }
    }
    /* as die() ends: the streams flushed, no atexit handlers */
    if (any_failed) {
        fflush(NULL);
        _exit(1);
    }
}

/* ---- two outputs on one file ---------------------------------------------- */

/* Where a path leads: standard output, an existing file (device and inode),
 * or for a file still to be created, its path with the directory resolved.
 * A pipe or a socket reached through a descriptor's name (/dev/stderr) has
 * no path: several writers may share one on purpose (volley-kube sends a
 * pod's result and timeline into its one log, to be told apart there). */
struct place {
    const char *given;
    bool is_stdout, exists, regular, device;
    dev_t dev;
    ino_t ino;
    char *path;
};

static bool names_stdout(const char *path)
{
    return strcmp(path, "-") == 0 || strcmp(path, "/dev/stdout") == 0 ||
           strcmp(path, "/dev/fd/1") == 0 || strcmp(path, "/proc/self/fd/1") == 0;
}

/* The file that writing to path creates, when path does not exist yet: a
 * symbolic link that leads nowhere creates the file it names, as a shell's
 * > does (relative to the link's directory), through any number of links
 * up to the kernel's limit. A copy of path otherwise; NULL for a loop. */
static char *created_by(const char *path)
{
    char *cur = xstrdup(path), buf[PATH_MAX];
    struct stat st;
    for (int hops = 0; lstat(cur, &st) == 0 && S_ISLNK(st.st_mode); hops++) {
        ssize_t n = readlink(cur, buf, sizeof buf - 1);
        if (n < 0 || hops == 40) {
            free(cur);
            return NULL;
        }
        buf[n] = '\0';
        const char *slash = strrchr(cur, '/');
        char *next = buf[0] == '/' || !slash ? xstrdup(buf)
                                             : xasprintf("%.*s/%s", (int)(slash - cur), cur, buf);
        free(cur);
        cur = next;
    }
    return cur;
}

/* The path of a file that does not exist yet: its directory's real path
 * and its name, so that "x" and "./x" are one file; as given when the
 * directory is not there either (opening it will say so). */
static char *future_path(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir = slash ? xstrndup(path, slash == path ? 1 : (size_t)(slash - path)) : xstrdup(".");
    char *real = realpath(dir, NULL);
    char *full = real ? xasprintf("%s/%s", real, slash ? slash + 1 : path) : xstrdup(path);
    free(real);
    free(dir);
    return full;
}

static void locate(const char *path, struct place *p)
{
    struct stat st, out;
    memset(p, 0, sizeof *p);
    p->given = path;
    p->is_stdout = names_stdout(path);
    if (strcmp(path, "-") == 0)
        return;
    p->exists = stat(path, &st) == 0;
    if (!p->exists) {
        char *created = created_by(path);
        p->path = future_path(created ? created : path);
        free(created);
        return;
    }
    p->path = realpath(path, NULL);
    p->regular = S_ISREG(st.st_mode);
    /* any number of writers may share a terminal or /dev/null */
    p->device = S_ISCHR(st.st_mode);
    p->dev = st.st_dev;
    p->ino = st.st_ino;
    if (p->regular && fstat(STDOUT_FILENO, &out) == 0 && out.st_dev == st.st_dev &&
        out.st_ino == st.st_ino)
        p->is_stdout = true;
}

static bool same_file(const struct place *a, const struct place *b)
{
    if (a->is_stdout || b->is_stdout)
        return a->is_stdout && b->is_stdout;
    if (a->device || b->device)
        return false;
    if (strcmp(a->given, b->given) == 0)
        return true;
    if (!a->path || !b->path)
        return false;
    if (a->exists && b->exists)
        return a->dev == b->dev && a->ino == b->ino;
    return strcmp(a->path, b->path) == 0;
}

static void clash(const struct output_use *a, const struct output_use *b)
{
    if (a->input || b->input) {
        const struct output_use *out = a->input ? b : a, *in = a->input ? a : b;
        if (in->option)
            die("%s %s is %s (%s %s): it would be overwritten", out->option, out->path, in->input,
                in->option, in->path);
        die("%s %s is %s: it would be overwritten", out->option, out->path, in->input);
    }
    die("%s %s and %s %s are the same file%s: each output needs a file of its own", a->option,
        a->path, b->option, b->path,
        names_stdout(a->path) || names_stdout(b->path) ? " (standard output)" : "");
}

/* An output, or a file read other than standard input. */
static bool named(const struct output_use *u)
{
    return u->path && !(u->input && strcmp(u->path, "-") == 0);
}

void output_check_distinct(const struct output_use *uses, size_t n)
{
    struct place *places = xcalloc(n ? n : 1, sizeof *places);
    bool report_on_stdout = true;
    for (size_t i = 0; i < n; i++) {
        if (named(&uses[i]))
            locate(uses[i].path, &places[i]);
        if (uses[i].path && !uses[i].input && strcmp(uses[i].path, "-") == 0)
            report_on_stdout = false;
    }
    for (size_t i = 0; i < n; i++) {
        if (!named(&uses[i]))
            continue;
        for (size_t k = i + 1; k < n; k++)
            if (named(&uses[k]) && (!uses[i].input || !uses[k].input) &&
                same_file(&places[i], &places[k]))
                clash(&uses[i], &uses[k]);
        /* the report would be lost: the file replaced, or written over */
        if (!uses[i].input && report_on_stdout && places[i].is_stdout && places[i].regular)
            die("%s %s is standard output, where the report goes: %s - writes there instead, and "
                "the report to stderr",
                uses[i].option, uses[i].path, uses[i].option);
    }
    for (size_t i = 0; i < n; i++)
        free(places[i].path);
    free(places);
}

/* ---- opening ------------------------------------------------------------------ */

/* "the current directory", or the directory of path, for messages. */
static char *directory_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return xstrdup("the current directory");
    return xasprintf("the directory %.*s", slash == path ? 1 : (int)(slash - path), path);
}

/* Dies for a file that could not be opened to be written: when it was to
 * be created and the directory refused, it is the directory that is
 * named (the file itself may well be writable). */
static void cannot_open(const char *option, const char *path, const char *created, int err)
    __attribute__((noreturn));
static void cannot_open(const char *option, const char *path, const char *created, int err)
{
    if (created && (err == EACCES || err == EPERM || err == EROFS)) {
        char *dir = directory_of(created);
        die("cannot create a file in %s (for %s %s): %s", dir, option, path, strerror(err));
    }
    die("cannot open %s: %s", path, strerror(err));
}

FILE *output_open(const char *option, const char *path, bool *created)
{
    /* O_EXCL first: whether this run made the file. O_NONBLOCK: a FIFO
     * without a reader fails with ENXIO instead of blocking in open() with
     * nothing said. No O_TRUNC: the caller truncates when it begins. */
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NONBLOCK | O_CLOEXEC, 0666);
    *created = fd >= 0;
    if (fd < 0 && errno == EEXIST)
        fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 && errno == ENXIO) {
        fprintf(stderr, "volley: waiting for a reader on %s (%s)\n", path, option);
        fd = open(path, O_WRONLY | O_CLOEXEC);
    }
    int flags = fd >= 0 ? fcntl(fd, F_GETFL) : -1;
    if (flags >= 0)
        fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        int err = errno;
        struct stat st;
        cannot_open(option, path, stat(path, &st) != 0 ? path : NULL, err);
    }
    return f;
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
    if (!exists && errno == ELOOP)
        die("cannot open %s: %s", path, strerror(ELOOP));
    /* A device or a pipe (/dev/stdout, a FIFO) is written in place: there
     * is no earlier result in it to keep, nor a file to rename over it. */
    if (exists && !S_ISREG(st.st_mode)) {
        bool created;
        o->f = output_open("--json", path, &created);
        return;
    }
    if (exists && access(path, W_OK) != 0)
        die("cannot open %s: %s", path, strerror(errno));
    /* The file a symbolic link points to is the one replaced, or created. */
    o->target = exists ? realpath(path, NULL) : created_by(path);
    if (!o->target)
        die("cannot open %s: %s", path, strerror(exists ? errno : ELOOP));
    o->keep_mode = exists;
    o->mode = st.st_mode & 07777;
    /* Whether the file can be written (its directory exists, it may be
     * written) is found out now, before the run, without touching it. */
    char *tmp = temp_name(o->target);
    int fd = open_temp(o, tmp);
    /* the directory as given, unless a link leads to another */
    struct stat link;
    bool is_link = lstat(path, &link) == 0 && S_ISLNK(link.st_mode);
    if (fd < 0)
        cannot_open("--json", path, is_link ? o->target : path, errno);
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

void output_json_write(struct output_json *o, bool (*write)(FILE *f, const struct result *r),
                       const struct result *r)
{
    if (o->f) {
        bool ok = write(o->f, r);
        int err = errno;
        if (fclose(o->f) != 0 || !ok)
            output_failed("--json", o->path, ok ? errno : err);
        o->f = NULL;
        return;
    }
    char *tmp = temp_name(o->target);
    int fd = open_temp(o, tmp);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    bool ok = f && write(f, r);
    int err = errno;
    if (f && fclose(f) != 0 && ok) {
        ok = false;
        err = errno;
    }
    if (ok && rename(tmp, o->target) != 0) {
        ok = false;
        err = errno;
    }
    if (!ok) {
        if (fd >= 0)
            unlink(tmp);
        output_failed("--json", o->path, err);
    }
    free(tmp);
    free(o->target);
    o->target = NULL;
}
