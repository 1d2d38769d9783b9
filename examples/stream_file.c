/* SPDX-License-Identifier: MIT */
/*
 * stream_file: sends a file through a gpuframed pipeline, one frame per
 * FRAME_BYTES of it (the last may be shorter), with WINDOW frames in flight,
 * and writes the results, in order, to another file.  The example of
 * README.md, "From a C program"; against the installed library:
 *
 *     cc stream_file.c $(pkg-config --cflags --libs gpuframe) -o stream_file
 *     ./stream_file /run/gpuframed.sock affine 1048576 in.f32 out.f32
 *
 * Exit status: 0 when every frame got a result, 1 otherwise, 2 for bad usage.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpuframe/libgpuframe.h>

#define WINDOW     4     /* frames in flight: copies of one overlap another's kernel */
#define TIMEOUT_MS 30000 /* a daemon silent this long is taken for hung */

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: stream_file SOCKET PIPELINE FRAME_BYTES INPUT OUTPUT\n");
        return 2;
    }
    size_t frame_bytes = strtoul(argv[3], NULL, 10);
    FILE *in = fopen(argv[4], "rb"), *out = fopen(argv[5], "wb");
    if (frame_bytes == 0 || in == NULL || out == NULL) {
        fprintf(stderr, "stream_file: bad FRAME_BYTES, INPUT or OUTPUT\n");
        return 2;
    }
    gf_client *c = NULL;
    int err = gf_client_connect(argv[1], &c);
    if (err < 0) {
        char why[768];
        fprintf(stderr, "stream_file: %s\n",
                gf_client_connect_error(argv[1], err, "give its path as SOCKET", why, sizeof why));
        return 1;
    }
    uint32_t pipeline;
    if ((err = gf_client_pipeline_id(c, argv[2], &pipeline, TIMEOUT_MS)) < 0) {
        fprintf(stderr, "stream_file: %s\n", err == -ENOENT ? gf_client_error(c) : strerror(-err));
        gf_client_close(c);
        return err == -ENOENT ? 2 : 1;
    }

    /* Frame n lives in buf[n % WINDOW] until its reply has been received. */
    unsigned char *buf[WINDOW];
    for (int i = 0; i < WINDOW; i++)
        if ((buf[i] = malloc(frame_bytes)) == NULL)
            return 1;
    uint64_t sent = 0, done = 0, failed = 0;
    int eof = 0;
    while (!eof || done < sent) {
        while (!eof && sent - done < WINDOW) {
            size_t n = fread(buf[sent % WINDOW], 1, frame_bytes, in);
            if (n == 0)
                eof = 1;
            else if ((err = gf_client_send_frame(c, pipeline, sent, buf[sent % WINDOW], n)) < 0) {
                fprintf(stderr, "stream_file: send: %s\n", strerror(-err));
                eof = 1;
                failed++;
            } else {
                sent++;
            }
        }
        if (done == sent)
            break;
        gf_reply r;
        if ((err = gf_client_recv(c, &r, TIMEOUT_MS)) < 0) {
            fprintf(stderr, "stream_file: %s (%s)\n", strerror(-err), gf_client_error(c));
            failed += sent - done;
            break;
        }
        if (r.header.type == GF_MSG_RESULT)
            fwrite(r.payload, 1, r.payload_bytes, out);
        else if (++failed == 1)
            fprintf(stderr, "stream_file: frame %llu: %s: %.*s\n",
                    (unsigned long long)r.header.frame_id, gf_status_name(r.header.status),
                    (int)r.payload_bytes, (const char *)r.payload);
        done++;
    }
    printf("%llu frames, %llu failed\n", (unsigned long long)sent, (unsigned long long)failed);
    for (int i = 0; i < WINDOW; i++)
        free(buf[i]);
    gf_client_close(c);
    fclose(in);
    return fclose(out) == 0 && failed == 0 ? 0 : 1;
}
