#include "stats.h"

static void add_u64(cJSON *obj, const char *key, uint64_t v) {
    cJSON_AddNumberToObject(obj, key, (double)v);
}

void gf_stats_to_json(const gf_stats *st, cJSON *obj) {
    add_u64(obj, "uptime_ns", gf_now_ns() - st->started_ns);
    cJSON *c = cJSON_AddObjectToObject(obj, "connections");
    add_u64(c, "open", st->connections_open);
    add_u64(c, "total", st->connections_total);
    add_u64(c, "closed_fatal", st->connections_closed_fatal);
    cJSON *f = cJSON_AddObjectToObject(obj, "frames");
    add_u64(f, "received", st->frames_received);
    add_u64(f, "answered", st->frames_answered);
    add_u64(f, "dropped", st->frames_dropped);
    add_u64(f, "truncated", st->frames_truncated);
    cJSON *r = cJSON_AddObjectToObject(obj, "rejected");
    for (uint32_t s = 1; s < GF_STATUS_COUNT_; s++)
        add_u64(r, gf_status_name(s), st->rejected[s]);
    cJSON *q = cJSON_AddObjectToObject(obj, "requests");
    add_u64(q, "list", st->requests_list);
    add_u64(q, "stats", st->requests_stats);
    cJSON *b = cJSON_AddObjectToObject(obj, "bytes");
    add_u64(b, "in", st->bytes_in);
    add_u64(b, "out", st->bytes_out);
    add_u64(obj, "backpressure_pauses", st->backpressure_pauses);
    cJSON *t = cJSON_AddObjectToObject(obj, "time_ns");
    add_u64(t, "engine", st->engine_ns_total);
    add_u64(t, "end_to_end", st->end_to_end_ns_total);
}
