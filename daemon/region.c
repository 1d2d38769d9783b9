/* SPDX-License-Identifier: MIT */
/*
 * Shared-memory and device regions: checked, mapped, pinned (or, on the
 * device, imported and mapped) on the thread pool, and unpinned and unmapped
 * after their last frame (region.h).
 */
#include "region.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "group.h"
#include "log.h"
#include "shard_state.h"

/* Linux seals, named here so that the file builds against older headers. */
#ifndef F_GET_SEALS
#define F_GET_SEALS 1034
#endif
#ifndef F_SEAL_SHRINK
#define F_SEAL_SHRINK 0x0002
#endif
#ifndef F_SEAL_WRITE
#define F_SEAL_WRITE 0x0008
#endif
#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif

/* Adds (`sign` 1) or takes (-1) `r`'s bytes to or from `sh`'s counts of
 * its kind. */
static void count(const gf_region *r, gf_shard *sh, int sign) {
    gf_region_stats *k = &sh->stats.regions[r->on_device];
    if (sign > 0) {
        k->open += 1;
        k->bytes += r->bytes;
    } else {
        k->open -= 1;
        k->bytes -= r->bytes;
    }
}

/* The daemon-wide bytes of `r`'s kind (group.h). */
static atomic_uint_fast64_t *kind_bytes(const gf_region *r, gf_shard *sh) {
    return r->on_device ? &sh->group->device_region_bytes : &sh->group->region_bytes;
}

/* Reserves `bytes` of `held`, which every shard's regions of one kind count
 * against `cap` (the configuration's `key`): a region larger than the cap
 * alone is refused before anything is added (so that the sum cannot wrap);
 * else reserve, then check.  Returns 1, or 0 with nothing reserved and the
 * refusal in why[why_len]. */
static int reserve(atomic_uint_fast64_t *held, uint64_t bytes, uint64_t cap, const char *what,
                   const char *key, char *why, size_t why_len) {
    uint64_t all_held = atomic_load_explicit(held, memory_order_relaxed);
    if (bytes <= cap) {
        all_held = atomic_fetch_add_explicit(held, bytes, memory_order_relaxed);
        if (all_held <= cap - bytes)
            return 1;
        atomic_fetch_sub_explicit(held, bytes, memory_order_relaxed);
    }
    gf_errorf(why, why_len, "a %s of %llu bytes would pass %s %llu (%llu held by all connections)",
              what, (unsigned long long)bytes, key, (unsigned long long)cap,
              (unsigned long long)all_held);
    return 0;
}

/* A region `id` of `bytes` on `sh`, counted there: a memfd's, mapped at
 * `base`, or (`base` NULL) a device region whose client fd `device_fd` is
 * mapped later.  NULL when out of memory. */
static gf_region *region_new(gf_shard *sh, uint32_t id, uint64_t bytes, void *base, int device_fd) {
    gf_region *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->id = id;
    r->refs = 1;
    r->base = base;
    r->bytes = bytes;
    r->on_device = base == NULL;
    r->device_fd = device_fd;
    r->shard = sh;
    gf_link_init(&r->link);
    r->work.data = r;
    count(r, sh, 1);
    return r;
}

uint32_t gf_region_open(gf_shard *sh, int fd, uint32_t id, uint32_t held, gf_region **out,
                        char *why, size_t why_len) {
    const gf_config *cfg = sh->cfg;
    uint32_t status = GF_ERR_BAD_REGION;
    struct stat st;
    if (held >= cfg->max_regions) {
        gf_errorf(why, why_len, "this connection holds %u region(s), max_regions is %u", held,
                  cfg->max_regions);
        status = GF_ERR_REGION_LIMIT;
        goto fail;
    }
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        gf_errorf(why, why_len, "the file descriptor is not a memfd (not a regular file)");
        goto fail;
    }
    /* Without F_SEAL_SHRINK the client could truncate the file under our
     * mapping, and the daemon's next touch of those pages would be SIGBUS. */
    int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0) {
        gf_errorf(why, why_len, "the file descriptor is not a memfd: it cannot be sealed");
        goto fail;
    }
    if (!(seals & F_SEAL_SHRINK)) {
        gf_errorf(why, why_len, "the memfd is not sealed against shrinking (F_SEAL_SHRINK)");
        goto fail;
    }
    if (seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE)) {
        gf_errorf(why, why_len, "the memfd is sealed against writing; results are written there");
        goto fail;
    }
    uint64_t bytes = (uint64_t)st.st_size;
    if (bytes == 0) {
        gf_errorf(why, why_len, "the memfd is empty");
        goto fail;
    }
    if (!reserve(&sh->group->region_bytes, bytes, gf_config_shm_cap(cfg), "region", "max_shm_bytes",
                 why, why_len)) {
        status = GF_ERR_REGION_LIMIT;
        goto fail;
    }
    void *base = mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        gf_errorf(why, why_len, "cannot map the memfd's %llu bytes: %s", (unsigned long long)bytes,
                  strerror(errno));
        goto fail_reserved;
    }
    gf_region *r = region_new(sh, id, bytes, base, -1);
    if (!r) {
        munmap(base, (size_t)bytes);
        gf_errorf(why, why_len, "out of memory for a region");
        status = GF_ERR_INTERNAL;
        goto fail_reserved;
    }
    /* The mapping keeps the memory; the fd is not needed any more. */
    close(fd);
    *out = r;
    return GF_OK;

fail_reserved:
    atomic_fetch_sub_explicit(&sh->group->region_bytes, bytes, memory_order_relaxed);
fail:
    close(fd);
    return status;
}

uint32_t gf_region_open_device(gf_shard *sh, int fd, const gf_device_region *d, uint32_t id,
                               uint32_t held, gf_region **out, char *why, size_t why_len) {
    const gf_config *cfg = sh->cfg;
    uint32_t status = GF_ERR_BAD_REGION;
    uint64_t bytes = d->region_bytes;
    if (d->handle_type != GF_DEVICE_HANDLE_POSIX_FD) {
        gf_errorf(why, why_len, "handle_type %u is not taken: only %u (a POSIX file descriptor)",
                  d->handle_type, GF_DEVICE_HANDLE_POSIX_FD);
        goto fail;
    }
    if (bytes == 0) {
        gf_errorf(why, why_len, "region_bytes is 0");
        goto fail;
    }
    if (held >= cfg->max_regions) {
        gf_errorf(why, why_len, "this connection holds %u region(s), max_regions is %u", held,
                  cfg->max_regions);
        status = GF_ERR_REGION_LIMIT;
        goto fail;
    }
    /* The request is sound; the engine must be able to take it. */
    if (!gf_engine_maps_device(sh->engine)) {
        gf_errorf(why, why_len,
                  "the %s engine cannot map device memory: device regions need the cuda "
                  "engine on a GPU",
                  sh->engine->ops->name);
        goto fail;
    }
    if (!reserve(&sh->group->device_region_bytes, bytes,
                 gf_config_device_region_cap(cfg, sh->engine->device.memory_bytes), "device region",
                 "max_device_region_bytes", why, why_len)) {
        status = GF_ERR_REGION_LIMIT;
        goto fail;
    }
    gf_region *r = region_new(sh, id, bytes, NULL, fd); /* fd closed once mapped (pin_work) */
    if (!r) {
        gf_errorf(why, why_len, "out of memory for a region");
        status = GF_ERR_INTERNAL;
        goto fail_reserved;
    }
    *out = r;
    return GF_OK;

fail_reserved:
    atomic_fetch_sub_explicit(&sh->group->device_region_bytes, bytes, memory_order_relaxed);
fail:
    close(fd);
    return status;
}

void gf_region_ref(gf_region *r) {
    GF_SHARD_OWNED(r->shard);
    r->refs++;
}

void gf_region_leave(gf_region *r) {
    GF_SHARD_OWNED(r->shard);
    count(r, r->shard, -1);
    r->shard = NULL;
}

void gf_region_arrive(gf_region *r, gf_shard *sh) {
    GF_SHARD_OWNED(sh);
    count(r, sh, 1);
    r->shard = sh;
}

/* On a worker of the shard's thread pool: a memfd region pinned, or a
 * device region imported and mapped (its fd closed then, whatever came of
 * it), refused before it is mapped where it is on a device no shard
 * serves. */
static void pin_work(uv_work_t *w) {
    gf_region *r = w->data;
    if (!r->on_device) {
        r->pin_status = gf_engine_pin(r->shard->engine, r->base, r->bytes, r->why, sizeof r->why);
        return;
    }
    const gf_group *g = r->shard->group; /* its shards' devices: fixed since start */
    uint32_t served = 0;
    for (uint32_t k = 0; k < g->count; k++)
        if (g->shard[k].device >= 0 && g->shard[k].device < GF_DEVICES_MAX)
            served |= 1u << g->shard[k].device;
    r->pin_status = gf_engine_device_map(r->shard->engine, r->device_fd, r->bytes, served,
                                         &r->mapping, r->why, sizeof r->why);
    close(r->device_fd);
    r->device_fd = -1;
    if (r->pin_status == 0)
        r->base = (uint8_t *)(uintptr_t)r->mapping.dev_ptr;
}

static void pin_done(uv_work_t *w, int status) {
    gf_region *r = w->data;
    if (status < 0 && r->pin_status == 0) { /* cancelled: never ran */
        r->pin_status = status;
        gf_errorf(r->why, sizeof r->why, "pinning was cancelled: %s", uv_strerror(status));
    }
    if (r->on_device && r->device_fd >= 0) { /* cancelled: never mapped */
        close(r->device_fd);
        r->device_fd = -1;
    }
    r->pinned = r->pin_status == 0 && (r->on_device ? 1 : gf_engine_pins(r->shard->engine));
    r->ready = 1;
    r->on_ready(r, r->on_ready_arg);
    gf_region_unref(r);
}

void gf_region_pin(gf_region *r, void (*on_ready)(gf_region *r, void *arg), void *arg) {
    r->on_ready = on_ready;
    r->on_ready_arg = arg;
    gf_region_ref(r);
    if (!r->on_device && !gf_engine_pins(r->shard->engine)) {
        /* Nothing to do off the loop: answer in this turn. */
        pin_done(&r->work, 0);
        return;
    }
    int rc = uv_queue_work(r->shard->loop, &r->work, pin_work, pin_done);
    if (rc < 0) {
        r->pin_status = rc;
        gf_errorf(r->why, sizeof r->why, "cannot queue the pinning: %s", uv_strerror(rc));
        pin_done(&r->work, 0);
    }
}

static void region_free(gf_region *r) {
    gf_shard *sh = r->shard;
    void (*released)(void *arg) = r->on_released;
    void *arg = r->released_arg;
    if (!r->on_device)
        munmap(r->base, (size_t)r->bytes);
    else if (r->device_fd >= 0) /* never mapped: freed before its pinning was queued */
        close(r->device_fd);
    count(r, sh, -1);
    atomic_fetch_sub_explicit(kind_bytes(r, sh), r->bytes, memory_order_relaxed);
    free(r);
    if (released && arg)
        released(arg);
}

/* On a worker of the shard's thread pool. */
static void unpin_work(uv_work_t *w) {
    gf_region *r = w->data;
    if (r->on_device)
        gf_engine_device_unmap(r->shard->engine, &r->mapping);
    else
        gf_engine_unpin(r->shard->engine, r->base);
}

static void unpin_done(uv_work_t *w, int status) {
    (void)status;
    region_free(w->data);
}

void gf_region_unref(gf_region *r) {
    GF_SHARD_OWNED(r->shard);
    if (--r->refs > 0)
        return;
    /* No frame uses it: the engine's copies of it are all complete. */
    if (!r->pinned || uv_queue_work(r->shard->loop, &r->work, unpin_work, unpin_done) < 0) {
        if (r->pinned)
            unpin_work(&r->work);
        region_free(r);
    }
}
