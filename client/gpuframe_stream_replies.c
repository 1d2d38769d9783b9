/*
 * The replies of a `gpuframe stream` run: each checked against the frame it
 * answers (echoed ids, length, where a result in shared memory lies,
 * --verify's reference),
 * counted, timed and written to --output; then the summary line and the
 * command's exit status.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "gpuframe_commands.h"
#include "gpuframe_connect.h"
#include "gpuframe_stream_frames.h"
#include "gpuframe_stream_replies.h"
#include "util.h"

/* Records a wrong result: printed when it is the first. */
static void mismatch(gf_stream_run *r, uint64_t frame_id, const char *why) {
    if (r->mismatches++ == 0 && !r->o->quiet)
        fprintf(stderr, "frame %" PRIu64 ": wrong result: %s\n", frame_id, why);
}

/* Checks a RESULT of frame number `seq` (in slot `s`); returns 0 if correct. */
static int check_result(gf_stream_run *r, uint64_t seq, const gf_frame_slot *s,
                        const gf_reply *rep) {
    const gf_pipeline *p = r->pipeline;
    char why[WHY_BYTES];

    if (rep->header.frame_id != seq || rep->header.pipeline_id != p->id) {
        snprintf(why, sizeof why,
                 "reply echoes frame %" PRIu64 " pipeline %" PRIu32 ", sent frame %" PRIu64
                 " pipeline %" PRIu32,
                 rep->header.frame_id, rep->header.pipeline_id, seq, p->id);
        mismatch(r, seq, why);
        return -1;
    }
    if (s->expect_bytes >= 0 && rep->payload_bytes != (uint64_t)s->expect_bytes) {
        snprintf(why, sizeof why, "result has %zu bytes, expected %" PRId64, rep->payload_bytes,
                 s->expect_bytes);
        mismatch(r, seq, why);
        return -1;
    }
    if (!r->o->verify || s->expect_bytes < 0)
        return 0;

    const unsigned char *ref = s->ref;
    if (ref == NULL) {
        if (r->scratch_bytes < rep->payload_bytes) {
            free(r->scratch);
            r->scratch = gf_alloc_frame(rep->payload_bytes);
            r->scratch_bytes = rep->payload_bytes;
        }
        gf_stream_reference(r, s->data, s->bytes, r->scratch);
        ref = r->scratch;
    }
    if (gf_pipeline_compare_result(p, rep->payload, ref, rep->payload_bytes, why, sizeof why) < 0) {
        mismatch(r, seq, why);
        return -1;
    }
    return 0;
}

/*
 * A RESULT in shared memory as the reply it stands for: its payload is the
 * output in the frame's buffer, which gf_client_recv checked lies where the
 * frame asked.  Returns 0, or -1 with the problem recorded (a RESULT of no
 * frame buffer of this run).
 */
static int shm_view(gf_stream_run *r, uint64_t seq, const gf_reply *rep, gf_reply *view) {
    size_t bytes;
    const void *out = gf_client_shm_result(r->shm, rep, &bytes);

    if (out == NULL) {
        mismatch(r, seq, "a RESULT outside this run's shared-memory frame buffers");
        return -1;
    }
    *view = *rep;
    view->payload = out;
    view->payload_bytes = bytes;
    return 0;
}

/* Records the latency of the frame in `s`, answered now: from queueing it to
 * its reply. */
static void record_latency(gf_stream_run *r, const gf_frame_slot *s) {
    if (r->latency_count == r->latency_cap) {
        size_t cap = r->latency_cap ? 2 * r->latency_cap : 1024;
        uint64_t *l = realloc(r->latency_ns, cap * sizeof *l);
        if (l == NULL) {
            fprintf(stderr, "gpuframe: out of memory\n");
            exit(EXIT_FAIL);
        }
        r->latency_ns = l;
        r->latency_cap = cap;
    }
    r->latency_ns[r->latency_count++] = gf_now_ns() - s->queued_ns;
}

void gf_stream_handle_reply(gf_stream_run *r, const gf_reply *raw) {
    uint64_t seq = r->answered;
    const gf_frame_slot *s = &r->slots[seq % r->o->window];
    gf_reply view;
    const gf_reply *rep = raw;
    if (r->shm != NULL && raw->header.type == GF_MSG_RESULT) {
        if (shm_view(r, seq, raw, &view) < 0) {
            r->failed++;
            r->answered++;
            return;
        }
        rep = &view;
    }

    record_latency(r, s);

    if (rep->header.type == GF_MSG_ERROR) {
        if (!r->o->quiet) {
            fprintf(stderr, "frame %" PRIu64 ": ", rep->header.frame_id);
            gf_print_error_reply(stderr, rep);
        }
        r->errors_by_status[rep->header.status < GF_STATUS_COUNT_ ? rep->header.status
                                                                  : GF_STATUS_COUNT_]++;
        r->failed++;
    } else {
        r->in_bytes += s->bytes;
        r->out_bytes += rep->payload_bytes;
        if (check_result(r, seq, s, rep) < 0)
            r->failed++;
        /* Wrong results are written too: the file shows what the daemon sent. */
        if (r->out != NULL && rep->payload_bytes > 0 &&
            fwrite(rep->payload, 1, rep->payload_bytes, r->out) != rep->payload_bytes) {
            fprintf(stderr, "gpuframe: --output %s: %s\n", r->o->output_path, strerror(errno));
            exit(EXIT_FAIL);
        }
    }
    r->answered++;
}

/*
 * The summary of a run in which no frame got a correct result: rates and
 * latencies of failures mean nothing, so it says what failed instead, e.g.
 * "frames=4 errors=4 every frame failed: 3 bad_length, 1 no reply".
 */
static void print_all_failed(const gf_stream_run *r, uint64_t failed) {
    const char *sep = "";

    printf("frames=%" PRIu64 " errors=%" PRIu64 " every frame failed:", r->queued, failed);
    for (uint32_t st = 0; st <= GF_STATUS_COUNT_; st++) {
        if (r->errors_by_status[st] == 0)
            continue;
        printf("%s %" PRIu64 " %s", sep, r->errors_by_status[st], gf_status_name(st));
        sep = ",";
    }
    if (r->mismatches > 0) {
        printf("%s %" PRIu64 " wrong result%s", sep, r->mismatches, r->mismatches > 1 ? "s" : "");
        sep = ",";
    }
    if (r->queued > r->answered)
        printf("%s %" PRIu64 " no reply", sep, r->queued - r->answered);
    putchar('\n');
    fflush(stdout);
}

static void print_summary(gf_stream_run *r, uint64_t elapsed_ns, uint64_t failed) {
    double s = (double)elapsed_ns / 1e9;
    double per_s = s > 0 ? 1.0 / s : 0.0;

    if (failed > 0 && failed == r->queued) {
        print_all_failed(r, failed);
        return;
    }
    gf_sort_ns(r->latency_ns, r->latency_count);
    printf(
        "frames=%" PRIu64 " errors=%" PRIu64 " seconds=%.3f frames_per_s=%.1f in_GBps=%.3f "
        "out_GBps=%.3f p50_us=%.1f p99_us=%.1f max_us=%.1f transport=%s\n",
        r->queued, failed, s, (double)r->answered * per_s, (double)r->in_bytes * per_s / 1e9,
        (double)r->out_bytes * per_s / 1e9, gf_percentile_us(r->latency_ns, r->latency_count, 50),
        gf_percentile_us(r->latency_ns, r->latency_count, 99),
        gf_percentile_us(r->latency_ns, r->latency_count, 100), r->shm != NULL ? "shm" : "socket");
    fflush(stdout);
}

int gf_stream_finish(gf_stream_run *r, uint64_t elapsed_ns, int connection_failed) {
    const gf_stream_opts *o = r->o;

    if (r->in != NULL && r->queued == 0 && !r->input_error) {
        fprintf(stderr, "gpuframe: --input %s is empty\n", o->input_path);
        return EXIT_USAGE;
    }
    uint64_t failed = r->failed + (r->queued - r->answered);
    print_summary(r, elapsed_ns, failed);

    int status = failed == 0 && !connection_failed && !r->input_error ? EXIT_OK : EXIT_FAIL;
    if (r->out != NULL && fclose(r->out) != 0) {
        fprintf(stderr, "gpuframe: --output %s: %s\n", o->output_path, strerror(errno));
        status = EXIT_FAIL;
    }
    r->out = NULL;
    return status;
}
