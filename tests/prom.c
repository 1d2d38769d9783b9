/* SPDX-License-Identifier: MIT */
/*
 * The Prometheus text-format parser of the tests (prom.h is the contract).
 */
#include "prom.h"

#include <check.h>
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int is_name_start(int c) {
    return isalpha(c) || c == '_' || c == ':';
}

static int is_name_char(int c) {
    return isalnum(c) || c == '_' || c == ':';
}

/* Reads a metric name (or label name when `label`) at *p into buf. */
static int read_name(const char **p, char *buf, int label) {
    size_t n = 0;

    if (!is_name_start((unsigned char)**p) || (label && **p == ':'))
        return -1;
    while (is_name_char((unsigned char)**p) && !(label && **p == ':')) {
        if (n + 1 >= PROM_NAME_BYTES)
            return -1;
        buf[n++] = *(*p)++;
    }
    buf[n] = '\0';
    return 0;
}

static int find_family(struct prom_doc *d, const char *name) {
    for (int i = 0; i < d->family_count; i++)
        if (strcmp(d->families[i].name, name) == 0)
            return i;
    return -1;
}

static int add_family(struct prom_doc *d, const char *name) {
    int i = find_family(d, name);

    if (i >= 0)
        return i;
    ck_assert_int_lt(d->family_count, PROM_MAX_FAMILIES);
    i = d->family_count++;
    memset(&d->families[i], 0, sizeof d->families[i]);
    snprintf(d->families[i].name, sizeof d->families[i].name, "%s", name);
    return i;
}

int prom_read_value(const char *s, double *v) {
    char *end;

    if (strcmp(s, "+Inf") == 0) {
        *v = INFINITY;
        return 0;
    }
    if (strcmp(s, "-Inf") == 0) {
        *v = -INFINITY;
        return 0;
    }
    if (strcmp(s, "NaN") == 0) {
        *v = NAN;
        return 0;
    }
    if (*s == '\0' || isspace((unsigned char)*s))
        return -1;
    *v = strtod(s, &end);
    return *end == '\0' && !isinf(*v) && !isnan(*v) ? 0 : -1;
}

/* The family a sample named `name` belongs to: a histogram or summary
 * family for its _bucket/_sum/_count series, else the name itself. */
static int family_of(struct prom_doc *d, const char *name) {
    static const char *const suffixes[] = {"_bucket", "_sum", "_count"};
    char base[PROM_NAME_BYTES];

    for (size_t k = 0; k < 3; k++) {
        size_t n = strlen(name), sl = strlen(suffixes[k]);
        if (n <= sl || strcmp(name + n - sl, suffixes[k]) != 0)
            continue;
        memcpy(base, name, n - sl);
        base[n - sl] = '\0';
        int f = find_family(d, base);
        if (f >= 0 && (strcmp(d->families[f].type, "histogram") == 0 ||
                       (k > 0 && strcmp(d->families[f].type, "summary") == 0)))
            return f;
    }
    return find_family(d, name);
}

/* Nonzero when a sample before `s` has its name and label set (in any order). */
static int same_series_before(const struct prom_doc *d, const struct prom_sample *s) {
    for (int i = 0; i < d->sample_count; i++) {
        const struct prom_sample *o = &d->samples[i];
        int same = strcmp(o->name, s->name) == 0 && o->label_count == s->label_count;
        for (int j = 0; same && j < s->label_count; j++) {
            int found = 0;
            for (int k = 0; k < o->label_count; k++)
                found |= strcmp(o->label[k], s->label[j]) == 0 &&
                         strcmp(o->value_of[k], s->value_of[j]) == 0;
            same = found;
        }
        if (same)
            return 1;
    }
    return 0;
}

/* Nonzero when HELP text has an escape other than \\ and \n. */
static int bad_help_escape(const char *text) {
    for (const char *p = strchr(text, '\\'); p != NULL; p = strchr(p + 2, '\\'))
        if (p[1] != '\\' && p[1] != 'n')
            return 1;
    return 0;
}

/* Parses one sample line.  Returns 0 or -1 with the reason. */
static int parse_sample(struct prom_doc *d, const char *line, char *err, size_t err_len) {
    struct prom_sample *s;
    const char *p = line;
    char value[64];
    size_t n = 0;

    ck_assert_int_lt(d->sample_count, PROM_MAX_SAMPLES);
    s = &d->samples[d->sample_count];
    memset(s, 0, sizeof *s);
    if (read_name(&p, s->name, 0) < 0) {
        snprintf(err, err_len, "bad metric name in '%.200s'", line);
        return -1;
    }
    if (*p == '{') {
        p++;
        while (*p != '}') {
            if (s->label_count == PROM_MAX_LABELS ||
                read_name(&p, s->label[s->label_count], 1) < 0 || *p++ != '=' || *p++ != '"') {
                snprintf(err, err_len, "bad label in '%.200s'", line);
                return -1;
            }
            if (strncmp(s->label[s->label_count], "__", 2) == 0) {
                snprintf(err, err_len, "reserved label name in '%.200s'", line);
                return -1;
            }
            size_t k = 0;
            char *v = s->value_of[s->label_count];
            for (; *p != '"'; p++) {
                if (*p == '\0' || *p == '\n' || k + 1 >= PROM_VALUE_BYTES) {
                    snprintf(err, err_len, "unterminated label value in '%.200s'", line);
                    return -1;
                }
                if (*p == '\\') {
                    p++;
                    if (*p != '\\' && *p != '"' && *p != 'n') {
                        snprintf(err, err_len, "bad escape \\%c in '%.200s'", *p, line);
                        return -1;
                    }
                    v[k++] = *p == 'n' ? '\n' : *p;
                } else {
                    v[k++] = *p;
                }
            }
            v[k] = '\0';
            p++;
            for (int j = 0; j < s->label_count; j++)
                if (strcmp(s->label[j], s->label[s->label_count]) == 0) {
                    snprintf(err, err_len, "label %s twice in '%.200s'", s->label[j], line);
                    return -1;
                }
            s->label_count++;
            if (*p == ',')
                p++;
            else if (*p != '}') {
                snprintf(err, err_len, "expected , or } in '%.200s'", line);
                return -1;
            }
        }
        p++;
    }
    if (*p++ != ' ') {
        snprintf(err, err_len, "no single space before the value in '%.200s'", line);
        return -1;
    }
    while (*p != '\0' && n + 1 < sizeof value)
        value[n++] = *p++;
    value[n] = '\0';
    if (prom_read_value(value, &s->value) < 0) {
        snprintf(err, err_len, "bad value '%s' in '%.200s'", value, line);
        return -1;
    }
    if (same_series_before(d, s)) {
        snprintf(err, err_len, "the series '%.200s' appears twice", line);
        return -1;
    }
    s->family = family_of(d, s->name);
    if (s->family < 0 || !d->families[s->family].has_help ||
        d->families[s->family].type[0] == '\0') {
        snprintf(err, err_len, "sample '%.200s' has no HELP and TYPE before it", line);
        return -1;
    }
    if (d->families[s->family].closed) {
        snprintf(err, err_len, "family %s is not contiguous ('%.200s')",
                 d->families[s->family].name, line);
        return -1;
    }
    for (int f = 0; f < d->family_count; f++)
        if (f != s->family && d->sample_count > 0 && d->samples[d->sample_count - 1].family == f)
            d->families[f].closed = 1;
    d->sample_count++;
    return 0;
}

int prom_parse(const char *text, struct prom_doc *d, char *err, size_t err_len) {
    char line[1024];

    memset(d, 0, sizeof *d);
    if (text[0] != '\0' && text[strlen(text) - 1] != '\n') {
        snprintf(err, err_len, "the last line does not end with a newline");
        return -1;
    }
    for (const char *p = text; *p != '\0';) {
        const char *nl = strchr(p, '\n');
        size_t n = (size_t)(nl - p);
        ck_assert_uint_lt(n, sizeof line);
        memcpy(line, p, n);
        line[n] = '\0';
        p = nl + 1;
        if (n == 0) {
            snprintf(err, err_len, "empty line");
            return -1;
        }
        if (strncmp(line, "# HELP ", 7) == 0 || strncmp(line, "# TYPE ", 7) == 0) {
            const char *q = line + 7;
            char name[PROM_NAME_BYTES];
            if (read_name(&q, name, 0) < 0 || *q != ' ' || q[1] == '\0') {
                snprintf(err, err_len, "malformed '%.200s'", line);
                return -1;
            }
            int f = add_family(d, name);
            if (line[2] == 'H') {
                if (d->families[f].has_help) {
                    snprintf(err, err_len, "second HELP for %s", name);
                    return -1;
                }
                if (bad_help_escape(q + 1)) {
                    snprintf(err, err_len, "bad escape in '%.200s'", line);
                    return -1;
                }
                d->families[f].has_help = 1;
            } else {
                static const char *const types[] = {"counter", "gauge", "histogram", "summary",
                                                    "untyped"};
                int known = 0;
                for (size_t k = 0; k < 5; k++)
                    known |= strcmp(q + 1, types[k]) == 0;
                if (!known || d->families[f].type[0] != '\0') {
                    snprintf(err, err_len, "bad or second TYPE '%.200s'", line);
                    return -1;
                }
                snprintf(d->families[f].type, sizeof d->families[f].type, "%s", q + 1);
            }
            continue;
        }
        if (line[0] == '#')
            continue; /* a comment */
        if (parse_sample(d, line, err, err_len) < 0)
            return -1;
    }
    return 0;
}

double prom_get(const struct prom_doc *d, const char *name, ...) {
    for (int i = 0; i < d->sample_count; i++) {
        const struct prom_sample *s = &d->samples[i];
        va_list ap;
        const char *l;
        int n = 0, match = strcmp(s->name, name) == 0;

        va_start(ap, name);
        while (match && (l = va_arg(ap, const char *)) != NULL) {
            const char *v = va_arg(ap, const char *);
            int found = 0;
            for (int j = 0; j < s->label_count; j++)
                found |= strcmp(s->label[j], l) == 0 && strcmp(s->value_of[j], v) == 0;
            match = found;
            n++;
        }
        va_end(ap);
        if (match && n == s->label_count)
            return s->value;
    }
    ck_abort_msg("no sample %s with those labels", name);
    return NAN;
}

int prom_has_prefix(const struct prom_doc *d, const char *prefix) {
    for (int i = 0; i < d->sample_count; i++)
        if (strncmp(d->samples[i].name, prefix, strlen(prefix)) == 0)
            return 1;
    return 0;
}

void assert_prom_conventions(const struct prom_doc *d) {
    for (int f = 0; f < d->family_count; f++) {
        const struct prom_family *fam = &d->families[f];
        size_t n = strlen(fam->name);
        int total = n > 6 && strcmp(fam->name + n - 6, "_total") == 0;

        ck_assert_msg(fam->has_help && fam->type[0] != '\0', "%s lacks HELP or TYPE", fam->name);
        ck_assert_msg(strncmp(fam->name, "gpuframe_", 9) == 0, "%s is not gpuframe_", fam->name);
        ck_assert_msg(total == (strcmp(fam->type, "counter") == 0),
                      "%s: counters and only counters end in _total", fam->name);
        ck_assert_msg(strstr(fam->name, "_per_second") == NULL &&
                          strstr(fam->name, "_rate") == NULL,
                      "%s: a rate is rate()'s to compute, over a counter", fam->name);
    }
}

/* A sample's labels other than `le`, as one key ("pipeline=echo,"). */
static void series_key(const struct prom_sample *s, char *key, size_t len) {
    size_t at = 0;
    key[0] = '\0';
    for (int l = 0; l < s->label_count && at < len; l++)
        if (strcmp(s->label[l], "le") != 0) {
            int n = snprintf(key + at, len - at, "%s=%s,", s->label[l], s->value_of[l]);
            at += n > 0 ? (size_t)n : 0;
        }
}

/* Each series of a histogram family (one per set of labels other than
 * `le`; one when it has none): buckets of increasing `le`, cumulative, the
 * last +Inf and equal to _count, and one _sum. */
void assert_prom_histograms(const struct prom_doc *d) {
    enum { SERIES_MAX = 32, KEY_BYTES = 4 * PROM_VALUE_BYTES };
    for (int f = 0; f < d->family_count; f++) {
        const struct prom_family *fam = &d->families[f];
        char bucket[PROM_NAME_BYTES + 8], count[PROM_NAME_BYTES + 8], sum[PROM_NAME_BYTES + 8];
        static char keys[SERIES_MAX][KEY_BYTES];
        double prev_le[SERIES_MAX], prev_v[SERIES_MAX], count_v[SERIES_MAX];
        int buckets[SERIES_MAX], sums[SERIES_MAX], series = 0;

        if (strcmp(fam->type, "histogram") != 0)
            continue;
        snprintf(bucket, sizeof bucket, "%s_bucket", fam->name);
        snprintf(count, sizeof count, "%s_count", fam->name);
        snprintf(sum, sizeof sum, "%s_sum", fam->name);
        for (int i = 0; i < d->sample_count; i++) {
            const struct prom_sample *s = &d->samples[i];
            if (s->family != f)
                continue;
            char key[KEY_BYTES];
            series_key(s, key, sizeof key);
            int k = 0;
            while (k < series && strcmp(keys[k], key) != 0)
                k++;
            if (k == series) {
                ck_assert_int_lt(series, SERIES_MAX);
                snprintf(keys[k], KEY_BYTES, "%s", key);
                prev_le[k] = -INFINITY;
                prev_v[k] = count_v[k] = -1;
                buckets[k] = sums[k] = 0;
                series++;
            }
            if (strcmp(s->name, bucket) == 0) {
                double le;
                int at = -1;
                for (int l = 0; l < s->label_count; l++)
                    if (strcmp(s->label[l], "le") == 0)
                        at = l;
                ck_assert_msg(at >= 0, "%s: a bucket without le", fam->name);
                ck_assert_int_eq(prom_read_value(s->value_of[at], &le), 0);
                ck_assert_msg(le > prev_le[k], "%s{%s}: le %s does not increase", fam->name, key,
                              s->value_of[at]);
                ck_assert_msg(s->value >= prev_v[k], "%s{%s}: bucket le=%s is not cumulative",
                              fam->name, key, s->value_of[at]);
                prev_le[k] = le;
                prev_v[k] = s->value;
                buckets[k]++;
            } else if (strcmp(s->name, count) == 0) {
                count_v[k] = s->value;
            } else if (strcmp(s->name, sum) == 0) {
                sums[k]++;
            } else {
                ck_abort_msg("%s in histogram %s", s->name, fam->name);
            }
        }
        for (int k = 0; k < series; k++) {
            ck_assert_int_gt(buckets[k], 1);
            ck_assert_msg(isinf(prev_le[k]), "%s{%s}: the last bucket is not +Inf", fam->name,
                          keys[k]);
            ck_assert_double_eq(prev_v[k], count_v[k]);
            ck_assert_int_eq(sums[k], 1);
        }
    }
}
