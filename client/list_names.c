/* SPDX-License-Identifier: MIT */
/*
 * The pipelines' names and ids in a LIST document, read with a small JSON
 * walker; list_names.h is the contract.  The walker is a recursive descent
 * over RFC 8259's grammar that checks every value and decodes only the
 * strings it needs (keys, and the pipelines' names).
 */
#include "list_names.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* The one place the walker is: bytes p[0 .. end - p) are left. */
struct walk {
    const unsigned char *start, *p, *end;
    char *why;
    size_t why_len;
};

/* A decoded string: up to `cap` bytes into `buf`; `len` is the decoded
 * length, which may exceed `cap` (then only `cap` bytes are in `buf`). */
struct text {
    char *buf;
    size_t cap, len;
};

static int bad(struct walk *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Records the first problem, with its byte offset, and returns -EPROTO. */
static int bad(struct walk *w, const char *fmt, ...) {
    va_list ap;
    int n = snprintf(w->why, w->why_len, "LIST document, byte %zu: ", (size_t)(w->p - w->start));

    if (n >= 0 && (size_t)n < w->why_len) {
        va_start(ap, fmt);
        vsnprintf(w->why + n, w->why_len - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return -EPROTO;
}

static void skip_ws(struct walk *w) {
    while (w->p < w->end && (*w->p == ' ' || *w->p == '\t' || *w->p == '\n' || *w->p == '\r'))
        w->p++;
}

/* Consumes `c` after whitespace; nonzero if it was there. */
static int take(struct walk *w, unsigned char c) {
    skip_ws(w);
    if (w->p < w->end && *w->p == c) {
        w->p++;
        return 1;
    }
    return 0;
}

static void put(struct text *t, unsigned char c) {
    if (t != NULL && t->len++ < t->cap)
        t->buf[t->len - 1] = (char)c;
}

/* Appends code point `cp` to `t` as UTF-8. */
static void put_utf8(struct text *t, unsigned long cp) {
    if (cp < 0x80) {
        put(t, (unsigned char)cp);
    } else if (cp < 0x800) {
        put(t, (unsigned char)(0xC0 | (cp >> 6)));
        put(t, (unsigned char)(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        put(t, (unsigned char)(0xE0 | (cp >> 12)));
        put(t, (unsigned char)(0x80 | ((cp >> 6) & 0x3F)));
        put(t, (unsigned char)(0x80 | (cp & 0x3F)));
    } else {
        put(t, (unsigned char)(0xF0 | (cp >> 18)));
        put(t, (unsigned char)(0x80 | ((cp >> 12) & 0x3F)));
        put(t, (unsigned char)(0x80 | ((cp >> 6) & 0x3F)));
        put(t, (unsigned char)(0x80 | (cp & 0x3F)));
    }
}

/* Reads the four hex digits of a \u escape. */
static int hex4(struct walk *w, unsigned long *out) {
    unsigned long v = 0;

    if (w->end - w->p < 4)
        return bad(w, "a \\u escape needs four hex digits");
    for (int i = 0; i < 4; i++) {
        unsigned char c = *w->p++;
        unsigned d = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
                     : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                     : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
                                            : 16u;
        if (d == 16)
            return bad(w, "a \\u escape needs four hex digits");
        v = v << 4 | d;
    }
    *out = v;
    return 0;
}

/* The escape after a backslash, decoded into `t` (may be NULL). */
static int escape(struct walk *w, struct text *t) {
    static const char simple[] = "\"\\/bfnrt", decoded[] = "\"\\/\b\f\n\r\t";
    unsigned long cp = 0, lo = 0; /* set before use; gcc -O3 cannot tell */

    if (w->p == w->end)
        return bad(w, "a string ends inside an escape");
    const char *s = *w->p != '\0' ? strchr(simple, *w->p) : NULL;
    if (s != NULL) {
        w->p++;
        put(t, (unsigned char)decoded[s - simple]);
        return 0;
    }
    if (*w->p++ != 'u')
        return bad(w, "an escape other than \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX");
    if (hex4(w, &cp) < 0)
        return -EPROTO;
    if (cp >= 0xDC00 && cp <= 0xDFFF)
        return bad(w, "a low surrogate without its high one");
    if (cp >= 0xD800 && cp <= 0xDBFF) {
        if (w->end - w->p < 2 || w->p[0] != '\\' || w->p[1] != 'u')
            return bad(w, "a high surrogate without its low one");
        w->p += 2;
        if (hex4(w, &lo) < 0)
            return -EPROTO;
        if (lo < 0xDC00 || lo > 0xDFFF)
            return bad(w, "a high surrogate without its low one");
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    }
    put_utf8(t, cp);
    return 0;
}

/* A string at w->p (its opening quote), decoded into `t` (may be NULL).
 * Raw bytes are copied as they are: the walker checks the grammar, not the
 * UTF-8 (a name that is not valid UTF-8 matches no name a caller gives). */
static int string(struct walk *w, struct text *t) {
    if (t != NULL)
        t->len = 0;
    if (!take(w, '"'))
        return bad(w, "expected a string");
    for (;;) {
        if (w->p == w->end)
            return bad(w, "a string has no closing quote");
        unsigned char c = *w->p++;
        if (c == '"')
            return 0;
        if (c < 0x20)
            return bad(w, "a control character inside a string");
        if (c != '\\')
            put(t, c);
        else if (escape(w, t) < 0)
            return -EPROTO;
    }
}

/* Consumes a run of digits; returns how many. */
static size_t digits(struct walk *w) {
    const unsigned char *from = w->p;

    while (w->p < w->end && *w->p >= '0' && *w->p <= '9')
        w->p++;
    return (size_t)(w->p - from);
}

/*
 * A number.  When `u32` is not NULL it must be an integer in 0..UINT32_MAX
 * (no sign, fraction or exponent: what the daemon writes for an id), stored
 * there.
 */
static int number(struct walk *w, uint32_t *u32) {
    skip_ws(w);
    const unsigned char *from = w->p;
    int neg = w->p < w->end && *w->p == '-';

    w->p += neg;
    size_t n = digits(w);
    if (n == 0 || (n > 1 && w->p[-(ptrdiff_t)n] == '0'))
        return u32 != NULL ? bad(w, "a pipeline's \"id\" is not an integer in 0..4294967295")
                           : bad(w, "a malformed number");
    int integer = !neg;
    if (w->p < w->end && *w->p == '.') {
        w->p++;
        integer = 0;
        if (digits(w) == 0)
            return bad(w, "a malformed number");
    }
    if (w->p < w->end && (*w->p == 'e' || *w->p == 'E')) {
        w->p++;
        integer = 0;
        if (w->p < w->end && (*w->p == '+' || *w->p == '-'))
            w->p++;
        if (digits(w) == 0)
            return bad(w, "a malformed number");
    }
    if (u32 == NULL)
        return 0;
    uint64_t v = 0;
    for (const unsigned char *d = from; integer && d < w->p && v <= UINT32_MAX; d++)
        v = v * 10 + (uint64_t)(*d - '0');
    if (!integer || v > UINT32_MAX) {
        w->p = from;
        return bad(w, "a pipeline's \"id\" is not an integer in 0..4294967295");
    }
    *u32 = (uint32_t)v;
    return 0;
}

/* One of the literals true, false, null. */
static int literal(struct walk *w) {
    static const char *const words[] = {"true", "false", "null"};

    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        size_t n = strlen(words[i]);
        if ((size_t)(w->end - w->p) >= n && memcmp(w->p, words[i], n) == 0) {
            w->p += n;
            return 0;
        }
    }
    return bad(w, "expected a value");
}

static int value(struct walk *w, int depth);

/* Reads one item of a container, at nesting `depth`; returns 0 or -EPROTO. */
typedef int item_fn(struct walk *w, int depth, void *arg);

/* A container of `what`: `open`, items separated by ',', `close`, each item
 * read by `item`. */
static int container(struct walk *w, int depth, unsigned char open, unsigned char close,
                     const char *what, item_fn *item, void *arg) {
    if (depth > GF_LIST_NAMES_MAX_DEPTH)
        return bad(w, "nested deeper than %d", GF_LIST_NAMES_MAX_DEPTH);
    if (!take(w, open))
        return bad(w, "expected %s", what);
    if (take(w, close))
        return 0;
    do {
        int rc = item(w, depth, arg);
        if (rc < 0)
            return rc;
    } while (take(w, ','));
    if (!take(w, close))
        return bad(w, "expected ',' or '%c' in %s", close, what);
    return 0;
}

/* What to do with an object's members, or an array's elements: NULL skips
 * them. */
struct visit {
    int (*member)(struct walk *, struct text *, void *); /* objects */
    int (*element)(struct walk *, void *);               /* arrays  */
    void *arg;
};

static int object_item(struct walk *w, int depth, void *arg) {
    const struct visit *v = arg;
    char key_buf[16];
    struct text key = {key_buf, sizeof key_buf, 0};

    skip_ws(w);
    if (string(w, &key) < 0)
        return -EPROTO;
    if (!take(w, ':'))
        return bad(w, "expected ':' after an object's key");
    return v->member != NULL ? v->member(w, &key, v->arg) : value(w, depth + 1);
}

static int array_item(struct walk *w, int depth, void *arg) {
    const struct visit *v = arg;

    return v->element != NULL ? v->element(w, v->arg) : value(w, depth + 1);
}

/*
 * An object: `member` is called for each member with its key decoded into
 * `key` (a key longer than key->cap matches nothing) and w at its value,
 * which it must consume; NULL skips every value.
 */
static int object(struct walk *w, int depth, int (*member)(struct walk *, struct text *, void *),
                  void *arg) {
    struct visit v = {member, NULL, arg};
    return container(w, depth, '{', '}', "an object", object_item, &v);
}

/* An array: `element` is called with w at each element, which it must
 * consume; NULL skips them. */
static int array(struct walk *w, int depth, int (*element)(struct walk *, void *), void *arg) {
    struct visit v = {NULL, element, arg};
    return container(w, depth, '[', ']', "an array", array_item, &v);
}

/* Any value, checked and skipped. */
static int value(struct walk *w, int depth) {
    skip_ws(w);
    if (w->p == w->end)
        return bad(w, "the document ends where a value should be");
    switch (*w->p) {
    case '{': return object(w, depth, NULL, NULL);
    case '[': return array(w, depth, NULL, NULL);
    case '"': return string(w, NULL);
    case 't':
    case 'f':
    case 'n': return literal(w);
    default: return number(w, NULL);
    }
}

static int key_is(const struct text *key, const char *name) {
    return key->len == strlen(name) && memcmp(key->buf, name, key->len) == 0;
}

/* What the walk of one pipeline entry found. */
struct entry {
    char name_buf[GF_LIST_NAMES_NAME_MAX];
    struct text name;
    int have_name, have_id;
    uint32_t id;
};

static int entry_member(struct walk *w, struct text *key, void *arg) {
    struct entry *e = arg;

    if (key_is(key, "name") && !e->have_name) {
        skip_ws(w);
        if (w->p < w->end && *w->p != '"')
            return bad(w, "a pipeline's \"name\" is not a string");
        e->have_name = 1;
        return string(w, &e->name);
    }
    if (key_is(key, "id") && !e->have_id) {
        e->have_id = 1;
        return number(w, &e->id);
    }
    return value(w, 4);
}

/* The walk of the "pipelines" array: what to call back. */
struct walk_list {
    gf__list_names_fn *fn;
    void *arg;
    int stopped;
};

static int pipeline_element(struct walk *w, void *arg) {
    struct walk_list *l = arg;
    struct entry e = {.name = {e.name_buf, sizeof e.name_buf, 0}};

    skip_ws(w);
    const unsigned char *at = w->p;
    if (object(w, 3, entry_member, &e) < 0)
        return -EPROTO;
    if (!e.have_name || !e.have_id) {
        w->p = at;
        return bad(w, "a pipeline without %s", e.have_name ? "an \"id\"" : "a \"name\"");
    }
    if (l->fn != NULL && !l->stopped && e.name.len <= e.name.cap)
        l->stopped = l->fn(e.name.buf, e.name.len, e.id, l->arg) != 0;
    return 0;
}

/* The top-level object's members: the first "pipelines" is walked. */
struct walk_top {
    struct walk_list list;
    int have_pipelines;
};

static int top_member(struct walk *w, struct text *key, void *arg) {
    struct walk_top *top = arg;

    if (!key_is(key, "pipelines") || top->have_pipelines)
        return value(w, 2);
    top->have_pipelines = 1;
    skip_ws(w);
    if (w->p < w->end && *w->p != '[')
        return bad(w, "\"pipelines\" is not an array");
    return array(w, 2, pipeline_element, &top->list);
}

/* One walk of the whole document, calling `fn` (may be NULL) per pipeline. */
static int walk_document(const char *json, size_t len, gf__list_names_fn *fn, void *arg, char *why,
                         size_t why_len) {
    struct walk w = {(const unsigned char *)json, (const unsigned char *)json,
                     (const unsigned char *)json + len, why, why_len};
    struct walk_top top = {{fn, arg, 0}, 0};

    skip_ws(&w);
    if (w.p == w.end || *w.p != '{')
        return bad(&w, "the document is not a JSON object");
    if (object(&w, 1, top_member, &top) < 0)
        return -EPROTO;
    skip_ws(&w);
    if (w.p != w.end)
        return bad(&w, "bytes after the document's end");
    if (!top.have_pipelines)
        return bad(&w, "no \"pipelines\" array");
    return 0;
}

int gf__list_names_each(const char *json, size_t len, gf__list_names_fn *fn, void *arg, char *why,
                        size_t why_len) {
    /* Checked in whole before `fn` hears of any pipeline. */
    int rc = walk_document(json, len, NULL, NULL, why, why_len);
    return rc < 0 ? rc : walk_document(json, len, fn, arg, why, why_len);
}

/* What gf__list_names_find looks for, and what it found. */
struct find {
    const char *name;
    size_t name_bytes;
    uint32_t id;
    int found;
};

static int find_one(const char *name, size_t name_bytes, uint32_t id, void *arg) {
    struct find *f = arg;

    if (name_bytes != f->name_bytes || memcmp(name, f->name, name_bytes) != 0)
        return 0;
    f->id = id;
    f->found = 1;
    return 1;
}

int gf__list_names_find(const char *json, size_t len, const char *name, uint32_t *id, char *why,
                        size_t why_len) {
    struct find f = {name, strlen(name), 0, 0};
    int rc = gf__list_names_each(json, len, find_one, &f, why, why_len);

    if (rc < 0)
        return rc;
    if (f.found)
        *id = f.id;
    return f.found;
}
