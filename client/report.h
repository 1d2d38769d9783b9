/* SPDX-License-Identifier: MIT */
/*
 * report: turns the daemon's STATS and TRACE documents (daemon/STATS.md) into
 * what people and tools read: a summary table, the Prometheus text exposition
 * format, a Chrome trace-event file and a self-contained SVG timeline.
 *
 * Every function is a pure function of parsed cJSON documents: it reads them,
 * writes text to the FILE* it is given and nothing else (no socket, no
 * clock, no environment), so each output can be checked byte for byte by a
 * test writing to a memory stream.  The caller keeps ownership of the
 * documents and of `out`; nothing is retained after a call.
 *
 * Documents come from a socket, so they are treated as untrusted: a key that
 * is missing or of the wrong type is skipped by the STATS renderers (newer and
 * older daemons add keys), strings are escaped for the output's syntax
 * (Prometheus label values, JSON strings, XML text and attributes, a
 * terminal's control characters) and bytes that are not UTF-8 become '?'.
 * The TRACE renderers need each frame's slot and host timestamps and refuse a
 * document without them.
 *
 * Return values: 0; -EINVAL when the document is not what the renderer needs
 * (with the reason in err[err_len] where there is one); -ENOMEM; -EIO when a
 * write to `out` failed (ferror).  On an error part of the output may have
 * been written: render into a memory stream (open_memstream) first where a
 * partial output would do harm, such as a Prometheus textfile.
 */
#ifndef GF_REPORT_H
#define GF_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Trace lanes above this slot index are refused: the daemon has at most 64
 * slots (GF_SLOTS_MAX), and one lane per slot and stage must stay bounded. */
#define GF_REPORT_SLOTS_MAX 1024u

/*
 * Writes the summary table of STATS document `stats`: identity and uptime,
 * slots and pinned memory, connections, frame outcomes, bytes, requests,
 * rejections by reason (nonzero ones), rates over 1 s and 10 s, end-to-end
 * latency percentiles, each pipeline's mean time per phase in microseconds
 * (sum of ns / count; "-" where the count is 0), GPU busy and overlap
 * fractions (the section is left out when `gpu` is null) and event-loop
 * utilisation; then, for a sharded daemon (whose document has "shards" and
 * "devices"), one line per shard (device, connections, slots busy, in
 * flight, frames/s and loop utilisation over 1 s) and one per device (name,
 * shards, frames/s), and the slots line names the slots per shard.  A
 * document without them gives the table of a daemon before sharding.
 * -EINVAL when `stats` is not an object.
 */
int gf_report_stats_table(const cJSON *stats, FILE *out);

/*
 * Writes STATS document `stats` in the Prometheus text exposition format,
 * version 0.0.4: every metric named gpuframe_<what>_<unit> with a # HELP and
 * a # TYPE line, counters ending in _total, times in _seconds, sizes in
 * _bytes, fractions in _ratio; gpuframe_info{version,engine,device} 1; the
 * per-pipeline phases as a summary without quantiles
 * (gpuframe_phase_seconds_sum/_count{pipeline,phase}); end-to-end latency as
 * the histogram gpuframe_latency_seconds (cumulative _bucket{le}, le="+Inf"
 * equal to _count, _sum).  Every counter of STATS is a counter here and no
 * rate is (the document's "rates" and loop.utilisation_* are left out:
 * rate() computes them from the counters).  A metric whose key is missing is
 * left out, and so is the whole GPU section when `gpu` is null or the engine
 * is "cpu".  A sharded daemon's document adds gpuframe_shards, per-shard
 * families labelled {shard,device} (gpuframe_shard_*: connections,
 * slots_busy, in_flight, frames_answered_total, frames_failed_total,
 * submissions_total, and loop_utilisation_ratio, a gauge over the daemon's
 * last second since no counter gives it) and per-device families labelled
 * {device} (gpuframe_device_info{name,pci_bus_id}, in_flight,
 * frames_answered_total, pinned_bytes); `device` is the ordinal, "cpu" on the
 * CPU engine.  They follow every other family, and a shard or device whose
 * number is malformed or repeated is left out, never written twice.  -EINVAL when `stats` is not an
 * object or its latency histogram is malformed (err[err_len] says how).
 */
int gf_report_stats_prometheus(const cJSON *stats, FILE *out, char *err, size_t err_len);

/* What gf_report_trace_summary tells about a TRACE document. */
typedef struct gf_report_trace_info {
    size_t frames;     /* frames in the document                           */
    size_t events;     /* stage events drawn (X events, SVG rectangles)    */
    size_t lanes;      /* lanes (slot x stage) holding at least one event  */
    uint64_t begin_ns; /* earliest event start, ns after the daemon's t0   */
    uint64_t end_ns;   /* latest event end; begin_ns = end_ns = 0 if none  */
} gf_report_trace_info;

/*
 * The lane scheme shared by the Chrome trace and the SVG: every slot of every
 * shard has four lanes, in this order, named "slot S H2D", "slot S kernel",
 * "slot S D2H" and "slot S host" ("shard K slot S ..." in a trace of several
 * shards; report_trace.h numbers a shard's slot shard * slots + slot).  A frame in slot S draws up
 * to six events: H2D, kernel and D2H in their lanes (the daemon's stream intervals; null or empty
 * intervals, such as the CPU engine's copies, draw nothing), and in the host lane "receive" (slot
 * claimed -> submitted: the payload read into the pinned buffer), "completion_delay" (GPU done ->
 * the loop has the completion; GPU done is the end of D2H, or `done` without timed stages) and
 * "reply_write" (completion on the loop -> reply written), named like STATS's phases.  These lie
 * inside the time the frame owns the slot, so the events of one lane never overlap.  Waiting for a
 * slot happens before a frame has one and is given in each event's arguments instead.
 */
enum gf_report_lane {
    GF_REPORT_LANE_H2D = 0,
    GF_REPORT_LANE_KERNEL = 1,
    GF_REPORT_LANE_D2H = 2,
    GF_REPORT_LANE_HOST = 3,
    GF_REPORT_LANES_PER_SLOT = 4
};

/* The Chrome trace thread id of a lane: 1 + slot * 4 + lane, `slot` the
 * numbered (shard, slot) of report_trace.h; lanes sort in tid order. */
#define GF_REPORT_TID(slot, lane)                                                                  \
    (1u + (unsigned)(slot)*GF_REPORT_LANES_PER_SLOT + (unsigned)(lane))

/* Counts the frames, events and lanes of TRACE document `trace` and its time
 * span, as the renderers below would draw them.  Returns 0 or -EINVAL/-ENOMEM
 * with the reason in err[err_len]. */
int gf_report_trace_summary(const cJSON *trace, gf_report_trace_info *info, char *err,
                            size_t err_len);

/*
 * Writes TRACE document `trace` as a Chrome trace-event JSON object
 * {"traceEvents": [...], "displayTimeUnit": "ns", "otherData": {...}} that
 * Perfetto and chrome://tracing open: pid 1, one "M" process_name event, for
 * each lane in use a thread_name and a thread_sort_index "M" event, and one
 * "X" event per stage event with ts and dur in microseconds (ns / 1000,
 * written exactly with three decimals) on the daemon's clock (ns after its
 * t0) and args {frame_id, pipeline, pipeline_name (when known), slot, conn,
 * status, bytes, slot_wait_ns, end_to_end_ns}.  `pipelines` is the daemon's
 * LIST document, used only to name pipelines; NULL is fine.
 */
int gf_report_trace_chrome(const cJSON *trace, const cJSON *pipelines, FILE *out, char *err,
                           size_t err_len);

/*
 * Writes TRACE document `trace` as a standalone SVG 1.1 picture: a title with
 * the frame count, span and engine, a legend, one row per lane in use
 * (labelled as above), one <rect class="ev"> per stage event coloured by stage
 * (at least GF_REPORT_SVG_MIN_RECT_PX wide so that short ones stay visible)
 * with a <title> tooltip, and a time axis from the first event with 1-2-5
 * ticks labelled in ns, µs, ms or s.  A document with no frames gives a small
 * picture that says so.  `pipelines` as for gf_report_trace_chrome.
 */
int gf_report_trace_svg(const cJSON *trace, const cJSON *pipelines, FILE *out, char *err,
                        size_t err_len);

/* The narrowest event rectangle, in SVG user units (pixels). */
#define GF_REPORT_SVG_MIN_RECT_PX 1.0

/*
 * Formats a duration of `ns` nanoseconds for people into buf[len]: "850 ns",
 * "12.3 us"-style with `micro` as the microsecond symbol ("us" or "µs"),
 * "1.234 ms", "2.500 s".  Returns buf.
 */
const char *gf_report_format_ns(uint64_t ns, const char *micro, char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif
