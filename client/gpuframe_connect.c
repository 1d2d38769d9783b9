/* SPDX-License-Identifier: MIT */
/*
 * Reaching the daemon for gpuframe's subcommands, and reporting what failed;
 * gpuframe_connect.h is the contract.
 */
#include "gpuframe_connect.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "gpuframe_commands.h"
#include "listing.h"

/* Prints `len` bytes of untrusted text with control characters as '?'. */
static void print_text(FILE *f, const void *text, size_t len) {
    const unsigned char *s = text;

    for (size_t i = 0; i < len; i++)
        fputc(s[i] < 0x20 || s[i] == 0x7F ? '?' : s[i], f);
}

/* Prints an ERROR reply's status, by name, or by number when this client
 * does not know the code (a newer daemon's). */
static void print_status(FILE *f, uint32_t status) {
    if (status < GF_STATUS_COUNT_)
        fputs(gf_status_name(status), f);
    else
        fprintf(f, "status %" PRIu32, status);
}

void gf_print_error_reply(FILE *f, const gf_reply *rep) {
    print_status(f, rep->header.status);
    fputs(": ", f);
    print_text(f, rep->payload, rep->payload_bytes);
    fputc('\n', f);
}

void gf_print_client_error(const gf_client *c, const char *what, int err) {
    const char *msg = c != NULL ? gf_client_error(c) : "";

    if (err == -ETIMEDOUT)
        fprintf(stderr, "gpuframe: %s: no reply from the daemon in time (see --timeout)\n", what);
    else if (msg[0] != '\0' &&
             (err == -EPROTO || err == -EMSGSIZE || err == -EREMOTEIO || err == -ECONNRESET))
        fprintf(stderr, "gpuframe: %s: %s\n", what, msg);
    else
        fprintf(stderr, "gpuframe: %s: %s\n", what, strerror(-err));
}

gf_client *gf_connect_or_die(const gf_common_opts *o) {
    gf_client *c;
    char why[GF_CONNECT_WHY_BYTES];
    int err = gf_client_connect(o->socket_path, &c);

    if (err < 0) {
        fprintf(stderr, "gpuframe: %s\n",
                gf_client_connect_error(o->socket_path, err, SOCKET_HOW_TO_POINT, why, sizeof why));
        exit(EXIT_FAIL);
    }
    return c;
}

char *gf_request_json_or_die(gf_client *c, uint8_t type, const gf_common_opts *o) {
    char *json = NULL;
    int err = gf_client_request_json(c, type, &json, o->timeout_ms);

    if (err < 0) {
        gf_print_client_error(c, gf_msg_type_name(type), err);
        gf_client_close(c);
        exit(EXIT_FAIL);
    }
    return json;
}

gf_pipeline *gf_fetch_pipelines(gf_client *c, const gf_common_opts *o, size_t *count,
                                uint64_t *max_frame_bytes) {
    char why[WHY_BYTES];
    gf_pipeline *pipelines;
    char *json = gf_request_json_or_die(c, GF_MSG_LIST, o);

    if (max_frame_bytes != NULL) {
        cJSON *doc = cJSON_Parse(json);
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(doc, "max_frame_bytes");
        *max_frame_bytes = cJSON_IsNumber(v) && v->valuedouble >= 1 ? (uint64_t)v->valuedouble : 0;
        cJSON_Delete(doc);
    }
    if (gf_pipelines_from_json(json, &pipelines, count, why, sizeof why) < 0) {
        fprintf(stderr, "gpuframe: daemon's pipeline list is invalid: %s\n", why);
        free(json);
        gf_client_close(c);
        exit(EXIT_FAIL);
    }
    free(json);
    return pipelines;
}
