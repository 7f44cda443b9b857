/* A small unit-test harness: each tests/unit/test_*.c file is one binary whose
 * cases register themselves. `prog --list` prints the case names, `prog NAME...`
 * runs the named cases, `prog` runs them all. Each case prints `ok NAME` or
 * `not ok NAME` after its failure lines; the exit status is non-zero if any failed.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_UNIT_H
#define VOLLEY_UNIT_H

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct unit_case {
    const char *name;
    void (*fn)(void);
};

static struct unit_case unit_cases[512];
static int unit_ncases;
static int unit_failures;

static inline void unit_register(const char *name, void (*fn)(void))
{
    if (unit_ncases == (int)(sizeof unit_cases / sizeof unit_cases[0])) {
        fprintf(stderr, "unit: too many cases\n");
        exit(2);
    }
    unit_cases[unit_ncases++] = (struct unit_case){name, fn};
}

#define TEST(name)                                                                                 \
    static void name(void);                                                                        \
    __attribute__((constructor)) static void unit_reg_##name(void) { unit_register(#name, name); } \
    static void name(void)

#define UNIT_FAIL(...)                                                                             \
    do {                                                                                           \
        unit_failures++;                                                                           \
        fprintf(stdout, "#   %s:%d: ", __FILE__, __LINE__);                                        \
        fprintf(stdout, __VA_ARGS__);                                                              \
        fputc('\n', stdout);                                                                       \
    } while (0)

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond))                                                                               \
            UNIT_FAIL("CHECK(%s) failed", #cond);                                                  \
    } while (0)

#define CHECK_U64(a, b)                                                                            \
    do {                                                                                           \
        uint64_t unit_a_ = (uint64_t)(a), unit_b_ = (uint64_t)(b);                                 \
        if (unit_a_ != unit_b_)                                                                    \
            UNIT_FAIL("%s == %" PRIu64 ", expected %s == %" PRIu64, #a, unit_a_, #b, unit_b_);     \
    } while (0)

#define CHECK_I64(a, b)                                                                            \
    do {                                                                                           \
        int64_t unit_a_ = (int64_t)(a), unit_b_ = (int64_t)(b);                                    \
        if (unit_a_ != unit_b_)                                                                    \
            UNIT_FAIL("%s == %" PRId64 ", expected %s == %" PRId64, #a, unit_a_, #b, unit_b_);     \
    } while (0)

#define CHECK_DBL(a, b, eps)                                                                       \
    do {                                                                                           \
        double unit_a_ = (double)(a), unit_b_ = (double)(b);                                       \
        if (!(unit_a_ - unit_b_ <= (eps) && unit_b_ - unit_a_ <= (eps)))                           \
            UNIT_FAIL("%s == %.9g, expected %.9g (+/- %g)", #a, unit_a_, unit_b_, (double)(eps));  \
    } while (0)

#define CHECK_STR(a, b)                                                                            \
    do {                                                                                           \
        const char *unit_a_ = (a), *unit_b_ = (b);                                                 \
        if (!unit_a_ || !unit_b_ || strcmp(unit_a_, unit_b_) != 0)                                 \
            UNIT_FAIL("%s == \"%s\", expected \"%s\"", #a, unit_a_ ? unit_a_ : "(null)",           \
                      unit_b_ ? unit_b_ : "(null)");                                               \
    } while (0)

static inline int unit_run(const struct unit_case *c)
{
    int before = unit_failures;
    c->fn();
    bool ok = unit_failures == before;
    printf("%s %s\n", ok ? "ok" : "not ok", c->name);
    fflush(stdout);
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    int failed = 0;
    if (argc == 2 && strcmp(argv[1], "--list") == 0) {
        for (int i = 0; i < unit_ncases; i++)
            printf("%s\n", unit_cases[i].name);
        return 0;
    }
    if (argc == 1) {
        for (int i = 0; i < unit_ncases; i++)
            failed += unit_run(&unit_cases[i]);
        return failed != 0;
    }
    for (int a = 1; a < argc; a++) {
        int i;
        for (i = 0; i < unit_ncases; i++)
            if (strcmp(unit_cases[i].name, argv[a]) == 0)
                break;
        if (i == unit_ncases) {
            printf("not ok %s (no such case)\n", argv[a]);
            failed++;
            continue;
        }
        failed += unit_run(&unit_cases[i]);
    }
    return failed != 0;
}

#endif
