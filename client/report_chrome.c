/* SPDX-License-Identifier: MIT */
/*
 * gf_report_trace_chrome: a TRACE document as a Chrome trace-event JSON file
 * for Perfetto and chrome://tracing; report.h is the contract.
 */
#include "report.h"

#include <errno.h>
#include <inttypes.h>

#include "report_doc.h"
#include "report_text.h"
#include "report_trace.h"

/* Writes `ns` as microseconds with exactly three decimals. */
static void put_us(FILE *out, uint64_t ns) {
    fprintf(out, "%" PRIu64 ".%03u", ns / NS_PER_US, (unsigned)(ns % NS_PER_US));
}

static void chrome_metadata(FILE *out, const gf_tdoc *t) {
    const char *engine = gf_doc_str(t->doc, "engine");

    fputs("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\"args\":{\"name\":\""
          "gpuframed",
          out);
    if (engine != NULL) {
        fputs(" (", out);
        gf_put_text(out, engine, GF_ESC_JSON);
        fputs(" engine)", out);
    }
    fputs("\"}}", out);
    for (uint32_t g = 0; g < t->group_count; g++)
        for (unsigned l = 0; l < GF_REPORT_LANES_PER_SLOT; l++) {
            if (!t->lane_used[(size_t)g * GF_REPORT_LANES_PER_SLOT + l])
                continue;
            unsigned tid = GF_REPORT_TID(g, l);
            fprintf(out,
                    ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%u,"
                    "\"args\":{\"name\":\"",
                    tid);
            gf_tdoc_put_group(t, g, out);
            fprintf(out, " %s\"}}", gf_lane_names[l]);
            fprintf(out,
                    ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,\"tid\":%u,"
                    "\"args\":{\"sort_index\":%u}}",
                    tid, tid);
        }
}

static void chrome_event(FILE *out, const gf_tdoc *t, const gf_tev *e, const cJSON *pipelines) {
    const gf_tframe *f = &t->frames[e->frame];
    const gf_ev_kind_info *kind = &gf_ev_kinds[e->kind];
    const char *pname = gf_doc_pipeline_name(pipelines, f->pipeline);

    fprintf(out, ",\n{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":1,\"tid\":%u,\"ts\":",
            kind->name, kind->category, GF_REPORT_TID(f->group, kind->lane));
    put_us(out, e->begin);
    fputs(",\"dur\":", out);
    put_us(out, e->end - e->begin);
    fprintf(out, ",\"args\":{\"frame_id\":%" PRIu64 ",\"pipeline\":%" PRIu64, f->frame_id,
            f->pipeline);
    if (pname != NULL) {
        fputs(",\"pipeline_name\":\"", out);
        gf_put_text(out, pname, GF_ESC_JSON);
        fputc('"', out);
    }
    if (t->shard_count > 1)
        fprintf(out, ",\"shard\":%" PRIu32, f->shard);
    fprintf(out,
            ",\"slot\":%" PRIu32 ",\"conn\":%" PRIu64 ",\"status\":%" PRIu64 ",\"bytes\":%" PRIu64
            ",\"slot_wait_ns\":%" PRIu64 ",\"end_to_end_ns\":%" PRIu64 "}}",
            f->slot, f->conn, f->status, kind->out_bytes ? f->out_bytes : f->in_bytes,
            f->claimed > f->arrived ? f->claimed - f->arrived : 0,
            f->written > f->arrived ? f->written - f->arrived : 0);
}

int gf_report_trace_chrome(const cJSON *trace, const cJSON *pipelines, FILE *out, char *err,
                           size_t err_len) {
    const char *clock_name = gf_doc_str(trace, "clock");
    gf_tdoc t;
    int rc = gf_tdoc_parse(trace, &t, err, err_len);

    if (rc < 0) {
        gf_tdoc_free(&t);
        return rc;
    }
    fputs("{\"displayTimeUnit\":\"ns\",\n\"otherData\":{\"source\":\"gpuframed TRACE\","
          "\"clock\":\"",
          out);
    gf_put_text(out, clock_name != NULL ? clock_name : "monotonic", GF_ESC_JSON);
    fprintf(out, "\",\"t0_ns\":%.0f,\"engine\":\"",
            gf_doc_is_uint(gf_doc_get(trace, "t0_ns")) ? gf_doc_num(trace, "t0_ns") : 0.0);
    gf_put_text(out, gf_doc_str(trace, "engine"), GF_ESC_JSON);
    fputc('"', out);
    if (t.shard_count > 1)
        fprintf(out, ",\"shards\":%" PRIu32, t.shard_count);
    fprintf(out, ",\"frames\":%zu},\n\"traceEvents\":[\n", t.frame_count);
    chrome_metadata(out, &t);
    for (size_t k = 0; k < t.event_count; k++)
        chrome_event(out, &t, &t.events[k], pipelines);
    fputs("\n]}\n", out);
    gf_tdoc_free(&t);
    return ferror(out) ? -EIO : 0;
}
