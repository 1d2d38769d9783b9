/* SPDX-License-Identifier: MIT */
/*
 * gf_sockbench: the socket-only ceiling of an echo server, i.e. what
 * gpuframed could reach if its compute and its protocol cost nothing.  A
 * socketpair(AF_UNIX, SOCK_STREAM) with default buffers, as the daemon's
 * connections have; threads play the client and the server.
 *
 *   gf_sockbench [--sizes BYTES,...] [--short]
 *
 * Prints one line per figure (bench/README.md says what each is):
 *   limit name=sockpair write=B GBps=R          one direction, a writer thread
 *                                               writing B bytes at a time
 *   limit name=sock_rtt size=B p50_us=L p99_us=L   echo, one frame in flight
 *   limit name=sock_echo size=B window=16 frames=N fps=R GBps=R   echo, 16 in flight
 * GB/s are 1e9 bytes per second, one direction.  Exit status 0, 1 on a
 * socket or thread error (the message on stderr), 2 on a bad command line.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util.h"

/* The write sizes of the one-direction run: the range DESIGN.md quotes. */
static const size_t stream_write_bytes[] = {65536, 1 << 20};
/* Bytes moved by each one-direction run. */
#define STREAM_TOTAL_BYTES ((uint64_t)1 << 30)
/* Frame sizes by default: those of bench/run.sh. */
static const size_t default_sizes[] = {4096, 65536, 1 << 20, 4 << 20, 16 << 20};
#define MAX_SIZE_COUNT  16
#define MAX_FRAME_BYTES ((size_t)1 << 30)
/* Frames in flight in the throughput run: gpuframe stream --window 16. */
#define ECHO_WINDOW 16
/* Frames per echo run: about this many bytes, within [min, max] frames. */
#define ECHO_TARGET_BYTES ((uint64_t)1 << 30)
#define ECHO_MIN_FRAMES   100
#define ECHO_MAX_FRAMES   50000
#define RTT_TARGET_BYTES  ((uint64_t)256 << 20)
#define RTT_MIN_FRAMES    50
#define RTT_MAX_FRAMES    5000
/* --short divides every count by this. */
#define SHORT_DIVISOR 10

/* Writes all `len` bytes; returns 0 or a negative errno. */
static int write_full(int fd, const void *buf, size_t len) {
    const char *p = buf;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Reads exactly `len` bytes; returns 0, -EPIPE on end of file first, or a
 * negative errno. */
static int read_full(int fd, void *buf, size_t len) {
    char *p = buf;
    while (len > 0) {
        ssize_t n = read(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            return -EPIPE;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static size_t clamp_count(uint64_t want, size_t lo, size_t hi) {
    return want < lo ? lo : want > hi ? hi : (size_t)want;
}

/* What a helper thread does and how it ended. */
struct worker {
    int fd;             /* its end of the socketpair                      */
    size_t bytes;       /* write size, or frame size                      */
    uint64_t count;     /* writes or frames                               */
    unsigned char *buf; /* bytes bytes, owned by the caller              */
    sem_t *credits;     /* echo client: frames it may still send, or NULL */
    int rc;             /* 0 or a negative errno                          */
};

/* Writes w->count buffers of w->bytes, waiting for a credit before each when
 * w->credits is set. */
static void *writer_main(void *arg) {
    struct worker *w = arg;
    for (uint64_t i = 0; i < w->count && w->rc == 0; i++) {
        while (w->credits && sem_wait(w->credits) != 0)
            if (errno != EINTR) {
                w->rc = -errno;
                return NULL;
            }
        w->rc = write_full(w->fd, w->buf, w->bytes);
    }
    return NULL;
}

/* The echo server: reads a frame of w->bytes, writes it back, until the
 * client closes its end. */
static void *echo_main(void *arg) {
    struct worker *w = arg;
    int rc;
    while ((rc = read_full(w->fd, w->buf, w->bytes)) == 0)
        if ((rc = write_full(w->fd, w->buf, w->bytes)) != 0)
            break;
    w->rc = rc == -EPIPE ? 0 : rc;
    return NULL;
}

static int fail(const char *what, int rc) {
    fprintf(stderr, "gf_sockbench: %s: %s\n", what, strerror(-rc));
    return rc;
}

/* One direction: a writer thread sends STREAM_TOTAL_BYTES in writes of
 * `bytes`; this thread reads them.  Prints the sockpair line. */
static int one_way(size_t bytes, unsigned divisor) {
    int fds[2], rc = 0;
    unsigned char *src = malloc(bytes), *dst = malloc(bytes);
    struct worker w = {0};
    pthread_t t;
    uint64_t total = STREAM_TOTAL_BYTES / divisor / bytes * bytes, got = 0, t0;
    double secs;

    if (!src || !dst) {
        rc = fail("buffers", -ENOMEM);
        goto fail_buf;
    }
    memset(src, 0x5a, bytes);
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
        rc = fail("socketpair", -errno);
        goto fail_buf;
    }
    w = (struct worker){.fd = fds[0], .bytes = bytes, .count = total / bytes, .buf = src};
    t0 = gf_now_ns();
    if ((rc = -pthread_create(&t, NULL, writer_main, &w)) != 0) {
        fail("pthread_create", rc);
        goto fail_sock;
    }
    while (got < total) {
        ssize_t n = read(fds[1], dst, bytes);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = fail("read", n == 0 ? -EPIPE : -errno);
            break;
        }
        got += (uint64_t)n;
    }
    secs = (double)(gf_now_ns() - t0) / 1e9;
    if (rc != 0)
        shutdown(fds[1], SHUT_RDWR); /* unblocks the writer */
    pthread_join(t, NULL);
    if (rc == 0 && w.rc != 0)
        rc = fail("write", w.rc);
    if (rc == 0)
        printf("limit name=sockpair write=%zu GBps=%.3f\n", bytes, (double)total / secs / 1e9);
fail_sock:
    close(fds[0]);
    close(fds[1]);
fail_buf:
    free(dst);
    free(src);
    return rc;
}

/* Echo of frames of `bytes` through a server thread: first one in flight
 * (round trip percentiles), then ECHO_WINDOW in flight with a writer thread
 * (frames/s).  Prints the sock_rtt and sock_echo lines. */
static int echo(size_t bytes, unsigned divisor) {
    int fds[2], rc = 0;
    unsigned char *client = malloc(bytes), *reply = malloc(bytes), *server = malloc(bytes);
    const size_t rtt_count = clamp_count(RTT_TARGET_BYTES / divisor / bytes,
                                         RTT_MIN_FRAMES / divisor, RTT_MAX_FRAMES / divisor);
    const size_t echo_count = clamp_count(ECHO_TARGET_BYTES / divisor / bytes,
                                          ECHO_MIN_FRAMES / divisor, ECHO_MAX_FRAMES / divisor);
    uint64_t *lat_ns = calloc(rtt_count, sizeof *lat_ns);
    struct worker srv = {0}, wr = {0};
    pthread_t srv_t, wr_t;
    sem_t credits;
    uint64_t t0;
    double secs;

    if (!client || !reply || !server || !lat_ns) {
        rc = fail("buffers", -ENOMEM);
        goto fail_buf;
    }
    memset(client, 0xa5, bytes);
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
        rc = fail("socketpair", -errno);
        goto fail_buf;
    }
    if (sem_init(&credits, 0, ECHO_WINDOW) != 0) {
        rc = fail("sem_init", -errno);
        goto fail_sock;
    }
    srv = (struct worker){.fd = fds[1], .bytes = bytes, .buf = server};
    if ((rc = -pthread_create(&srv_t, NULL, echo_main, &srv)) != 0) {
        fail("pthread_create", rc);
        goto fail_sem;
    }

    for (size_t i = 0; i < rtt_count && rc == 0; i++) {
        t0 = gf_now_ns();
        if ((rc = write_full(fds[0], client, bytes)) != 0 ||
            (rc = read_full(fds[0], reply, bytes)) != 0)
            fail("echo, one in flight", rc);
        lat_ns[i] = gf_now_ns() - t0;
    }
    if (rc == 0) {
        gf_sort_ns(lat_ns, rtt_count);
        printf("limit name=sock_rtt size=%zu p50_us=%.1f p99_us=%.1f\n", bytes,
               gf_percentile_us(lat_ns, rtt_count, 50), gf_percentile_us(lat_ns, rtt_count, 99));
        fflush(stdout);
    }

    if (rc == 0) {
        wr = (struct worker){
            .fd = fds[0], .bytes = bytes, .count = echo_count, .buf = client, .credits = &credits};
        t0 = gf_now_ns();
        if ((rc = -pthread_create(&wr_t, NULL, writer_main, &wr)) != 0) {
            fail("pthread_create", rc);
        } else {
            for (size_t i = 0; i < echo_count && rc == 0; i++) {
                if ((rc = read_full(fds[0], reply, bytes)) != 0)
                    fail("echo, window 16", rc);
                else
                    sem_post(&credits);
            }
            secs = (double)(gf_now_ns() - t0) / 1e9;
            if (rc != 0)
                shutdown(fds[0], SHUT_RDWR); /* unblocks the writer */
            for (int i = 0; i < ECHO_WINDOW; i++)
                sem_post(&credits); /* and a writer waiting for a credit */
            pthread_join(wr_t, NULL);
            if (rc == 0 && wr.rc != 0)
                rc = fail("write", wr.rc);
            if (rc == 0 && memcmp(client, reply, bytes) != 0)
                rc = fail("echo returned other bytes", -EIO);
            if (rc == 0)
                printf("limit name=sock_echo size=%zu window=%d frames=%zu fps=%.1f GBps=%.3f\n",
                       bytes, ECHO_WINDOW, echo_count, (double)echo_count / secs,
                       (double)echo_count * (double)bytes / secs / 1e9);
        }
    }
    shutdown(fds[0], SHUT_WR); /* the server sees end of file and returns */
    pthread_join(srv_t, NULL);
    if (rc == 0 && srv.rc != 0)
        rc = fail("echo server", srv.rc);
fail_sem:
    sem_destroy(&credits);
fail_sock:
    close(fds[0]);
    close(fds[1]);
fail_buf:
    free(lat_ns);
    free(server);
    free(reply);
    free(client);
    return rc;
}

/* Parses "4096,64K,1M" (K and M binary) into sizes[]; returns the count, or 0. */
static size_t parse_sizes(const char *s, size_t *sizes, size_t cap) {
    size_t n = 0;
    while (*s) {
        char *end;
        unsigned long long v = strtoull(s, &end, 10);
        if (end == s || n == cap)
            return 0;
        if (*end == 'K' || *end == 'M')
            v <<= (*end++ == 'K' ? 10 : 20);
        if (v == 0 || v > MAX_FRAME_BYTES || (*end != ',' && *end != '\0'))
            return 0;
        sizes[n++] = (size_t)v;
        s = *end == ',' ? end + 1 : end;
    }
    return n;
}

int main(int argc, char **argv) {
    size_t sizes[MAX_SIZE_COUNT];
    size_t size_count = sizeof default_sizes / sizeof default_sizes[0];
    unsigned divisor = 1;

    memcpy(sizes, default_sizes, sizeof default_sizes);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--short")) {
            divisor = SHORT_DIVISOR;
        } else if (!strcmp(argv[i], "--sizes") && i + 1 < argc) {
            if ((size_count = parse_sizes(argv[++i], sizes, MAX_SIZE_COUNT)) == 0) {
                fprintf(stderr,
                        "gf_sockbench: --sizes: expected BYTES[K|M],... (at most %d, each at "
                        "most 1G), got '%s'\n",
                        MAX_SIZE_COUNT, argv[i]);
                return 2;
            }
        } else {
            fprintf(stderr, "usage: gf_sockbench [--sizes BYTES,...] [--short]\n");
            return 2;
        }
    }
    for (size_t i = 0; i < sizeof stream_write_bytes / sizeof stream_write_bytes[0]; i++)
        if (one_way(stream_write_bytes[i], divisor) != 0)
            return 1;
    fflush(stdout);
    for (size_t i = 0; i < size_count; i++)
        if (echo(sizes[i], divisor) != 0)
            return 1;
    return 0;
}
