/* SPDX-License-Identifier: MIT */
/*
 * gpuframe stream: frames through a pipeline with a window in flight,
 * optionally verified against the pipeline's C reference, summarised as
 * throughput and latency.  This file reads the options, settles the pipeline
 * and the frame size, and runs the window; gpuframe_stream_run.h says
 * where the frames and the replies are handled.
 */
#define _GNU_SOURCE /* ppoll */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "gpuframe_commands.h"
#include "gpuframe_connect.h"
#include "gpuframe_options.h"
#include "gpuframe_stream_frames.h"
#include "gpuframe_stream_replies.h"
#include "listing.h"
#include "plugin.h"
#include "util.h"

/* stream defaults: a 1 MiB frame is large enough to measure bandwidth and
 * small enough for any max_frame_bytes the daemon is likely configured with. */
#define STREAM_SIZE_DEFAULT   (1ull << 20)
#define STREAM_WINDOW_DEFAULT 8
#define STREAM_SEED_DEFAULT   1
/* More frames in flight than this cannot help: the daemon has at most
 * GF_SLOTS_MAX slots, and socket buffers hold the rest. */
#define STREAM_WINDOW_MAX 65536
/* The highest CUDA ordinal --device-frames takes. */
#define STREAM_DEVICE_MAX 63
/* The highest --rate: beyond a million frames a second a window paces. */
#define STREAM_RATE_MAX 1000000

/* Set by the first SIGINT: send no more frames.  The handler is reset by it
 * (SA_RESETHAND), so a second Ctrl-C ends the command at once. */
static volatile sig_atomic_t stream_interrupted;

static void on_interrupt(int sig) {
    (void)sig;
    stream_interrupted = 1;
}

/* Takes SIGINT before anything else, so that a Ctrl-C (or a script's kill
 * -INT) counts whenever it comes: during the set-up (connect, LIST, the
 * buffers) it stops the run before its first frame.  The handler replaces
 * an inherited SIG_IGN too: a script's background job starts with SIGINT
 * ignored, and is stopped by it all the same.  No SA_RESTART: a wait in the
 * run ends and is resumed (libgpuframe retries after EINTR). */
static void catch_interrupt(void) {
    struct sigaction sa;

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_interrupt;
    sa.sa_flags = (int)SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
}

/* The help, in two literals (one would pass the 4095 characters ISO C
 * guarantees a string literal) joined by stream_help(). */
static const char stream_help_head[] =
    "Usage: gpuframe stream --pipeline NAME|ID [OPTIONS]\n"
    "\n"
    "Streams frames through a pipeline, keeping a window of frames in flight, and\n"
    "prints one summary line:\n"
    "  frames=N errors=N seconds=S frames_per_s=R in_GBps=R out_GBps=R p50_us=L p99_us=L "
    "max_us=L\n"
    "  transport=device|shm|socket\n"
    "(GB/s: bytes of frames answered with a result, 1e9 bytes per GB; latency: from\n"
    "queueing a frame to receiving its reply; transport: how the frames travelled),\n"
    "or, when no frame got a correct result, what failed:\n"
    "  frames=N errors=N every frame failed: N STATUS, N wrong results, ...\n"
    "On a terminal, a run longer than a second shows its progress on standard error.\n"
    "Ctrl-C stops sending, waits for the frames in flight and prints the summary of\n"
    "what was answered.\n"
    "\n"
    "  -p, --pipeline NAME|ID  the pipeline, by name or numeric id (see 'gpuframe list')\n"
    "      --size BYTES        frame size, suffixes K, M, G (binary); default: the one\n"
    "                          length the pipeline takes where it takes one (its\n"
    "                          FRAMES in 'gpuframe list': an image for normalize_u8),\n"
    "                          else 1M\n"
    "  -n, --count N           frames to send (default 1000; with --input: the whole file)\n"
    "  -w, --window W          frames in flight (default 8, at most 65536)\n"
    "      --verify            check every result against the pipeline's C reference\n"
    "  -i, --input FILE        send consecutive --size chunks of FILE ('-': standard input;\n"
    "                          a shorter last chunk only if the pipeline takes it) instead\n"
    "                          of synthetic frames\n"
    "  -o, --output FILE       write every result, in order, to FILE ('-': standard output,\n"
    "                          and the summary goes to standard error; frames answered\n"
    "                          with an error write nothing)\n"
    "      --seed S            seed of the synthetic frames (default 1; not with --input)\n"
    "      --no-check          send frames the pipeline cannot take (tests the daemon's errors)\n"
    "      --shm               send frames of every size by reference: inputs and results\n"
    "                          live in shared-memory frame buffers (one per frame in\n"
    "                          flight), the socket carries only descriptors, and the\n"
    "                          daemon's GPU copies use the pages directly.  The default\n"
    "                          from 64K up, where the daemon allows it (max_regions,\n"
    "                          max_shm_bytes) and the result's length is known here\n"
    "      --no-shm            send every frame's bytes through the socket\n";
static const char stream_help_tail[] =
    "      --device-frames[=N] frames on GPU N (default 0): inputs and results live in a\n"
    "                          device region (cuMemCreate memory the daemon maps), the\n"
    "                          pipeline runs on them in place and no frame byte crosses\n"
    "                          PCIe or the socket; needs libcuda here and the cuda engine\n"
    "                          there; synthetic frames only; protocol 4\n"
    "      --json              print the summary as one JSON object: the line's keys, and\n"
    "                          errors_by_status, wrong_results, no_reply, interrupted\n"
    "      --deadline-ms MS    each frame must go to the engine within MS milliseconds\n"
    "                          of being queued, else the daemon answers it\n"
    "                          deadline_exceeded (counted, not an error); protocol 3\n"
    "      --latest-only       only the newest frame matters: one still waiting in the\n"
    "                          daemon is answered superseded (counted, not an error)\n"
    "                          when the next comes; protocol 3\n"
    "      --rate FPS          queue at most FPS frames a second, as a live source does\n"
    "                          (default: as fast as the window allows)\n"
    "      --start-at T        set up first (connection, regions, frames), then send the\n"
    "                          first frame at T, seconds since the Epoch ('date +%s.%N'):\n"
    "                          clients started apart stream together (the summary's\n"
    "                          seconds count from then; its started= says when that\n"
    "                          was, for a client whose set-up outlasted T)\n"
    "      --priority CLASS    realtime, normal or batch: the frames' class, at most\n"
    "                          what the daemon's \"priorities\" give this user\n"
    "                          (default: that); protocol 3\n"
    "  -q, --quiet             print only the summary\n" COMMON_HELP "\n"
    "Exit status 0 only if every frame got a correct result; 130 after Ctrl-C.\n";

/* The whole help text, built once. */
static const char *stream_help(void) {
    static char help[sizeof stream_help_head + sizeof stream_help_tail - 1];
    if (help[0] == '\0') {
        memcpy(help, stream_help_head, sizeof stream_help_head - 1);
        memcpy(help + sizeof stream_help_head - 1, stream_help_tail, sizeof stream_help_tail);
    }
    return help;
}

/* The pipeline named `arg`, else the one whose id `arg` is; NULL if none. */
static const gf_pipeline *find_pipeline(const gf_pipeline *pipelines, size_t count,
                                        const char *arg) {
    uint64_t id;

    for (size_t i = 0; i < count; i++)
        if (strcmp(pipelines[i].name, arg) == 0)
            return &pipelines[i];
    if (gf_parse_u64(arg, &id) == 0)
        for (size_t i = 0; i < count; i++)
            if (pipelines[i].id == id)
                return &pipelines[i];
    return NULL;
}

/* Handles one of stream's own options, `opt` with getopt's optarg. */
static void stream_option(int opt, gf_stream_opts *o) {
    uint64_t v;

    switch (opt) {
    case OPT_PIPELINE: o->pipeline = optarg; break;
    case OPT_SIZE:
        if (gf_parse_size(optarg, &o->size_bytes) < 0 || o->size_bytes > SIZE_MAX)
            gf_die_usage("stream", "--size: expected bytes with an optional K, M or G, got '%s'",
                         optarg);
        o->have_size = 1;
        break;
    case OPT_COUNT:
        if (gf_parse_u64(optarg, &o->count) < 0 || o->count == 0)
            gf_die_usage("stream", "--count: expected a positive integer, got '%s'", optarg);
        break;
    case OPT_WINDOW:
        if (gf_parse_u64(optarg, &v) < 0 || v == 0 || v > STREAM_WINDOW_MAX)
            gf_die_usage("stream", "--window: expected an integer in [1, %d], got '%s'",
                         STREAM_WINDOW_MAX, optarg);
        o->window = (uint32_t)v;
        break;
    case OPT_VERIFY: o->verify = 1; break;
    case OPT_INPUT: o->input_path = optarg; break;
    case OPT_OUTPUT: o->output_path = optarg; break;
    case OPT_SEED:
        if (gf_parse_u64(optarg, &o->seed) < 0)
            gf_die_usage("stream", "--seed: expected an unsigned integer, got '%s'", optarg);
        o->have_seed = 1;
        break;
    case OPT_NO_CHECK: o->no_check = 1; break;
    case OPT_SHM: o->shm = STREAM_SHM_ON; break;
    case OPT_NO_SHM: o->shm = STREAM_SHM_OFF; break;
    case OPT_QUIET: o->quiet = 1; break;
    case OPT_JSON: o->json = 1; break;
    case OPT_DEADLINE_MS:
        if (gf_parse_u64(optarg, &v) < 0 || v == 0 || v > GF_CLIENT_DEADLINE_US_MAX / 1000)
            gf_die_usage("stream", "--deadline-ms: expected an integer in [1, %u], got '%s'",
                         GF_CLIENT_DEADLINE_US_MAX / 1000, optarg);
        o->deadline_ms = (uint32_t)v;
        break;
    case OPT_LATEST_ONLY: o->latest_only = 1; break;
    case OPT_PRIORITY: {
        int cls = gf_priority_class_parse(optarg);
        if (cls < 0)
            gf_die_usage("stream",
                         "--priority: expected realtime, normal, batch or default, "
                         "got '%s'",
                         optarg);
        o->priority = (unsigned)cls;
        break;
    }
    case OPT_DEVICE_FRAMES:
        o->device_frames = 1;
        if (optarg != NULL && (gf_parse_u64(optarg, &v) < 0 || v > STREAM_DEVICE_MAX))
            gf_die_usage("stream", "--device-frames: expected a CUDA device in [0, %d], got '%s'",
                         STREAM_DEVICE_MAX, optarg);
        o->device = optarg != NULL ? (int)v : 0;
        break;
    case OPT_START_AT: {
        char *end;
        o->start_at = strtod(optarg, &end);
        if (end == optarg || *end != '\0' || !(o->start_at > 0 && o->start_at < 1e10))
            gf_die_usage("stream", "--start-at: expected seconds since the Epoch, got '%s'",
                         optarg);
        break;
    }
    case OPT_RATE: {
        char *end;
        o->rate = strtod(optarg, &end);
        if (end == optarg || *end != '\0' || !(o->rate > 0 && o->rate <= STREAM_RATE_MAX))
            gf_die_usage("stream", "--rate: expected frames a second in (0, %d], got '%s'",
                         STREAM_RATE_MAX, optarg);
        break;
    }
    }
}

/* Parses the command line into *o; exits on a usage error or --help. */
static void parse_stream_opts(int argc, char *argv[], gf_stream_opts *o) {
    static const struct option longopts[] = {
        {"pipeline", required_argument, NULL, OPT_PIPELINE},
        {"size", required_argument, NULL, OPT_SIZE},
        {"count", required_argument, NULL, OPT_COUNT},
        {"window", required_argument, NULL, OPT_WINDOW},
        {"verify", no_argument, NULL, OPT_VERIFY},
        {"input", required_argument, NULL, OPT_INPUT},
        {"output", required_argument, NULL, OPT_OUTPUT},
        {"seed", required_argument, NULL, OPT_SEED},
        {"no-check", no_argument, NULL, OPT_NO_CHECK},
        {"shm", no_argument, NULL, OPT_SHM},
        {"no-shm", no_argument, NULL, OPT_NO_SHM},
        {"quiet", no_argument, NULL, OPT_QUIET},
        {"json", no_argument, NULL, OPT_JSON},
        {"deadline-ms", required_argument, NULL, OPT_DEADLINE_MS},
        {"latest-only", no_argument, NULL, OPT_LATEST_ONLY},
        {"rate", required_argument, NULL, OPT_RATE},
        {"priority", required_argument, NULL, OPT_PRIORITY},
        {"start-at", required_argument, NULL, OPT_START_AT},
        {"device-frames", optional_argument, NULL, OPT_DEVICE_FRAMES},
        COMMON_LONG_OPTIONS,
        {NULL, 0, NULL, 0}};
    int opt, shm_flags = 0;

    memset(o, 0, sizeof *o);
    gf_common_defaults(&o->common);
    o->window = STREAM_WINDOW_DEFAULT;
    o->seed = STREAM_SEED_DEFAULT;
    o->shm = STREAM_SHM_AUTO;
    while ((opt = getopt_long(argc, argv, ":p:n:w:i:o:q" COMMON_SHORT_OPTIONS, longopts, NULL)) !=
           -1) {
        if (gf_common_option("stream", opt, &o->common, argv, stream_help()))
            continue;
        shm_flags += opt == OPT_SHM || opt == OPT_NO_SHM;
        stream_option(opt, o);
    }
    gf_no_operands("stream", argc, argv);
    if (o->pipeline == NULL)
        gf_die_usage("stream", "--pipeline is required");
    if (shm_flags > 1)
        gf_die_usage("stream", "--shm and --no-shm exclude each other");
    if (o->device_frames && (shm_flags > 0 || o->input_path != NULL))
        gf_die_usage("stream", "--device-frames sends synthetic frames already on the GPU: not "
                               "with --shm, --no-shm or --input");
    if (o->have_seed && o->input_path != NULL)
        gf_die_usage("stream", "--seed chooses synthetic frames; with --input the frames are the "
                               "file's, so drop one of them");
}

/* The default --size: the one input length the pipeline takes where it
 * takes one (its LIST description's: an image for normalize_u8, a model's
 * frame), else STREAM_SIZE_DEFAULT. */
static uint64_t default_size(const gf_pipeline *p) {
    gf_frame_desc in, out;
    gf_pipeline_describe(p, &in, &out);
    uint64_t n = gf_frame_desc_bytes(&in);
    return n ? n : STREAM_SIZE_DEFAULT;
}

/* Frees and closes everything a run holds; safe on a partly set-up run. */
static void stream_free(gf_stream_run *r) {
    if (r->out != NULL && r->out != stdout)
        fclose(r->out);
    if (r->in != NULL && r->in != stdin)
        fclose(r->in);
    gf_client_shm_close(NULL, r->shm, 0);
    if (r->device.dev_ptr != 0)
        gf_client_device_region_destroy(NULL, &r->device, 0);
    free(r->device_host);
    gf_client_close(r->client);
    for (size_t k = 0; k < SYNTH_POOL_MAX; k++) {
        free(r->pool[k]);
        free(r->pool_refs[k]);
    }
    if (r->in_bufs != NULL && r->shm == NULL)
        for (size_t i = 0; i < r->o->window; i++)
            free(r->in_bufs[i]);
    free(r->in_bufs);
    free(r->scratch);
    free(r->stage_scratch[0]);
    free(r->stage_scratch[1]);
    free(r->slots);
    free(r->latency_ns);
    gf_pipelines_free(r->pipelines, r->pipeline_count);
    memset(r, 0, sizeof *r);
}

/* Connects, fetches the daemon's pipelines and picks --pipeline among them;
 * exits 2, naming the pipelines there are, when it is none of them. */
static void stream_connect(gf_stream_run *r) {
    const gf_stream_opts *o = r->o;
    size_t count;

    r->client = gf_connect_or_die(&o->common);
    /* Checked by the options' parser: within the library's bounds. */
    gf_client_set_frame_options(r->client, o->deadline_ms * 1000u, o->latest_only);
    gf_client_set_priority(r->client, o->priority);
    r->pipelines = gf_fetch_pipelines(r->client, &o->common, &count, &r->max_frame_bytes);
    r->pipeline_count = count;
    r->pipeline = find_pipeline(r->pipelines, count, o->pipeline);
    if (r->pipeline != NULL)
        return;
    fprintf(stderr, "gpuframe stream: --pipeline: the daemon has no pipeline '%s'", o->pipeline);
    for (size_t i = 0; i < count; i++)
        fprintf(stderr, "%s%s", i == 0 ? " (it has: " : ", ", r->pipelines[i].name);
    fprintf(stderr, "%s\n", count > 0 ? ")" : "");
    exit(EXIT_USAGE);
}

/*
 * With --verify, or --shm (and --device-frames) where LIST's frames do not
 * fix the lengths, loads the run's plugin stages here too, for what the
 * client computes itself: the output length of a frame (the frame buffers'
 * layout) and the reference.  The daemon is on this host (a Unix socket), so
 * the plugin's shared object and files are at the paths LIST gives; loading
 * one runs its code in this process, so verify only against a daemon you
 * trust.  A client that cannot read them exits 2 saying so.  Also sizes the
 * scratch a chain's references need.
 */
static void open_plugins(gf_stream_run *r, uint64_t size_bytes) {
    gf_pipeline *p = &r->pipelines[r->pipeline - r->pipelines];
    char why[WHY_BYTES];
    int plugins = 0, unknown = 0; /* plugin stages; of them, lengths not known */
    for (uint32_t k = 0; k < p->stage_count; k++)
        if (gf_kind_is_plugin(p->stages[k].kind)) {
            plugins = 1;
            unknown |= !gf_plugin_stage_lengths_known(p->stages[k].params.plugin);
        }
    /* Only to verify, or to lay out --shm outputs whose lengths LIST's
     * frames do not fix (a plugin describing fixed ones: kernels/plugin.c): a
     * client that just sends frames runs no code of the daemon's choosing,
     * and leaves the lengths to the daemon (as --no-check does; by default
     * such frames then go through the socket). */
    if (plugins && !r->o->verify) {
        if (!unknown) /* plan_frame_size checks --size against them */
            return;
        if (r->o->shm != STREAM_SHM_ON && !r->o->device_frames) {
            r->lengths_unknown = 1;
            return;
        }
    }
    gf_problems pr;
    gf_problems_init(&pr, why, sizeof why, 0, NULL);
    if (gf_pipeline_open_plugins(p, size_bytes, p->name, &pr) < 0) {
        fprintf(stderr, "gpuframe stream: pipeline '%s': cannot load its plugin here: %s\n",
                p->name, why);
        exit(EXIT_USAGE);
    }
    if (r->o->verify && !gf_pipeline_has_reference(p)) {
        fprintf(stderr,
                "gpuframe stream: --verify: pipeline '%s' has a plugin stage without a C "
                "reference\n",
                p->name);
        exit(EXIT_USAGE);
    }
    uint64_t scratch = gf_pipeline_max_scratch_bytes(p, size_bytes);
    if (scratch > 0) {
        r->stage_scratch[0] = gf_alloc_frame((size_t)scratch);
        r->stage_scratch[1] = gf_alloc_frame((size_t)scratch);
    }
}

/* Settles --size (the pipeline's default when not given) and the output size
 * of such a frame; exits 2 when the pipeline cannot take it, unless
 * --no-check.  Raises the client's reply cap to fit that output. */
static void plan_frame_size(gf_stream_run *r, gf_stream_opts *o) {
    const gf_pipeline *p = r->pipeline;
    char why[WHY_BYTES];

    if (!o->have_size)
        o->size_bytes = default_size(p);
    /* Before anything is laid out for such frames (a region of window x
     * --size): the daemon would refuse every one.  --no-check sends them
     * anyway, through the socket, to show what the daemon does. */
    if (r->max_frame_bytes != 0 && o->size_bytes > r->max_frame_bytes && !o->no_check) {
        fprintf(stderr,
                "gpuframe stream: --size %" PRIu64 " is above the daemon's max_frame_bytes %" PRIu64
                ": send smaller frames, or restart the daemon with a larger max_frame_bytes\n",
                o->size_bytes, r->max_frame_bytes);
        exit(EXIT_USAGE);
    }
    open_plugins(r, o->size_bytes);
    if (r->lengths_unknown)
        o->no_check = 1;
    r->full_expect = gf_pipeline_output_bytes(p, o->size_bytes, why, sizeof why);
    if (r->full_expect < 0 && !o->no_check) {
        char kinds[GF_STAGES_MAX * GF_PIPELINE_NAME_MAX];
        fprintf(stderr,
                "gpuframe stream: --size %" PRIu64 ": pipeline '%s' (%s) cannot take it: %s\n",
                o->size_bytes, p->name, gf_pipeline_kinds_text(p, kinds, sizeof kinds), why);
        exit(EXIT_USAGE);
    }
    if (r->full_expect < 0 && o->verify && !o->quiet)
        fprintf(stderr, "gpuframe stream: --no-check: results of refused sizes are not verified\n");
    gf_stream_fit_reply_cap(r);
}

/* Says what is about to be streamed, unless --quiet or --json. */
static void print_banner(const gf_stream_run *r) {
    const gf_stream_opts *o = r->o;
    const gf_pipeline *p = r->pipeline;

    if (o->quiet || o->json)
        return;
    char kinds[GF_STAGES_MAX * GF_PIPELINE_NAME_MAX];
    fprintf(r->report, "streaming ");
    if (r->planned != UINT64_MAX)
        fprintf(r->report, "%" PRIu64 " ", r->planned);
    fprintf(r->report,
            "frames of %" PRIu64 " bytes%s%s to pipeline '%s' (id %" PRIu32 ", %s), window %" PRIu32
            "%s\n",
            o->size_bytes, o->input_path ? " from " : "", o->input_path ? o->input_path : "",
            p->name, p->id, gf_pipeline_kinds_text(p, kinds, sizeof kinds), o->window,
            o->verify ? ", verified" : "");
    fflush(r->report);
}

/* Progress on a terminal: shown from PROGRESS_AFTER_NS into a run, redrawn
 * every PROGRESS_EVERY_NS. */
#define PROGRESS_AFTER_NS 1000000000ull
#define PROGRESS_EVERY_NS 250000000ull
/* ANSI: erase from the cursor to the end of the line. */
#define ANSI_ERASE_LINE "\033[K"

/* Redraws the progress line on stderr when it is due: frames answered, the
 * input's GB/s and the time so far. */
static void show_progress(gf_stream_run *r, uint64_t now_ns) {
    if (!r->progress || now_ns < r->progress_next_ns)
        return;
    double s = (double)(now_ns - r->start_ns) / 1e9;
    fprintf(stderr, "\r%" PRIu64 " frames  %.3f GB/s  %.1f s" ANSI_ERASE_LINE, r->answered,
            (double)r->in_bytes / 1e9 / s, s);
    fflush(stderr);
    r->progress_shown = 1;
    r->progress_next_ns = now_ns + PROGRESS_EVERY_NS;
}

/*
 * --rate: waits until `due_ns` (gf_now_ns's clock), or less while a reply
 * arrives (or the daemon closes), in nanoseconds (the timer slack set to
 * 1 ns: stream_run), with frames in flight or none: a wait in whole
 * milliseconds would let a fast source send only behind replies, each frame
 * just after the daemon placed the one before, rather than on its clock.
 * Returns 0, or -1 when poll failed (reported).
 */
static int wait_due_or_reply(gf_stream_run *r, uint64_t due_ns) {
    uint64_t now = gf_now_ns();
    if (now >= due_ns)
        return 0;
    struct pollfd pfd = {.fd = gf_client_fd(r->client), .events = POLLIN};
    if (gf_client_flush(r->client, 0) == -ETIMEDOUT)
        pfd.events |= POLLOUT; /* a frame not yet written whole */
    struct timespec left = {.tv_sec = (time_t)((due_ns - now) / 1000000000u),
                            .tv_nsec = (long)((due_ns - now) % 1000000000u)};
    if (ppoll(&pfd, 1, &left, NULL) < 0 && errno != EINTR) {
        fprintf(stderr, "gpuframe stream: poll: %s\n", strerror(errno));
        return -1;
    }
    return 0;
}

/*
 * Streams: keeps up to --window frames in flight and handles every reply,
 * until every queued frame is answered; after Ctrl-C (stream_interrupted)
 * it queues no more and collects the frames in flight.  With --rate, frame
 * i is queued i / rate after the start, on time while replies come in.
 * Returns 0, or -1 when the connection failed first (already reported).
 */
static int stream_frames(gf_stream_run *r) {
    const gf_stream_opts *o = r->o;

    for (;;) {
        uint64_t due = 0; /* --rate: when the next frame is due, if later */
        while (!r->input_done && !stream_interrupted && r->queued < r->planned &&
               r->queued - r->answered < o->window) {
            if (o->rate > 0) {
                uint64_t at = r->start_ns + (uint64_t)((double)r->queued * 1e9 / o->rate);
                uint64_t now = gf_now_ns();
                if (now < at) {
                    due = at;
                    break;
                }
            }
            int q = gf_stream_queue_next(r);
            if (q <= 0) {
                r->input_done = 1;
                if (q < 0)
                    r->input_error = 1;
            }
        }
        if (r->queued == r->answered && !due)
            return 0;

        size_t before = gf_client_in_flight(r->client);
        gf_reply rep;
        int err = gf_client_recv(r->client, &rep, due ? 0 : o->common.timeout_ms);
        if (err == -ETIMEDOUT && due) {
            if (wait_due_or_reply(r, due) < 0)
                return -1;
            continue;
        }
        if (err < 0) {
            gf_print_client_error(r->client, "stream", err);
            return -1;
        }
        if (gf_client_in_flight(r->client) == before) {
            /* A fatal ERROR about no frame of ours, sent before a close. */
            if (!o->quiet) {
                fputs("gpuframe: daemon: ", stderr);
                gf_print_error_reply(stderr, &rep);
            }
            continue;
        }
        gf_stream_handle_reply(r, &rep);
        show_progress(r, gf_now_ns());
    }
}

/* Sleeps until `epoch_s` seconds since the Epoch (--start-at; at once for 0
 * or a time past), or until Ctrl-C: in naps of at most 100 ms, so that a
 * signal between the flag's test and the sleep is seen soon. */
static void wait_until(double epoch_s) {
    const uint64_t nap_ns = 100000000, at_ns = (uint64_t)(epoch_s * 1e9);
    struct timespec now;
    while (epoch_s > 0 && !stream_interrupted && clock_gettime(CLOCK_REALTIME, &now) == 0) {
        uint64_t now_ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
        if (now_ns >= at_ns)
            return;
        uint64_t left = at_ns - now_ns < nap_ns ? at_ns - now_ns : nap_ns;
        struct timespec nap = {.tv_sec = 0, .tv_nsec = (long)left};
        nanosleep(&nap, NULL);
    }
}

/* Runs the window, with the progress line shown on a terminal; returns what
 * stream_frames returns, and the time it took in *elapsed_ns.  Interrupted
 * before it (stream_interrupted), it sends nothing. */
static int stream_run(gf_stream_run *r, uint64_t *elapsed_ns) {
    r->progress = !r->o->quiet && isatty(STDERR_FILENO);
    /* --rate's waits end when due: Linux lets a sleep of this thread end up
     * to 50 us late by default, most of a fast source's period. */
    if (r->o->rate > 0)
        (void)prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    wait_until(r->o->start_at);
    r->start_ns = gf_now_ns();
    struct timespec now;
    r->started_s =
        clock_gettime(CLOCK_REALTIME, &now) == 0 ? (double)now.tv_sec + now.tv_nsec / 1e9 : 0;
    r->progress_next_ns = r->start_ns + PROGRESS_AFTER_NS;
    int rc = stream_frames(r);
    *elapsed_ns = gf_now_ns() - r->start_ns;
    r->interrupted = stream_interrupted;
    if (r->progress_shown)
        fputs("\r" ANSI_ERASE_LINE, stderr);
    return rc;
}

int gf_cmd_stream(int argc, char *argv[]) {
    gf_stream_opts o;
    gf_stream_run r;

    catch_interrupt();
    parse_stream_opts(argc, argv, &o);
    memset(&r, 0, sizeof r);
    r.o = &o;
    r.report = o.output_path != NULL && IS_STDIO(o.output_path) ? stderr : stdout;
    stream_connect(&r);
    plan_frame_size(&r, &o);
    int status = gf_stream_prepare(&r);
    if (status == EXIT_OK) {
        uint64_t elapsed_ns;
        print_banner(&r);
        int connection_failed = stream_run(&r, &elapsed_ns) < 0;
        status = gf_stream_finish(&r, elapsed_ns, connection_failed);
    }
    stream_free(&r);
    return status;
}
