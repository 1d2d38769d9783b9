/* SPDX-License-Identifier: MIT */
/*
 * CPU lists and a PCI device's CPUs from sysfs (cpulist.h).  Any thread.
 */
#include "cpulist.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* The bytes of a sysfs attribute read at most: a CPU list of every CPU. */
#define GF_SYSFS_ATTR_BYTES 4096

void gf_cpus_set(gf_cpus *s, unsigned c) {
    s->bits[c / 64] |= 1ull << (c % 64);
}

int gf_cpus_has(const gf_cpus *s, unsigned c) {
    return (s->bits[c / 64] >> (c % 64)) & 1;
}

static unsigned cpus_count(const gf_cpus *s) {
    unsigned n = 0;
    for (unsigned c = 0; c < GF_CPUS_MAX; c++)
        n += (unsigned)gf_cpus_has(s, c);
    return n;
}

/* A decimal CPU number at *p, advancing it; -1 when none or too large. */
static long cpu_number(const char **p) {
    if (!isdigit((unsigned char)**p))
        return -1;
    long v = 0;
    while (isdigit((unsigned char)**p)) {
        v = v * 10 + (**p - '0');
        if (v >= GF_CPUS_MAX)
            return -1;
        (*p)++;
    }
    return v;
}

int gf_cpulist_parse(const char *text, gf_cpus *set) {
    memset(set, 0, sizeof *set);
    const char *p = text;
    for (;;) {
        long lo = cpu_number(&p), hi = lo;
        if (lo < 0)
            return -EINVAL;
        if (*p == '-') {
            p++;
            if ((hi = cpu_number(&p)) < lo)
                return -EINVAL;
        }
        for (long c = lo; c <= hi; c++)
            gf_cpus_set(set, (unsigned)c);
        if (*p != ',')
            break;
        p++;
    }
    if (*p == '\n')
        p++;
    return *p == '\0' ? (int)cpus_count(set) : -EINVAL;
}

void gf_cpulist_format(const gf_cpus *set, char *buf, size_t len) {
    size_t at = 0;
    if (len > 0)
        buf[0] = '\0';
    for (unsigned c = 0; c < GF_CPUS_MAX; c++) {
        if (!gf_cpus_has(set, c))
            continue;
        unsigned hi = c;
        while (hi + 1 < GF_CPUS_MAX && gf_cpus_has(set, hi + 1))
            hi++;
        int n = hi > c ? snprintf(buf + at, len - at, "%s%u-%u", at ? "," : "", c, hi)
                       : snprintf(buf + at, len - at, "%s%u", at ? "," : "", c);
        if (n < 0 || (size_t)n >= len - at)
            return; /* cut: what fits stays */
        at += (size_t)n;
        c = hi;
    }
}

int gf_cpus_setting_parse(const char *text, enum gf_cpus_kind *kind, gf_cpus *set, char *why,
                          size_t why_len) {
    memset(set, 0, sizeof *set);
    if (strcmp(text, "auto") == 0) {
        *kind = GF_CPUS_AUTO;
        return 0;
    }
    if (strcmp(text, "none") == 0) {
        *kind = GF_CPUS_NONE;
        return 0;
    }
    *kind = GF_CPUS_LIST;
    if (gf_cpulist_parse(text, set) > 0)
        return 0;
    gf_errorf(why, why_len,
              "shard_cpus: expected \"auto\", \"none\" or a CPU list such as \"0-15,32-47\" "
              "(CPUs below %d), got \"%.64s\"",
              GF_CPUS_MAX, text);
    return -EINVAL;
}

int gf_bus_id_sysfs(const char *bus_id, char *out, size_t len) {
    /* domain:bus:device.function, the domain of 4 or 8 hex digits. */
    const char *colon = strchr(bus_id, ':');
    size_t domain = colon ? (size_t)(colon - bus_id) : 0;
    if ((domain != 4 && domain != 8) || strlen(colon) != 8 || len < 13)
        return -EINVAL;
    for (size_t i = 0; i < domain; i++)
        if (!isxdigit((unsigned char)bus_id[i]) || (i < domain - 4 && bus_id[i] != '0'))
            return -EINVAL;
    static const char shape[] = ":xx:xx.x";
    for (size_t i = 0; i < 8; i++)
        if (shape[i] == 'x' ? !isxdigit((unsigned char)colon[i]) : colon[i] != shape[i])
            return -EINVAL;
    const char *d = colon - 4;
    for (size_t i = 0; i < 12; i++)
        out[i] = (char)tolower((unsigned char)d[i]);
    out[12] = '\0';
    return 0;
}

/* Reads sysfs attribute `path` into buf[len], NUL-terminated.  Returns 0
 * or a negative errno. */
static int read_attr(const char *path, char *buf, size_t len) {
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return -errno;
    size_t n = fread(buf, 1, len - 1, f);
    int err = ferror(f) ? -EIO : 0;
    fclose(f);
    buf[n] = '\0';
    return err;
}

int gf_device_cpus(const char *sysfs_root, const char *bus_id, int *node, gf_cpus *set, char *why,
                   size_t why_len) {
    char bdf[16], path[512], *text = malloc(GF_SYSFS_ATTR_BYTES);
    int rc = -ENOMEM;
    *node = -1;
    memset(set, 0, sizeof *set);
    if (text == NULL)
        goto out;
    if ((rc = gf_bus_id_sysfs(bus_id, bdf, sizeof bdf)) < 0) {
        gf_errorf(why, why_len, "PCI bus id \"%.32s\" is not domain:bus:device.function", bus_id);
        goto out;
    }
    snprintf(path, sizeof path, "%s/bus/pci/devices/%s/numa_node", sysfs_root, bdf);
    if ((rc = read_attr(path, text, GF_SYSFS_ATTR_BYTES)) < 0) {
        gf_errorf(why, why_len, "%s: %s", path, strerror(-rc));
        goto out;
    }
    char *end;
    long n = strtol(text, &end, 10);
    if (end == text || (*end != '\n' && *end != '\0') || n < -1 || n > 4095) {
        gf_errorf(why, why_len, "%s: not a node number: \"%.16s\"", path, text);
        rc = -EINVAL;
        goto out;
    }
    *node = (int)n;
    snprintf(path, sizeof path, "%s/bus/pci/devices/%s/local_cpulist", sysfs_root, bdf);
    if ((rc = read_attr(path, text, GF_SYSFS_ATTR_BYTES)) < 0) {
        gf_errorf(why, why_len, "%s: %s", path, strerror(-rc));
        goto out;
    }
    if ((rc = gf_cpulist_parse(text, set)) < 0)
        gf_errorf(why, why_len, "%s: not a CPU list: \"%.64s\"", path, text);
out:
    free(text);
    return rc;
}
