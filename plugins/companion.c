/* SPDX-License-Identifier: MIT */
/*
 * Loading a plugin's companion object; companion.h is the contract.
 */
#define _GNU_SOURCE /* dladdr */
#include "companion.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The companion's path into path[PATH_MAX]: the directory of the plugin as
 * loaded, symbolic links resolved, then c->file.  0, or -1 with why[]. */
static int companion_path(const gf__companion *c, char *path, char *why, size_t why_len) {
    Dl_info info;
    char self[PATH_MAX];

    if (dladdr(c->anchor, &info) == 0 || info.dli_fname == NULL) {
        snprintf(why, why_len, "cannot find %s: dladdr gives no path for %s", c->file,
                 c->plugin_so);
        return -1;
    }
    if (realpath(info.dli_fname, self) == NULL) {
        snprintf(why, why_len, "cannot find %s: %s: %s", c->file, info.dli_fname, strerror(errno));
        return -1;
    }
    /* realpath's result is absolute: there is a slash. */
    const char *slash = strrchr(self, '/');
    const int n = snprintf(path, PATH_MAX, "%.*s/%s", (int)(slash - self), self, c->file);
    if (n < 0 || n >= PATH_MAX) {
        snprintf(why, why_len, "cannot find %s: the path beside %s is too long", c->file, self);
        return -1;
    }
    return 0;
}

const void *gf__companion_open(const gf__companion *c, char *why, size_t why_len) {
    char path[PATH_MAX];

    if (companion_path(c, path, why, why_len) < 0)
        return NULL;
    /* As gpuframed loads plugins: RTLD_NOW fails here rather than at a
     * frame; RTLD_LOCAL keeps the companion's libraries' symbols to it;
     * RTLD_NODELETE keeps the CUDA runtime (and cuBLAS, PyTorch) mapped for
     * the life of a process that holds a context. */
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (dl == NULL) {
        const char *e = dlerror();
        snprintf(why, why_len, "cannot load %s: %s", path, e ? e : "dlopen failed");
        return NULL;
    }
    const void *(*entry)(void);
    *(void **)&entry = dlsym(dl, c->entry_symbol);
    if (entry == NULL) {
        snprintf(why, why_len, "%s: no symbol %s (not %s?)", path, c->entry_symbol, c->what);
        dlclose(dl);
        return NULL;
    }
    const void *table = entry();
    uint32_t version = 0;
    if (table != NULL)
        memcpy(&version, table, sizeof version);
    if (table == NULL || version != c->version) {
        snprintf(why, why_len,
                 "%s: version %u, where this %s needs %u (install both from one build)", path,
                 (unsigned)version, c->plugin_so, (unsigned)c->version);
        dlclose(dl);
        return NULL;
    }
    return table;
}
