/* SPDX-License-Identifier: MIT */
/*
 * Escaped text, exact doubles and durations for the report renderers;
 * report_text.h and report.h (gf_report_format_ns) are the contract.
 */
#include "report_text.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>

#include "report.h"

/*
 * The length (1-4) of the well-formed UTF-8 sequence starting at s[0] (with
 * s NUL-terminated), or 0 when it is not one: a stray continuation byte, an
 * overlong form, a surrogate, or a code point above U+10FFFF.
 */
static size_t utf8_len(const unsigned char *s) {
    unsigned cp, n;

    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xC2 && s[0] <= 0xDF) {
        cp = s[0] & 0x1Fu;
        n = 2;
    } else if (s[0] >= 0xE0 && s[0] <= 0xEF) {
        cp = s[0] & 0x0Fu;
        n = 3;
    } else if (s[0] >= 0xF0 && s[0] <= 0xF4) {
        cp = s[0] & 0x07u;
        n = 4;
    } else {
        return 0;
    }
    for (unsigned i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) /* also stops at the NUL */
            return 0;
        cp = cp << 6 | (s[i] & 0x3Fu);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return n;
}

void gf_put_text(FILE *out, const char *s, enum gf_escape mode) {
    const unsigned char *p = (const unsigned char *)s;

    if (p == NULL)
        return;
    while (*p != '\0') {
        size_t n = utf8_len(p);
        if (n == 0) {
            fputc('?', out);
            p++;
            continue;
        }
        if (n > 1) {
            fwrite(p, 1, n, out);
            p += n;
            continue;
        }
        unsigned char ch = *p++;
        switch (mode) {
        case GF_ESC_TERMINAL: fputc(ch < 0x20 || ch == 0x7F ? '?' : ch, out); break;
        case GF_ESC_PROM:
            if (ch == '\\' || ch == '"')
                fprintf(out, "\\%c", ch);
            else if (ch == '\n')
                fputs("\\n", out);
            else
                fputc(ch, out);
            break;
        case GF_ESC_JSON:
            if (ch == '\\' || ch == '"')
                fprintf(out, "\\%c", ch);
            else if (ch < 0x20)
                fprintf(out, "\\u%04x", ch);
            else
                fputc(ch, out);
            break;
        case GF_ESC_XML:
            switch (ch) {
            case '&': fputs("&amp;", out); break;
            case '<': fputs("&lt;", out); break;
            case '>': fputs("&gt;", out); break;
            case '"': fputs("&quot;", out); break;
            case '\'': fputs("&apos;", out); break;
            default:
                /* XML 1.0 allows no control character but tab, LF and CR. */
                fputc((ch < 0x20 && ch != '\t' && ch != '\n' && ch != '\r') || ch == 0x7F ? '?'
                                                                                          : ch,
                      out);
            }
            break;
        }
    }
}

const char *gf_fmt_double(double v, char *buf, size_t len) {
    if (isnan(v))
        snprintf(buf, len, "NaN");
    else if (isinf(v))
        snprintf(buf, len, "%cInf", v > 0 ? '+' : '-');
    else {
        snprintf(buf, len, "%.15g", v);
        if (strtod(buf, NULL) != v)
            snprintf(buf, len, "%.17g", v);
    }
    return buf;
}

const char *gf_report_format_ns(uint64_t ns, const char *micro, char *buf, size_t len) {
    if (ns < NS_PER_US)
        snprintf(buf, len, "%" PRIu64 " ns", ns);
    else if (ns < NS_PER_MS)
        snprintf(buf, len, "%.1f %s", (double)ns / NS_PER_US, micro);
    else if (ns < NS_PER_S)
        snprintf(buf, len, "%.3f ms", (double)ns / NS_PER_MS);
    else
        snprintf(buf, len, "%.3f s", (double)ns / NS_PER_S);
    return buf;
}
