/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for the shared-memory and device descriptor checks
 * (gf_shm_frame_decode, gf_shm_frame_check, gf_device_frame_check): any
 * 40-byte descriptor, region size and pipeline output length.  The oracle
 * recomputes the rules of PROTOCOL.md ("Frames by reference", "Device
 * frames") in 128-bit arithmetic, where nothing can overflow, and the
 * harness requires the same verdict; an accepted descriptor's ranges must
 * lie inside the region and not overlap, and a device frame's offsets be
 * aligned.
 *
 * Input: 40 bytes of descriptor, 8 of region size, 8 of output length
 * (little-endian); shorter inputs are padded with zeros.
 */
#include <stdint.h>
#include <string.h>

#include "fuzz.h"
#include "protocol.h"

typedef unsigned __int128 u128;

static uint64_t le64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t in[GF_SHM_FRAME_BYTES + 16] = {0};
    memcpy(in, data, size < sizeof in ? size : sizeof in);
    uint64_t region = le64(in + GF_SHM_FRAME_BYTES), out = le64(in + GF_SHM_FRAME_BYTES + 8);

    gf_shm_frame d;
    int reserved_ok = in[4] == 0 && in[5] == 0 && in[6] == 0 && in[7] == 0;
    REQUIRE((gf_shm_frame_decode(in, &d) == 0) == reserved_ok);
    uint8_t again[GF_SHM_FRAME_BYTES];
    gf_shm_frame_encode(&d, again);
    REQUIRE(memcmp(again, in, 4) == 0 && memcmp(again + 8, in + 8, 32) == 0);

    u128 in_end = (u128)d.in_offset + d.in_bytes, out_cap_end = (u128)d.out_offset + d.out_capacity;
    u128 out_end = (u128)d.out_offset + out;
    int want = in_end <= region && out_cap_end <= region && out <= d.out_capacity &&
               !(d.in_bytes && out && d.in_offset < out_end && d.out_offset < in_end);
    char why[GF_ERROR_TEXT_MAX_BYTES];
    why[0] = '\0';
    int rc = gf_shm_frame_check(&d, region, out, why, sizeof why);
    REQUIRE(rc == 0 || rc == -GF_ERR_BAD_DESCRIPTOR);
    REQUIRE((rc == 0) == want);
    REQUIRE(rc == 0 || (why[0] != '\0' && strlen(why) < sizeof why));

    int aligned = d.in_offset % 256 == 0 && d.out_offset % 256 == 0;
    why[0] = '\0';
    rc = gf_device_frame_check(&d, region, out, why, sizeof why);
    REQUIRE(rc == 0 || rc == -GF_ERR_BAD_DESCRIPTOR);
    REQUIRE((rc == 0) == (want && aligned));
    REQUIRE(rc == 0 || (why[0] != '\0' && strlen(why) < sizeof why));
    return 0;
}
