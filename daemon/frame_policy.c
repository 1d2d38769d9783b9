/* SPDX-License-Identifier: MIT */
/*
 * A frame's scheduling flags (frame_policy.h).  Loop thread.
 */
#include "frame_policy.h"

#include "util.h"

uint32_t gf_frame_policy_admit(const gf_header *h, uint64_t now_ns, char *why, size_t why_len) {
    if (!(h->flags & GF_FLAG_DEADLINE))
        return GF_OK;
    uint64_t deadline = gf_deadline_decode(h->status, now_ns);
    if (deadline > now_ns)
        return GF_OK;
    gf_errorf(why, why_len, "the frame's deadline passed %llu us before it could be placed",
              (unsigned long long)((now_ns - deadline) / 1000u));
    return GF_ERR_DEADLINE_EXCEEDED;
}

uint32_t gf_frame_policy_expire(gf_slot *b, uint64_t now_ns) {
    uint32_t live = 0;
    for (uint32_t i = 0; i < b->frame_count; i++) {
        gf_frame *f = &b->frames[i];
        if (!f->batched)
            continue;
        f->expired = f->deadline_ns != 0 && f->deadline_ns <= now_ns;
        live += !f->expired;
    }
    return live;
}
