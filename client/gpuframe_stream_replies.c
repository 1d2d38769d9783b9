/* SPDX-License-Identifier: MIT */
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

#include <cjson/cJSON.h>

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

/*
 * A RESULT on the device as the reply it stands for: its output copied to
 * the host when it is verified or written (--verify, --output), else no
 * payload, only its length.  Returns 0, or -1 with the problem recorded (a
 * RESULT of no window entry of this run, or a copy that failed).
 */
static int device_view(gf_stream_run *r, uint64_t seq, const gf_reply *rep, gf_reply *view) {
    const gf_shm_result *res = &rep->shm_result;
    uint64_t entry = (seq % r->o->window) * r->device_entry_bytes;
    if (!rep->shm || res->region_id != r->device.id ||
        res->out_offset != entry + r->device_in_bytes ||
        res->out_bytes > r->device_entry_bytes - r->device_in_bytes) {
        mismatch(r, seq, "a RESULT outside this frame's place in the device region");
        return -1;
    }
    *view = *rep;
    view->payload = NULL;
    view->payload_bytes = (size_t)res->out_bytes;
    if (r->device_host == NULL)
        return 0;
    int err = gf_client_device_copy_from(&r->device, res->out_offset, r->device_host,
                                         (size_t)res->out_bytes);
    if (err < 0) {
        mismatch(r, seq, "its result could not be copied from the GPU");
        return -1;
    }
    view->payload = r->device_host;
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
    if ((r->shm != NULL || r->device.dev_ptr != 0) && raw->header.type == GF_MSG_RESULT) {
        if ((r->device.dev_ptr != 0 ? device_view : shm_view)(r, seq, raw, &view) < 0) {
            r->failed++;
            r->answered++;
            return;
        }
        rep = &view;
    }

    /* What --deadline-ms and --latest-only asked the daemon to drop: counted
     * apart, neither failures nor deliveries (no latency). */
    if (rep->header.type == GF_MSG_ERROR &&
        ((rep->header.status == GF_ERR_DEADLINE_EXCEEDED && r->o->deadline_ms > 0) ||
         (rep->header.status == GF_ERR_SUPERSEDED && r->o->latest_only))) {
        if (rep->header.status == GF_ERR_DEADLINE_EXCEEDED)
            r->late++;
        else
            r->superseded++;
        r->answered++;
        return;
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
    FILE *f = r->report;

    fprintf(f, "frames=%" PRIu64 " errors=%" PRIu64 " every frame failed:", r->queued, failed);
    for (uint32_t st = 0; st <= GF_STATUS_COUNT_; st++) {
        if (r->errors_by_status[st] == 0)
            continue;
        fprintf(f, "%s %" PRIu64 " %s", sep, r->errors_by_status[st], gf_status_name(st));
        sep = ",";
    }
    if (r->mismatches > 0) {
        fprintf(f, "%s %" PRIu64 " wrong result%s", sep, r->mismatches,
                r->mismatches > 1 ? "s" : "");
        sep = ",";
    }
    if (r->queued > r->answered)
        fprintf(f, "%s %" PRIu64 " no reply", sep, r->queued - r->answered);
    fputc('\n', f);
}

/* A run's figures, as the summary line and --json give them. */
struct figures {
    uint64_t frames, errors;
    double seconds, frames_per_s, in_gbps, out_gbps, p50_us, p99_us, max_us;
    const char *transport;
};

static struct figures figures_of(gf_stream_run *r, uint64_t elapsed_ns, uint64_t failed) {
    double s = (double)elapsed_ns / 1e9;
    double per_s = s > 0 ? 1.0 / s : 0.0;

    gf_sort_ns(r->latency_ns, r->latency_count);
    return (struct figures){
        .frames = r->queued,
        .errors = failed,
        .seconds = s,
        .frames_per_s = (double)r->answered * per_s,
        .in_gbps = (double)r->in_bytes * per_s / 1e9,
        .out_gbps = (double)r->out_bytes * per_s / 1e9,
        .p50_us = gf_percentile_us(r->latency_ns, r->latency_count, 50),
        .p99_us = gf_percentile_us(r->latency_ns, r->latency_count, 99),
        .max_us = gf_percentile_us(r->latency_ns, r->latency_count, 100),
        .transport = r->device.dev_ptr != 0 ? "device"
                     : r->shm != NULL       ? "shm"
                                            : "socket",
    };
}

/* --json: the figures, and what failed, as one JSON object on a line. */
static void print_json(const gf_stream_run *r, const struct figures *fg) {
    cJSON *doc = cJSON_CreateObject(), *by_status = NULL;

    cJSON_AddNumberToObject(doc, "frames", (double)fg->frames);
    cJSON_AddNumberToObject(doc, "errors", (double)fg->errors);
    cJSON_AddNumberToObject(doc, "seconds", fg->seconds);
    cJSON_AddNumberToObject(doc, "frames_per_s", fg->frames_per_s);
    cJSON_AddNumberToObject(doc, "in_GBps", fg->in_gbps);
    cJSON_AddNumberToObject(doc, "out_GBps", fg->out_gbps);
    cJSON_AddNumberToObject(doc, "p50_us", fg->p50_us);
    cJSON_AddNumberToObject(doc, "p99_us", fg->p99_us);
    cJSON_AddNumberToObject(doc, "max_us", fg->max_us);
    cJSON_AddStringToObject(doc, "transport", fg->transport);
    by_status = cJSON_AddObjectToObject(doc, "errors_by_status");
    for (uint32_t st = 0; st <= GF_STATUS_COUNT_; st++)
        if (r->errors_by_status[st] > 0)
            cJSON_AddNumberToObject(by_status, gf_status_name(st), (double)r->errors_by_status[st]);
    cJSON_AddNumberToObject(doc, "wrong_results", (double)r->mismatches);
    cJSON_AddNumberToObject(doc, "deadline_exceeded", (double)r->late);
    cJSON_AddNumberToObject(doc, "superseded", (double)r->superseded);
    cJSON_AddNumberToObject(doc, "no_reply", (double)(r->queued - r->answered));
    cJSON_AddBoolToObject(doc, "interrupted", r->interrupted);
    if (r->o->start_at > 0)
        cJSON_AddNumberToObject(doc, "started", r->started_s);
    char *text = cJSON_PrintUnformatted(doc);
    if (text == NULL) {
        fprintf(stderr, "gpuframe: out of memory\n");
        exit(EXIT_FAIL);
    }
    fprintf(r->report, "%s\n", text);
    cJSON_free(text);
    cJSON_Delete(doc);
}

/* The summary line's end for --deadline-ms and --latest-only, the frames
 * the daemon dropped as asked, and for --start-at, when the first frame
 * went; "" without them. */
static const char *summary_tail(const gf_stream_run *r) {
    static char text[128];
    int n = 0;
    text[0] = '\0';
    if (r->o->deadline_ms > 0)
        n = snprintf(text, sizeof text, " deadline_exceeded=%" PRIu64, r->late);
    if (r->o->latest_only)
        n += snprintf(text + n, sizeof text - (size_t)n, " superseded=%" PRIu64, r->superseded);
    if (r->o->start_at > 0)
        snprintf(text + n, sizeof text - (size_t)n, " started=%.3f", r->started_s);
    return text;
}

static void print_summary(gf_stream_run *r, uint64_t elapsed_ns, uint64_t failed) {
    struct figures fg = figures_of(r, elapsed_ns, failed);

    if (r->o->json)
        print_json(r, &fg);
    else if (failed > 0 && failed == r->queued)
        print_all_failed(r, failed);
    else
        fprintf(r->report,
                "frames=%" PRIu64 " errors=%" PRIu64 " seconds=%.3f frames_per_s=%.1f "
                "in_GBps=%.3f out_GBps=%.3f p50_us=%.1f p99_us=%.1f max_us=%.1f transport=%s%s\n",
                fg.frames, fg.errors, fg.seconds, fg.frames_per_s, fg.in_gbps, fg.out_gbps,
                fg.p50_us, fg.p99_us, fg.max_us, fg.transport, summary_tail(r));
    fflush(r->report);
}

int gf_stream_finish(gf_stream_run *r, uint64_t elapsed_ns, int connection_failed) {
    const gf_stream_opts *o = r->o;

    if (r->in != NULL && r->queued == 0 && !r->input_error && !r->interrupted) {
        fprintf(stderr, "gpuframe: --input %s is empty\n", o->input_path);
        return EXIT_USAGE;
    }
    /* The results first: with --output - the summary follows them. */
    int status = EXIT_OK;
    if (r->out != NULL && (r->out == stdout ? fflush(r->out) : fclose(r->out)) != 0) {
        fprintf(stderr, "gpuframe: --output %s: %s\n", o->output_path, strerror(errno));
        status = EXIT_FAIL;
    }
    r->out = NULL;
    uint64_t failed = r->failed + (r->queued - r->answered);
    print_summary(r, elapsed_ns, failed);
    if (failed > 0 || connection_failed || r->input_error)
        status = EXIT_FAIL;
    if (r->interrupted) {
        if (!o->quiet && r->planned != UINT64_MAX)
            fprintf(stderr,
                    "gpuframe stream: interrupted: sent %" PRIu64 " of %" PRIu64 " frames\n",
                    r->queued, r->planned);
        else if (!o->quiet)
            fprintf(stderr, "gpuframe stream: interrupted: sent %" PRIu64 " frames\n", r->queued);
        status = EXIT_INTERRUPTED;
    }
    return status;
}
