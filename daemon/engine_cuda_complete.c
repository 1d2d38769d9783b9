/* SPDX-License-Identifier: MIT */
/*
 * The CUDA engine's completion modes and stage times
 * (engine_cuda_complete.h).
 */
#include "engine_cuda_complete.h"

#include "util.h"

/* Runs on the driver's host-function thread: no CUDA call, no lock. */
static void CUDART_CB on_stream_done(void *arg) {
    gf_slot *s = arg;
    cuda_slot *cs = s->engine_state;
    s->done_ns = gf_now_ns();
    gf_completion_push(cs->engine->done, s);
}

/* Hybrid: the moving mean of the GPU's tail, from slot `s` just finished
 * (its done time: seen by a poll, or stamped by its host function, which
 * adds the driver's hand-off). */
static void learn_tail(cuda_engine *ce, const gf_slot *s, const cuda_slot *cs) {
    if (!ce->hybrid || s->failed || s->done_ns <= cs->queued_ns)
        return;
    ce->tail_ns = gf_hybrid_tail_mean(ce->tail_ns, s->done_ns - cs->queued_ns);
}

/*
 * Hybrid: slot `s` has run past its spin window; a host function completes
 * it from now on, and the loop stops polling it.  If that cannot be
 * enqueued, polling goes on for as long as it takes.
 */
static void hand_to_host_func(gf_engine *e, gf_slot *s, cuda_slot *cs) {
    cudaError_t err = cudaLaunchHostFunc(cs->busy, on_stream_done, s);
    if (err == cudaSuccess) {
        cs->pending = 0;
        return;
    }
    GF_LOG_ERR("engine cuda: slot %u: cudaLaunchHostFunc: %s (%s); polling it instead", s->index,
               cudaGetErrorString(err), cudaGetErrorName(err));
    if (is_sticky(err))
        e->poisoned = 1;
    else
        cudaGetLastError();
    cs->spin_until_ns = 0;
}

/*
 * Poll and hybrid, on the loop: every pending slot whose done event has
 * completed goes to the loop at once; in hybrid, one whose spin window has
 * passed goes to a host function.  An error other than "not ready" leaves
 * the slot pending-less and in flight: a sticky one poisons the engine, and
 * the shard's watchdog fails the frame and stops the daemon, as it does
 * when a host function never runs.  Returns the slots still polled, counted
 * last: handing a slot to the loop may submit another.
 */
uint32_t gf__cuda_poll(gf_engine *e) {
    cuda_engine *ce = (cuda_engine *)e;
    uint64_t now = 0;
    for (uint32_t i = 0; i < e->slot_count; i++) {
        cuda_slot *cs = &ce->cslots[i];
        if (!cs->pending)
            continue;
        cudaError_t err = cudaEventQuery(cs->done);
        if (err == cudaErrorNotReady) {
            if (cs->spin_until_ns && (now ? now : (now = gf_now_ns())) >= cs->spin_until_ns)
                hand_to_host_func(e, &e->slots[i], cs);
            continue;
        }
        cs->pending = 0;
        if (err != cudaSuccess) {
            GF_LOG_ERR("engine cuda: slot %u: cudaEventQuery: %s (%s)", i, cudaGetErrorString(err),
                       cudaGetErrorName(err));
            e->poisoned |= is_sticky(err);
            continue;
        }
        e->slots[i].done_ns = gf_now_ns();
        gf_completion_deliver(e->done, &e->slots[i]);
    }
    uint32_t polling = 0;
    for (uint32_t i = 0; i < e->slot_count; i++)
        polling += (uint32_t)ce->cslots[i].pending;
    return polling;
}

static uint64_t elapsed_ns(cudaEvent_t a, cudaEvent_t b) {
    float ms = 0.0f;
    /* Both events have completed (the host function ran after them), so this
     * does not block. */
    if (cudaEventElapsedTime(&ms, a, b) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return (uint64_t)((double)ms * 1e6);
}

/*
 * Places the stages on the host clock: the stream was idle when the batch
 * was submitted, so its first event ran within a few µs of submitted_ns; the
 * events give the rest.  Every frame of a batch gets the batch's times.
 * Without timing, only the host function's time is known.
 */
void gf__cuda_finish(gf_engine *e, gf_slot *s) {
    cuda_slot *cs = s->engine_state;
    gf_stage_times times = {.gpu_done_ns = s->done_ns}, *t = &times;
    learn_tail((cuda_engine *)e, s, cs);
    if (s->failed) { /* cuda_submit: logged there, answered now */
        for (uint32_t i = 0; i < s->frame_count; i++) {
            s->frames[i].status = GF_ERR_ENGINE;
            s->frames[i].stages = times;
        }
        return;
    }
    for (uint32_t i = 0; !s->time_stages && i < s->frame_count; i++) {
        s->frames[i].status = GF_OK;
        s->frames[i].stages = times;
    }
    if (!s->time_stages)
        return;
    t->timed = 1;
    t->h2d_begin_ns = s->submitted_ns;
    t->h2d_end_ns = t->h2d_begin_ns + elapsed_ns(cs->ev[EV_START], cs->ev[EV_H2D]);
    t->kernel_begin_ns = t->h2d_end_ns;
    t->kernel_end_ns = t->kernel_begin_ns + elapsed_ns(cs->ev[EV_H2D], cs->ev[EV_KERNEL]);
    /* Each stage's share of the kernel phase, from the events between them. */
    uint32_t n = s->frames[0].pipeline.stage_count;
    t->kernel_stages = n > 1 ? n : 0;
    for (uint32_t k = 0; n > 1 && k < n; k++)
        t->kernel_stage_ns[k] = elapsed_ns(k == 0 ? cs->ev[EV_H2D] : cs->stage_ev[k - 1],
                                           k + 1 == n ? cs->ev[EV_KERNEL] : cs->stage_ev[k]);
    t->d2h_begin_ns = t->kernel_end_ns;
    t->d2h_end_ns = t->d2h_begin_ns + elapsed_ns(cs->ev[EV_KERNEL], cs->ev[EV_D2H]);
    t->gpu_done_ns = t->d2h_end_ns;
    for (uint32_t i = 0; i < s->frame_count; i++) {
        s->frames[i].status = GF_OK;
        s->frames[i].stages = times;
    }
}

cudaError_t gf__cuda_complete_after(gf_engine *e, gf_slot *s, cuda_slot *cs) {
    const cuda_engine *ce = (const cuda_engine *)e;
    cudaError_t err = e->polled ? cudaEventRecord(cs->done, cs->busy)
                                : cudaLaunchHostFunc(cs->busy, on_stream_done, s);
    if (err == cudaSuccess) {
        cs->pending = e->polled;
        /* From now, not from submitted_ns: the launches may have taken the
         * host long (a PyTorch model's, about 0.75 ms at batch 1), and what
         * is left to poll is the GPU's tail behind them. */
        cs->queued_ns = ce->hybrid ? gf_now_ns() : 0;
        cs->spin_until_ns = ce->hybrid ? cs->queued_ns + gf_hybrid_spin_ns(ce->tail_ns) : 0;
    }
    return err;
}
