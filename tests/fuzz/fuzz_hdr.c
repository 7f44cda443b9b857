/* Fuzz target for reading HdrHistogram's V2 encoding back (hist_decode in
 * src/hist.c), which volley merge runs on histograms from other machines:
 * whatever the text, a histogram or a reason; a histogram encodes to text
 * that decodes to the same buckets, and takes back an exact summary.
 * SPDX-License-Identifier: MIT */
#include <string.h>

#include "fuzz.h"
#include "hist.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    FUZZ_CHECK(text);
    memcpy(text, data, size);
    text[size] = '\0';
    const char *why = NULL;
    struct hist *h = hist_decode(text, &why);
    free(text);
    if (!h) {
        FUZZ_CHECK(why && *why);
        return 0;
    }
    char *enc = hist_encode(h);
    struct hist *again = hist_decode(enc, &why);
    FUZZ_CHECK(again);
    char *enc2 = hist_encode(again);
    FUZZ_CHECK(strcmp(enc, enc2) == 0);
    FUZZ_CHECK(hist_count(again) == hist_count(h));
    if (hist_count(h)) {
        FUZZ_CHECK(hist_min(h) <= hist_max(h));
        FUZZ_CHECK(hist_set_summary(again, hist_min(h), hist_max(h), hist_mean(h), hist_stdev(h)));
        hist_value_at_percentile(again, 99.9);
    }
    free(enc);
    free(enc2);
    hist_free(again);
    hist_free(h);
    return 0;
}
