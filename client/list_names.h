/* SPDX-License-Identifier: MIT */
/*
 * The pipelines' names and ids in a LIST document (PROTOCOL.md, "LIST"), read
 * without a JSON library, so that libgpuframe maps a name to an id with libc
 * alone.  Internal to the library: gf_client_pipeline_id is its user.
 *
 * The document comes from a socket: it is checked as JSON (RFC 8259) in
 * whole, strings, escapes and numbers included, nested at most
 * GF_LIST_NAMES_MAX_DEPTH deep, before anything in it is believed.  Only the
 * top-level object's "pipelines" array is read, and of each of its objects
 * only "name" (a string) and "id" (an integer 0..UINT32_MAX); every other
 * key and value is checked and skipped, so that keys a newer daemon adds
 * change nothing.
 */
#ifndef GF_LIST_NAMES_H
#define GF_LIST_NAMES_H

#include <stddef.h>
#include <stdint.h>

/* Nesting deeper than this is refused: the walk recurses once per level. */
#define GF_LIST_NAMES_MAX_DEPTH 64
/* A name longer than this (bytes, decoded) matches nothing: the daemon's
 * names have at most 63 characters of A-Z a-z 0-9 _ . - (config/README.md). */
#define GF_LIST_NAMES_NAME_MAX 255

/* Called once per pipeline, in document order, with its decoded name (not
 * NUL-terminated; `name_bytes` of it) and id.  Returns nonzero to stop. */
typedef int gf__list_names_fn(const char *name, size_t name_bytes, uint32_t id, void *arg);

/*
 * Calls `fn` for each pipeline of the LIST document json[len].  A pipeline
 * whose name is longer than GF_LIST_NAMES_NAME_MAX is passed over.  Returns
 * 0 when the document is well-formed (whether or not `fn` stopped early; a
 * document is checked in whole first), or -EPROTO with the reason in
 * why[why_len]: not JSON, no "pipelines" array, an entry that is not an
 * object or lacks a string "name" or an integer "id".  Pure: no I/O, no
 * allocation.
 */
int gf__list_names_each(const char *json, size_t len, gf__list_names_fn *fn, void *arg, char *why,
                        size_t why_len);

/*
 * The id of the pipeline named `name` (NUL-terminated) in json[len]: returns
 * 1 with *id set, 0 when no pipeline has that name, or -EPROTO as
 * gf__list_names_each.  The first of several entries of one name wins.
 */
int gf__list_names_find(const char *json, size_t len, const char *name, uint32_t *id, char *why,
                        size_t why_len);

#endif
