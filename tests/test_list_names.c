/* SPDX-License-Identifier: MIT */
/*
 * Check suite of client/list_names.c, libgpuframe's reader of the pipelines'
 * names and ids in a LIST document: the names and ids of documents as the
 * daemon writes them and as JSON allows them to be written, and a reason for
 * every malformed one, including every truncation of a good one.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "list_names.h"
#include "listing.h"
#include "runner.h"

#define WHY_BYTES 256
/* Room for what a test collects: "name=id name=id ...". */
#define SEEN_BYTES 1024

/* PROTOCOL.md's LIST example, as printed there. */
static const char protocol_example[] =
    "{\"pipelines\":[\n"
    "  {\"id\":0,\"name\":\"echo\",\"kind\":\"echo\",\"params\":{},\n"
    "   \"doc\":\"Returns the input unchanged.\"},\n"
    "  {\"id\":1,\"name\":\"scale2\",\"kind\":\"affine\",\"params\":{\"a\":2,\"b\":1},\n"
    "   \"doc\":\"y = a*x + b on float32 values.\"},\n"
    "  {\"id\":2,\"name\":\"wobble\",\"kind\":\"sincos\",\"params\":{\"iters\":16},\n"
    "   \"doc\":\"iters times v = sin(v)*cos(v) + v on float32 values.\"},\n"
    "  {\"id\":3,\"name\":\"rgb224\",\"kind\":\"normalize_u8\",\n"
    "   \"params\":{\"width\":224,\"height\":224,\"mean\":[0.485,0.456,0.406],"
    "\"std\":[0.229,0.224,0.225]},\n"
    "   \"doc\":\"Interleaved RGB u8 to planar normalized float32.\"}\n"
    "]}";

/* Appends "name=id " for each pipeline to the buffer at `arg`. */
static int collect(const char *name, size_t name_bytes, uint32_t id, void *arg) {
    char *seen = arg;
    size_t at = strlen(seen);

    snprintf(seen + at, SEEN_BYTES - at, "%.*s=%u ", (int)name_bytes, name, (unsigned)id);
    return 0;
}

/* What gf__list_names_each reports for `json`: "name=id ..." or the error. */
static const char *names_of(const char *json, char *seen, char *why) {
    seen[0] = '\0';
    why[0] = '\0';
    int rc = gf__list_names_each(json, strlen(json), collect, seen, why, WHY_BYTES);
    if (rc < 0) {
        ck_assert_int_eq(rc, -EPROTO);
        ck_assert_msg(why[0] != '\0', "no reason for refusing %s", json);
        ck_assert_str_eq(seen, ""); /* nothing reported before the whole was checked */
        return NULL;
    }
    return seen;
}

START_TEST(protocol_example_names_and_ids) {
    char seen[SEEN_BYTES], why[WHY_BYTES];
    uint32_t id = 99;

    ck_assert_pstr_eq(names_of(protocol_example, seen, why), "echo=0 scale2=1 wobble=2 rgb224=3 ");
    ck_assert_int_eq(gf__list_names_find(protocol_example, strlen(protocol_example), "wobble", &id,
                                         why, sizeof why),
                     1);
    ck_assert_uint_eq(id, 2);
    id = 99;
    ck_assert_int_eq(gf__list_names_find(protocol_example, strlen(protocol_example), "wobbl", &id,
                                         why, sizeof why),
                     0);
    ck_assert_uint_eq(id, 99);
    /* With the daemon's "max_frame_bytes" beside the pipelines, before or
     * after them. */
    char with_max[sizeof protocol_example + 64];
    snprintf(with_max, sizeof with_max, "%.*s,\"max_frame_bytes\":16777216}",
             (int)(sizeof protocol_example - 2), protocol_example);
    ck_assert_pstr_eq(names_of(with_max, seen, why), "echo=0 scale2=1 wobble=2 rgb224=3 ");
    snprintf(with_max, sizeof with_max, "{\"max_frame_bytes\":16777216,%s", protocol_example + 1);
    ck_assert_pstr_eq(names_of(with_max, seen, why), "echo=0 scale2=1 wobble=2 rgb224=3 ");
}
END_TEST

/* The daemon's own encoder (gf_pipelines_to_json) of the example's
 * pipelines: the reader agrees with gf_pipelines_from_json on every id. */
START_TEST(daemon_encoding_agrees_with_the_full_decoder) {
    gf_pipeline *p;
    size_t count;
    char seen[SEEN_BYTES], want[SEEN_BYTES] = "", why[WHY_BYTES];

    ck_assert_int_eq(gf_pipelines_from_json(protocol_example, &p, &count, why, sizeof why), 0);
    ck_assert_uint_eq(count, 4); /* else the comparison below proves nothing */
    cJSON *doc = gf_pipelines_to_json(p, count);
    char *json = cJSON_PrintUnformatted(doc);
    ck_assert_ptr_nonnull(json);
    for (size_t i = 0; i < count; i++)
        collect(p[i].name, strlen(p[i].name), p[i].id, want);
    ck_assert_pstr_eq(names_of(json, seen, why), want);
    cJSON_free(json);
    cJSON_Delete(doc);
    gf_pipelines_free(p, count);
}
END_TEST

/* Documents JSON allows, and what the reader makes of them. */
static const struct {
    const char *json;
    const char *names; /* "name=id ..." */
} good_cases[] = {
    {"{\"pipelines\":[]}", ""},
    {" \t\r\n{ \"pipelines\" : [ { \"name\" : \"a\" , \"id\" : 7 } ] } \n", "a=7 "},
    /* Keys in any order, unknown keys and values of every type skipped. */
    {"{\"x\":{\"pipelines\":[{\"name\":\"no\",\"id\":1}]},\"pipelines\":[{\"doc\":\"}]\\\"\","
     "\"stages\":[{\"kind\":\"echo\",\"params\":{\"a\":[1,-2.5e-3,true,false,null,{}]}}],"
     "\"id\":4294967295,\"name\":\"last\"}],\"z\":[[[]]]}",
     "last=4294967295 "},
    /* Escapes in a name are decoded; \u to UTF-8, surrogate pairs included. */
    {"{\"pipelines\":[{\"name\":\"e\\u0063h\\u006F\",\"id\":0},"
     "{\"name\":\"\\ud83d\\ude00\\u00e9\\/\",\"id\":1}]}",
     "echo=0 \xF0\x9F\x98\x80\xC3\xA9/=1 "},
    /* The first of duplicate keys counts, as with cJSON. */
    {"{\"pipelines\":[{\"name\":\"a\",\"name\":\"b\",\"id\":1,\"id\":2}],"
     "\"pipelines\":[{\"name\":\"c\",\"id\":3}]}",
     "a=1 "},
    /* A name longer than any the daemon allows is passed over. */
    {"{\"pipelines\":[{\"name\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
     "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
     "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
     "xxxxxxxxxxxxxx\",\"id\":0},{\"name\":\"ok\",\"id\":1}]}",
     "ok=1 "},
};

START_TEST(good_documents) {
    char seen[SEEN_BYTES], why[WHY_BYTES];
    const char *got = names_of(good_cases[_i].json, seen, why);

    ck_assert_msg(got != NULL, "refused %s: %s", good_cases[_i].json, why);
    ck_assert_str_eq(got, good_cases[_i].names);
}
END_TEST

/* Malformed documents, and a word of the reason each must give. */
static const struct {
    const char *json;
    const char *reason;
} bad_cases[] = {
    {"", "not a JSON object"},
    {"[]", "not a JSON object"},
    {"{}", "no \"pipelines\" array"},
    {"{\"pipelines\":{}}", "\"pipelines\" is not an array"},
    {"{\"pipelines\":[1]}", "expected an object"},
    {"{\"pipelines\":[{\"id\":0}]}", "without a \"name\""},
    {"{\"pipelines\":[{\"name\":\"a\"}]}", "without an \"id\""},
    {"{\"pipelines\":[{\"name\":7,\"id\":0}]}", "\"name\" is not a string"},
    {"{\"pipelines\":[{\"name\":\"a\",\"id\":-1}]}", "not an integer"},
    {"{\"pipelines\":[{\"name\":\"a\",\"id\":1.5}]}", "not an integer"},
    {"{\"pipelines\":[{\"name\":\"a\",\"id\":1e2}]}", "not an integer"},
    {"{\"pipelines\":[{\"name\":\"a\",\"id\":4294967296}]}", "not an integer"},
    {"{\"pipelines\":[{\"name\":\"a\",\"id\":\"0\"}]}", "not an integer"},
    {"{\"pipelines\":[],\"n\":01}", "malformed number"},
    {"{\"pipelines\":[],\"n\":1.}", "malformed number"},
    {"{\"pipelines\":[],\"n\":-}", "malformed number"},
    {"{\"pipelines\":[],\"n\":1e}", "malformed number"},
    {"{\"pipelines\":[],\"n\":tru}", "expected a value"},
    {"{\"pipelines\":[],\"s\":\"\\x\"}", "an escape other than"},
    {"{\"pipelines\":[],\"s\":\"\\u12G4\"}", "four hex digits"},
    {"{\"pipelines\":[],\"s\":\"\\udc00\"}", "low surrogate"},
    {"{\"pipelines\":[],\"s\":\"\\ud800x\"}", "high surrogate"},
    {"{\"pipelines\":[],\"s\":\"a\tb\"}", "control character"},
    {"{\"pipelines\":[],}", "expected a string"},
    {"{\"pipelines\":[1,]}", "expected an object"},
    {"{\"pipelines\" []}", "expected ':'"},
    {"{\"pipelines\":[]} {}", "bytes after the document's end"},
};

START_TEST(bad_documents) {
    char seen[SEEN_BYTES], why[WHY_BYTES];

    ck_assert_msg(names_of(bad_cases[_i].json, seen, why) == NULL, "accepted %s",
                  bad_cases[_i].json);
    ck_assert_msg(strstr(why, bad_cases[_i].reason) != NULL, "%s: '%s' does not say '%s'",
                  bad_cases[_i].json, why, bad_cases[_i].reason);
    ck_assert_msg(strncmp(why, "LIST document, byte ", 20) == 0, "%s", why);
}
END_TEST

/* Every proper prefix of a good document is refused: the reader never reads
 * past the length it is given (ASan in CI would see it) nor takes half a
 * document for a whole one. */
START_TEST(every_truncation_is_refused) {
    size_t len = strlen(protocol_example);
    char why[WHY_BYTES];
    uint32_t id;

    for (size_t n = 0; n < len; n++) {
        char *cut = malloc(n > 0 ? n : 1); /* exactly n bytes: no NUL after them */
        ck_assert_ptr_nonnull(cut);
        memcpy(cut, protocol_example, n);
        ck_assert_msg(gf__list_names_find(cut, n, "echo", &id, why, sizeof why) == -EPROTO,
                      "a document cut to %zu bytes was accepted", n);
        free(cut);
    }
}
END_TEST

/* Nesting is bounded: GF_LIST_NAMES_MAX_DEPTH levels pass, one more does
 * not. */
START_TEST(nesting_is_bounded) {
    char json[2 * GF_LIST_NAMES_MAX_DEPTH + 64], seen[SEEN_BYTES], why[WHY_BYTES];

    for (int extra = 0; extra < 2; extra++) {
        /* The document is depth 1, its "x" array depth 2, ... */
        int arrays = GF_LIST_NAMES_MAX_DEPTH - 1 + extra;
        int n = snprintf(json, sizeof json, "{\"pipelines\":[],\"x\":");
        for (int i = 0; i < arrays; i++)
            json[n++] = '[';
        for (int i = 0; i < arrays; i++)
            json[n++] = ']';
        snprintf(json + n, sizeof json - (size_t)n, "}");
        const char *got = names_of(json, seen, why);
        if (extra == 0)
            ck_assert_msg(got != NULL, "%s", why);
        else
            ck_assert_msg(got == NULL && strstr(why, "nested deeper than") != NULL, "%s", why);
    }
}
END_TEST

/* A callback that stops early still sees a document checked in whole. */
static int stop_at_first(const char *name, size_t name_bytes, uint32_t id, void *arg) {
    (void)name;
    (void)name_bytes;
    (void)id;
    ++*(int *)arg;
    return 1;
}

START_TEST(stopping_early_after_a_whole_check) {
    static const char good[] =
        "{\"pipelines\":[{\"name\":\"a\",\"id\":0},{\"name\":\"b\",\"id\":1}]}";
    static const char tail_bad[] = "{\"pipelines\":[{\"name\":\"a\",\"id\":0},{\"name\":\"b\"}]}";
    char why[WHY_BYTES];
    int calls = 0;

    ck_assert_int_eq(
        gf__list_names_each(good, strlen(good), stop_at_first, &calls, why, sizeof why), 0);
    ck_assert_int_eq(calls, 1);
    calls = 0;
    ck_assert_int_eq(
        gf__list_names_each(tail_bad, strlen(tail_bad), stop_at_first, &calls, why, sizeof why),
        -EPROTO);
    ck_assert_int_eq(calls, 0);
}
END_TEST

static Suite *list_names_suite(void) {
    Suite *s = suite_create("list_names");
    TCase *tc = tcase_create("list_names");
    tcase_add_test(tc, protocol_example_names_and_ids);
    tcase_add_test(tc, daemon_encoding_agrees_with_the_full_decoder);
    tcase_add_loop_test(tc, good_documents, 0, (int)(sizeof good_cases / sizeof good_cases[0]));
    tcase_add_loop_test(tc, bad_documents, 0, (int)(sizeof bad_cases / sizeof bad_cases[0]));
    tcase_add_test(tc, every_truncation_is_refused);
    tcase_add_test(tc, nesting_is_bounded);
    tcase_add_test(tc, stopping_early_after_a_whole_check);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return gf_test_run(list_names_suite());
}
