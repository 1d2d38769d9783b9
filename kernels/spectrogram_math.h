/* SPDX-License-Identifier: MIT */
/*
 * The shapes and formulas of pipeline kind "spectrogram" that the reference
 * (kernels/spectrogram_ref.c) and the CUDA side (kernels/spectrogram.cu,
 * whose device_open builds its mel matrix from them) share: the STFT's
 * sizes, the periodic Hann window, and torchaudio's mel filterbank
 * (torchaudio.functional.melscale_fbanks), in double precision.
 * docs/stages.md, "spectrogram", states them in words.
 *
 * Defined in spectrogram_ref.c (gfpipelines); host code only.
 */
#ifndef GF_SPECTROGRAM_MATH_H
#define GF_SPECTROGRAM_MATH_H

#include <stdint.h>

#include "pipeline.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The values of gf_params.sample_format, .mel_scale, .mel_norm and .log, in
 * the order of their names in registry.c's choice lists. */
enum gf_sample_format { GF_SAMPLES_INT16, GF_SAMPLES_F32 };
enum gf_mel_scale { GF_MEL_HTK, GF_MEL_SLANEY };
enum gf_mel_norm { GF_MEL_NORM_NONE, GF_MEL_NORM_SLANEY };
enum gf_spec_log { GF_LOG_NONE, GF_LOG_LN, GF_LOG_DB };

/* The longest FFT: the reference keeps three tables of this many doubles
 * on its stack; 4096 is 256 ms at 16 kHz, 93 ms at 44.1 kHz. */
#define GF_SPEC_N_FFT_MAX 4096
/* The most mel bands (torchaudio's largest common setting is 128). */
#define GF_SPEC_N_MELS_MAX 512

/* An int16 sample s is the float s / 32768 (torchaudio.load's scaling). */
#define GF_INT16_FULL_SCALE 32768.0

/* What the parameters make of one frame. */
typedef struct gf_spec_shape {
    uint32_t sample_bytes; /* 2 (int16) or 4 (float32)                     */
    uint32_t pad;          /* reflected samples before and after: n_fft/2
                              with center, else 0                          */
    uint32_t n_freqs;      /* n_fft/2 + 1 frequency bins                    */
    uint32_t columns;      /* STFT frames: 1 + (samples + 2 pad - n_fft)/hop */
    uint32_t rows;         /* n_mels, or n_freqs without mel               */
} gf_spec_shape;

/* The shape for `p`; columns is 0 when the samples do not fill one window
 * (check_params refuses that). */
gf_spec_shape gf_spec_shape_of(const gf_params *p);

/* Sample i (0 <= i < samples + 2 pad) of the padded signal's index into
 * the frame: reflection about the first and last sample (torch's
 * "reflect": the edge itself is not repeated). */
#ifdef __CUDACC__
__host__ __device__
#endif
    static inline uint32_t
    gf_spec_reflect(int64_t i, uint32_t samples) {
    if (i < 0)
        i = -i;
    if (i >= (int64_t)samples)
        i = 2 * ((int64_t)samples - 1) - i;
    return (uint32_t)i;
}

/* The periodic Hann window at sample j of n_fft (torch.hann_window's
 * default): 0.5 - 0.5 cos(2 pi j / n_fft). */
double gf_spec_window(uint32_t j, uint32_t n_fft);

/* f_max as used: the parameter, or sample_rate / 2 (integer division, as
 * torchaudio's float(sample_rate // 2)) when it is 0. */
double gf_mel_f_max(const gf_params *p);

/* torchaudio's _hz_to_mel and _mel_to_hz: HTK 2595 log10(1 + f/700);
 * Slaney linear below 1 kHz (f / (200/3)), logarithmic above (step
 * ln(6.4)/27 per mel). */
double gf_hz_to_mel(double hz, uint32_t mel_scale);
double gf_mel_to_hz(double mel, uint32_t mel_scale);

/* The n_mels + 2 filter edges in Hz: mel_to_hz of n_mels + 2 points evenly
 * spaced from hz_to_mel(f_min) to hz_to_mel(f_max). */
void gf_mel_points(const gf_params *p, double *f_pts);

/* The weight of frequency bin k (k * (sample_rate // 2) / (n_freqs - 1) Hz)
 * in mel band m, from gf_mel_points' f_pts: max(0, min(rise, fall)) of the
 * triangle on f_pts[m], f_pts[m+1], f_pts[m+2], times 2 / (f_pts[m+2] -
 * f_pts[m]) under mel_norm "slaney". */
double gf_mel_weight(const gf_params *p, const double *f_pts, uint32_t n_freqs, uint32_t k,
                     uint32_t m);

/* The log stage: x itself; ln(max(x, eps)); or 10 log10(max(x, eps)) for
 * power, 20 log10(max(x, eps)) for magnitude (torchaudio's AmplitudeToDB
 * with amin = eps, ref 1, no top_db). */
double gf_spec_log_value(const gf_params *p, double x);

#ifdef __cplusplus
}
#endif

#endif
