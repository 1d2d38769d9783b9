/* SPDX-License-Identifier: MIT */
/*
 * gf_report_trace_svg: a TRACE document as a self-contained SVG timeline, one
 * row per lane in use; report.h is the contract.
 */
#include "report.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "report_doc.h"
#include "report_text.h"
#include "report_trace.h"
#include "util.h"

/* Layout, in SVG user units (pixels). */
#define SVG_WIDTH      1200 /* the whole picture                         */
#define SVG_LABEL_W    130  /* lane labels, left of the plot             */
#define SVG_RIGHT_W    30   /* margin right of the plot                  */
#define SVG_TOP_H      62   /* title and legend above the lanes          */
#define SVG_ROW_H      20   /* one lane                                  */
#define SVG_BAR_H      14   /* an event's rectangle inside its lane      */
#define SVG_AXIS_H     48   /* tick labels and the axis caption          */
#define SVG_CHAR_W     7    /* a generous width of one label character   */
#define SVG_LEGEND_GAP 20   /* between one legend entry and the next     */
/* More label room when lanes are named "shard K slot J ...": "shard 1023 ". */
#define SVG_SHARD_LABEL_W (11 * SVG_CHAR_W)
/* About this many ticks on the time axis. */
#define SVG_TICKS 8
/* The micro sign in the picture: the real one, the file is UTF-8. */
#define SVG_MICRO "\xC2\xB5s"

/* The 1-2-5 tick step for `span_ns` and the unit its labels use. */
static void tick_step(uint64_t span_ns, uint64_t *step, uint64_t *unit, const char **unit_name) {
    uint64_t raw = span_ns / SVG_TICKS, p = 1;

    while (p <= raw / 10)
        p *= 10;
    *step = raw <= p ? p : raw <= 2 * p ? 2 * p : raw <= 5 * p ? 5 * p : 10 * p;
    if (*step >= NS_PER_S) {
        *unit = NS_PER_S;
        *unit_name = "s";
    } else if (*step >= NS_PER_MS) {
        *unit = NS_PER_MS;
        *unit_name = "ms";
    } else if (*step >= NS_PER_US) {
        *unit = NS_PER_US;
        *unit_name = SVG_MICRO;
    } else {
        *unit = 1;
        *unit_name = "ns";
    }
}

/* The width of the lane labels left of the plot, where the plot begins. */
static int label_w(const gf_tdoc *t) {
    return SVG_LABEL_W + (t->shard_count > 1 ? SVG_SHARD_LABEL_W : 0);
}

static void svg_header(FILE *out, int height) {
    fprintf(out,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" "
            "height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"DejaVu Sans, Helvetica, Arial, "
            "sans-serif\" font-size=\"11\">\n"
            "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n",
            SVG_WIDTH, height, SVG_WIDTH, height, SVG_WIDTH, height);
}

static void svg_title(FILE *out, const gf_tdoc *t) {
    char span[CELL_BYTES];
    const char *engine = gf_doc_str(t->doc, "engine");

    fputs("<text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">gpuframed trace: ", out);
    if (t->event_count == 0)
        fprintf(out, "%zu frames, nothing to draw", t->frame_count);
    else
        fprintf(out, "%zu frame%s over %s", t->frame_count, t->frame_count == 1 ? "" : "s",
                gf_report_format_ns(t->end - t->begin, SVG_MICRO, span, sizeof span));
    if (engine != NULL) {
        fputs(", ", out);
        gf_put_text(out, engine, GF_ESC_XML);
        fputs(" engine", out);
    }
    if (t->shard_count > 1)
        fprintf(out, ", %" PRIu32 " shards", t->shard_count);
    if (gf_doc_is_uint(gf_doc_get(t->doc, "slots")))
        fprintf(out, "%s %.0f slots", t->shard_count > 1 ? " of" : ",",
                gf_doc_num(t->doc, "slots"));
    fputs("</text>\n", out);
}

static void svg_legend(FILE *out, const gf_tdoc *t) {
    int x = label_w(t);

    for (int k = 0; k < GF_EV_KINDS; k++) {
        const gf_ev_kind_info *kind = &gf_ev_kinds[k];
        const char *lane = kind->lane == GF_REPORT_LANE_HOST ? " (host)" : "";
        fprintf(out,
                "<rect class=\"key\" x=\"%d\" y=\"36\" width=\"12\" height=\"12\" fill=\"%s\"/>"
                "<text x=\"%d\" y=\"46\">%s%s</text>\n",
                x, kind->colour, x + 17, kind->name, lane);
        x += 17 + (int)(strlen(kind->name) + strlen(lane)) * SVG_CHAR_W + SVG_LEGEND_GAP;
    }
}

/* The lane rows and their labels; `row_of` gets each used lane's row. */
static void svg_lanes(FILE *out, const gf_tdoc *t, int *row_of) {
    int row = 0;
    uint32_t shown = 0; /* lane groups drawn before this one */

    fputs("<g id=\"lanes\">\n", out);
    for (uint32_t g = 0; g < t->group_count; g++) {
        /* Shade every other slot so its lanes read as one group: by slot
         * number with one shard, as always; by the groups drawn with several,
         * whose slot numbers start again at each shard. */
        uint32_t shade = t->shard_count > 1 ? shown : g;
        int drawn = 0;
        for (unsigned l = 0; l < GF_REPORT_LANES_PER_SLOT; l++) {
            size_t lane = (size_t)g * GF_REPORT_LANES_PER_SLOT + l;
            row_of[lane] = -1;
            if (!t->lane_used[lane])
                continue;
            int y = SVG_TOP_H + row * SVG_ROW_H;
            fprintf(out,
                    "<rect class=\"lane\" x=\"0\" y=\"%d\" width=\"%d\" height=\"%d\" "
                    "fill=\"%s\"/><text x=\"%d\" y=\"%d\" text-anchor=\"end\">",
                    y, SVG_WIDTH, SVG_ROW_H, shade % 2 ? "#f3f3f3" : "#fbfbfb", label_w(t) - 8,
                    y + SVG_ROW_H / 2 + 4);
            gf_tdoc_put_group(t, g, out);
            fprintf(out, " %s</text>\n", gf_lane_names[l]);
            row_of[lane] = row++;
            drawn = 1;
        }
        shown += (uint32_t)drawn;
    }
    fputs("</g>\n", out);
}

static void svg_axis(FILE *out, const gf_tdoc *t, int rows, double scale) {
    uint64_t span = t->end - t->begin, step, unit;
    const char *unit_name;
    int top = SVG_TOP_H, bottom = SVG_TOP_H + rows * SVG_ROW_H;

    tick_step(span, &step, &unit, &unit_name);
    fputs("<g id=\"axis\" stroke=\"#c8c8c8\" stroke-width=\"1\">\n", out);
    for (uint64_t v = 0; v <= span; v += step) {
        double x = label_w(t) + (double)v * scale;
        fprintf(out, "<line x1=\"%.2f\" y1=\"%d\" x2=\"%.2f\" y2=\"%d\"/>\n", x, top, x,
                bottom + 4);
        if (span - v < step)
            break; /* the next tick would be past the end (and v + step may wrap) */
    }
    fputs("</g>\n<g id=\"ticks\" text-anchor=\"middle\" fill=\"#333333\">\n", out);
    for (uint64_t v = 0; v <= span; v += step) {
        fprintf(out, "<text x=\"%.2f\" y=\"%d\">%" PRIu64 " %s</text>\n",
                label_w(t) + (double)v * scale, bottom + 17, v / unit, unit_name);
        if (span - v < step)
            break;
    }
    fprintf(out,
            "</g>\n<text x=\"%d\" y=\"%d\" fill=\"#555555\">time from the first event, %.6f s "
            "after the daemon started; hover a bar for its frame</text>\n",
            label_w(t), bottom + 38, (double)t->begin / NS_PER_S);
}

static void svg_event(FILE *out, const gf_tdoc *t, const gf_tev *e, int row, double scale,
                      const cJSON *pipelines) {
    const gf_tframe *f = &t->frames[e->frame];
    const gf_ev_kind_info *kind = &gf_ev_kinds[e->kind];
    const char *pname = gf_doc_pipeline_name(pipelines, f->pipeline);
    double x = label_w(t) + (double)(e->begin - t->begin) * scale;
    double w = (double)(e->end - e->begin) * scale;
    char dur[CELL_BYTES];

    if (w < GF_REPORT_SVG_MIN_RECT_PX)
        w = GF_REPORT_SVG_MIN_RECT_PX;
    fprintf(out,
            "<rect class=\"ev\" x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\">"
            "<title>frame %" PRIu64 " (pipeline ",
            x, SVG_TOP_H + row * SVG_ROW_H + (SVG_ROW_H - SVG_BAR_H) / 2, w, SVG_BAR_H,
            kind->colour, f->frame_id);
    if (pname != NULL)
        gf_put_text(out, pname, GF_ESC_XML);
    else
        fprintf(out, "%" PRIu64, f->pipeline);
    fputs(", ", out);
    gf_tdoc_put_slot(t, f->shard, f->slot, out);
    fprintf(out, "): %s %s, %" PRIu64 " bytes</title></rect>\n", kind->name,
            gf_report_format_ns(e->end - e->begin, SVG_MICRO, dur, sizeof dur),
            kind->out_bytes ? f->out_bytes : f->in_bytes);
}

int gf_report_trace_svg(const cJSON *trace, const cJSON *pipelines, FILE *out, char *err,
                        size_t err_len) {
    gf_tdoc t;
    int *row_of = NULL;
    int rc = gf_tdoc_parse(trace, &t, err, err_len);

    if (rc < 0)
        goto done;
    if (t.event_count == 0) {
        svg_header(out, SVG_TOP_H);
        svg_title(out, &t);
        fputs("<text x=\"10\" y=\"46\">The daemon has answered no frame since it started, or "
              "keeps none (trace_frames 0).</text>\n</svg>\n",
              out);
        rc = ferror(out) ? -EIO : 0;
        goto done;
    }
    row_of = malloc((size_t)t.group_count * GF_REPORT_LANES_PER_SLOT * sizeof *row_of);
    if (row_of == NULL) {
        gf_errorf(err, err_len, "out of memory");
        rc = -ENOMEM;
        goto done;
    }
    int rows = (int)t.lanes;
    double span = (double)(t.end - t.begin);
    double scale = (SVG_WIDTH - label_w(&t) - SVG_RIGHT_W) / span;

    svg_header(out, SVG_TOP_H + rows * SVG_ROW_H + SVG_AXIS_H);
    svg_title(out, &t);
    svg_legend(out, &t);
    svg_lanes(out, &t, row_of);
    svg_axis(out, &t, rows, scale);
    fputs("<g id=\"events\">\n", out);
    for (size_t k = 0; k < t.event_count; k++) {
        const gf_tev *e = &t.events[k];
        svg_event(out, &t, e, row_of[gf_tdoc_lane(&t, e)], scale, pipelines);
    }
    fputs("</g>\n</svg>\n", out);
    rc = ferror(out) ? -EIO : 0;
done:
    free(row_of);
    gf_tdoc_free(&t);
    return rc;
}
