/* SPDX-License-Identifier: MIT */
/*
 * Text as the report renderers (client/report_*.c) write it: strings from a
 * document escaped for the output's syntax, numbers that read back as the
 * same double, and the units durations are written in.  gf_report_format_ns
 * (report.h) is defined beside these.
 */
#ifndef GF_REPORT_TEXT_H
#define GF_REPORT_TEXT_H

#include <stddef.h>
#include <stdio.h>

#define NS_PER_US 1000u
#define NS_PER_MS 1000000u
#define NS_PER_S  1000000000u

/* Room for one formatted cell: a count, a size, a duration, a label. */
#define CELL_BYTES 48

/* How gf_put_text escapes a string for its output. */
enum gf_escape {
    GF_ESC_TERMINAL, /* control characters become '?'                       */
    GF_ESC_PROM,     /* Prometheus label value: \\ \" \n                    */
    GF_ESC_JSON,     /* JSON string body: \\ \" and \u00XX for controls     */
    GF_ESC_XML,      /* XML text or attribute: entities; controls become '?' */
};

/* Writes `s` escaped for `mode`; bytes that are not UTF-8 become '?'.  NULL
 * writes nothing. */
void gf_put_text(FILE *out, const char *s, enum gf_escape mode);

/* Formats `v` into buf[len] so that it reads back as the same double: the
 * shortest of 15 or 17 significant digits; NaN and infinities as Prometheus
 * spells them.  Returns buf. */
const char *gf_fmt_double(double v, char *buf, size_t len);

#endif
