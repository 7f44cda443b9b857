/* volley merge: the --json results of the parts of one run (the shards of
 * --shard, or runs on several machines) added up into the result of the
 * whole, histograms bucket by bucket, so every percentile is exact.
 * SPDX-License-Identifier: MIT */
#ifndef VOLLEY_MERGE_H
#define VOLLEY_MERGE_H

/* argv[0] is "merge". Prints the report (and writes the JSON) of the whole;
 * exits 1 with one line on an input that cannot be read or cannot belong to
 * the same run as the others. */
int merge_main(int argc, char **argv);

#endif
