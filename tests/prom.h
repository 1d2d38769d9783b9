/* SPDX-License-Identifier: MIT */
/*
 * A strict parser of the Prometheus text exposition format 0.0.4, for tests:
 * what a scraper (node_exporter's textfile collector, Prometheus itself)
 * must accept, checked harder than they check it.  Rejected: a metric or
 * label name outside [a-zA-Z_:][a-zA-Z0-9_:]* (no ':' in labels, no reserved
 * "__" labels), a label twice, an escape other than \\ \" \n in a label
 * value or \\ \n in HELP, a value Go's ParseFloat would not take (or a
 * timestamp, which gpuframe never writes), a sample before its family's HELP
 * and TYPE, a second HELP or TYPE, an unknown type, a family whose samples
 * are not contiguous, the same series twice, an empty line, a last line
 * without its newline.  Histogram and naming rules are checked separately
 * (assert_prom_histograms, assert_prom_conventions).
 *
 * Check's assertions are used for capacity overruns and by prom_get and the
 * assert_ functions: call them from a Check test.
 */
#ifndef GF_TEST_PROM_H
#define GF_TEST_PROM_H

#include <stddef.h>

#define PROM_MAX_SAMPLES  256
#define PROM_MAX_FAMILIES 96
#define PROM_MAX_LABELS   4
#define PROM_NAME_BYTES   96
#define PROM_VALUE_BYTES  128

struct prom_sample {
    char name[PROM_NAME_BYTES];
    int family; /* index into families */
    int label_count;
    char label[PROM_MAX_LABELS][PROM_NAME_BYTES];
    char value_of[PROM_MAX_LABELS][PROM_VALUE_BYTES]; /* unescaped */
    double value;
};

struct prom_family {
    char name[PROM_NAME_BYTES];
    char type[16];
    int has_help, closed;
};

struct prom_doc {
    struct prom_sample samples[PROM_MAX_SAMPLES];
    int sample_count;
    struct prom_family families[PROM_MAX_FAMILIES];
    int family_count;
};

/* Parses the whole exposition `text` into `d`.  Returns 0, or -1 with the
 * first problem, quoting its line, in err[err_len]. */
int prom_parse(const char *text, struct prom_doc *d, char *err, size_t err_len);

/* Parses a sample value: a float as Go's ParseFloat takes it, or +Inf,
 * -Inf, NaN.  Returns 0 or -1. */
int prom_read_value(const char *s, double *v);

/* The value of the sample `name` whose labels are exactly the given
 * NULL-terminated name, value pairs; fails the test if there is none. */
double prom_get(const struct prom_doc *d, const char *name, ...);

/* Nonzero when some sample's name starts with `prefix`. */
int prom_has_prefix(const struct prom_doc *d, const char *prefix);

/* Naming rules of the house: every family has HELP and TYPE and starts with
 * gpuframe_; counters end in _total, nothing else does; no family is a rate
 * (_per_second, _rate): Prometheus computes those from counters. */
void assert_prom_conventions(const struct prom_doc *d);

/* Every histogram: per label set, buckets in increasing le ending with +Inf,
 * cumulative (non-decreasing) counts, +Inf equal to _count, and a _sum. */
void assert_prom_histograms(const struct prom_doc *d);

#endif
