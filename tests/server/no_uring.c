/*
 * no-uring: runs a command with io_uring refused, as a container's seccomp profile refuses
 * it (Docker's default since 2023: io_uring_setup, io_uring_enter and io_uring_register fail
 * with EPERM), so that the tests see what volley does on such a machine, whatever this one
 * allows.
 *
 *   no-uring [--errno N] COMMAND [ARG...]
 *
 * --errno: the error the calls fail with (default EPERM, 1; 38 is ENOSYS, a kernel without
 * io_uring). The filter is inherited by COMMAND and everything it starts.
 *
 * SPDX-License-Identifier: MIT
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define ARCH AUDIT_ARCH_AARCH64
#else
#error "no-uring: add this architecture's AUDIT_ARCH"
#endif

#define REFUSE(nr) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), BPF_STMT(BPF_RET | BPF_K, ret)

int main(int argc, char **argv)
{
    int err = EPERM, first = 1;
    if (argc > 2 && strcmp(argv[1], "--errno") == 0) {
        err = atoi(argv[2]);
        first = 3;
    }
    if (first >= argc || err <= 0 || err > 4095) {
        fprintf(stderr, "usage: no-uring [--errno N] COMMAND [ARG...]\n");
        return 2;
    }
    unsigned ret = SECCOMP_RET_ERRNO | (unsigned)err;
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        REFUSE(__NR_io_uring_setup),
        REFUSE(__NR_io_uring_enter),
        REFUSE(__NR_io_uring_register),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof filter / sizeof *filter, .filter = filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0) {
        fprintf(stderr, "no-uring: seccomp: %s\n", strerror(errno));
        return 2;
    }
    execvp(argv[first], argv + first);
    fprintf(stderr, "no-uring: %s: %s\n", argv[first], strerror(errno));
    return 127;
}
