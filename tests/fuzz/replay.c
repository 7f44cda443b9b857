/* A main() for the fuzz targets without libFuzzer: runs every file named on
 * the command line (or found in a directory named there) through the target
 * once, naming each on stdout first, so that the last name printed before a
 * broken invariant or a sanitizer report is the input that caused it.
 * SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"
#include "xalloc.h"

static size_t run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(2);
    }
    size_t cap = 4096, len = 0, n;
    uint8_t *data = xmalloc(cap);
    while ((n = fread(data + len, 1, cap - len, f)) > 0)
        if ((len += n) == cap)
            data = xrealloc(data, cap *= 2);
    if (ferror(f)) {
        perror(path);
        exit(2);
    }
    fclose(f);
    /* An exact-size copy, so that a read past the input is caught. */
    uint8_t *exact = xmalloc(len);
    memcpy(exact, data, len);
    free(data);
    printf("%s\n", path);
    fflush(stdout);
    LLVMFuzzerTestOneInput(exact, len);
    free(exact);
    return 1;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

static size_t run_path(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        perror(path);
        exit(2);
    }
    if (!S_ISDIR(st.st_mode))
        return run_file(path);
    struct dirent **names;
    int n = scandir(path, &names, NULL, by_name);
    if (n < 0) {
        perror(path);
        exit(2);
    }
    size_t count = 0;
    for (int i = 0; i < n; i++) {
        if (names[i]->d_name[0] != '.') {
            char *child = xasprintf("%s/%s", path, names[i]->d_name);
            count += run_path(child);
            free(child);
        }
        free(names[i]);
    }
    free(names);
    return count;
}

int main(int argc, char **argv)
{
    size_t count = 0;
    for (int i = 1; i < argc; i++)
        count += run_path(argv[i]);
    printf("replayed %zu inputs\n", count);
    return 0;
}
