/* SPDX-License-Identifier: MIT */
/*
 * The reference of pipeline kind "spectrogram" (contract in kernels.h) and
 * the formulas spectrogram_math.h declares.
 *
 * An exact DFT in double precision, not an FFT: each bin is the sum over the
 * window of x[n] w[n] e^(-2 pi i k n / n_fft), the twiddle factor read from
 * a table of cos and sin of 2 pi j / n_fft at j = k n mod n_fft, so no
 * rounding accumulates in the angles.  Its cost is n_fft/2 + 1 bins times
 * n_fft samples per column: 1 s of 16 kHz audio with n_fft 400 and hop 160
 * is 101 x 201 x 400 = 8.1 M complex multiply-adds, about 15 ms on one core
 * (docs/stages.md, "Why an exact DFT"): what the CPU engine serves and what
 * the tests need, with no FFT library to depend on and an error far below
 * float32's, so the GPU's cuFFT is measured against something better than
 * itself.
 *
 * Allocates nothing: the tables live on the calling thread's stack (at most
 * GF_SPEC_N_FFT_MAX of each, about 100 KiB).
 */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "kernels.h"
#include "spectrogram_math.h"

#define PI 3.14159265358979323846

gf_spec_shape gf_spec_shape_of(const gf_params *p) {
    gf_spec_shape s;
    uint64_t padded;
    s.sample_bytes = p->sample_format == GF_SAMPLES_F32 ? 4u : 2u;
    s.pad = p->center ? p->n_fft / 2 : 0;
    s.n_freqs = p->n_fft / 2 + 1;
    padded = (uint64_t)p->samples + 2u * s.pad;
    s.columns = p->hop > 0 && padded >= p->n_fft ? (uint32_t)(1 + (padded - p->n_fft) / p->hop) : 0;
    s.rows = p->n_mels > 0 ? p->n_mels : s.n_freqs;
    return s;
}

double gf_mel_f_max(const gf_params *p) {
    return p->f_max > 0.0f ? (double)p->f_max : (double)(p->sample_rate / 2);
}

/* Slaney's scale: linear below this many Hz, logarithmic above. */
#define SLANEY_MIN_LOG_HZ 1000.0
/* Hz per mel on the linear part. */
#define SLANEY_F_SP (200.0 / 3.0)

double gf_hz_to_mel(double hz, uint32_t mel_scale) {
    if (mel_scale == GF_MEL_HTK)
        return 2595.0 * log10(1.0 + hz / 700.0);
    if (hz < SLANEY_MIN_LOG_HZ)
        return hz / SLANEY_F_SP;
    return SLANEY_MIN_LOG_HZ / SLANEY_F_SP + log(hz / SLANEY_MIN_LOG_HZ) / (log(6.4) / 27.0);
}

double gf_mel_to_hz(double mel, uint32_t mel_scale) {
    const double min_log_mel = SLANEY_MIN_LOG_HZ / SLANEY_F_SP;
    if (mel_scale == GF_MEL_HTK)
        return 700.0 * (pow(10.0, mel / 2595.0) - 1.0);
    if (mel < min_log_mel)
        return SLANEY_F_SP * mel;
    return SLANEY_MIN_LOG_HZ * exp(log(6.4) / 27.0 * (mel - min_log_mel));
}

void gf_mel_points(const gf_params *p, double *f_pts) {
    const double m_min = gf_hz_to_mel((double)p->f_min, p->mel_scale);
    const double m_max = gf_hz_to_mel(gf_mel_f_max(p), p->mel_scale);
    const uint32_t n = p->n_mels + 2;
    for (uint32_t i = 0; i < n; i++)
        f_pts[i] =
            gf_mel_to_hz(m_min + (m_max - m_min) * (double)i / (double)(n - 1), p->mel_scale);
}

double gf_mel_weight(const gf_params *p, const double *f_pts, uint32_t n_freqs, uint32_t k,
                     uint32_t m) {
    const double f = (double)k * (double)(p->sample_rate / 2) / (double)(n_freqs - 1);
    const double rise = (f - f_pts[m]) / (f_pts[m + 1] - f_pts[m]);
    const double fall = (f_pts[m + 2] - f) / (f_pts[m + 2] - f_pts[m + 1]);
    double w = rise < fall ? rise : fall;
    if (!(w > 0.0))
        return 0.0;
    if (p->mel_norm == GF_MEL_NORM_SLANEY)
        w *= 2.0 / (f_pts[m + 2] - f_pts[m]);
    return w;
}

double gf_spec_window(uint32_t j, uint32_t n_fft) {
    return 0.5 - 0.5 * cos(2.0 * PI * (double)j / (double)n_fft);
}

double gf_spec_log_value(const gf_params *p, double x) {
    const double floor_x = x > (double)p->eps ? x : (double)p->eps;
    switch (p->log) {
    case GF_LOG_LN: return log(floor_x);
    case GF_LOG_DB: return (p->power == 1 ? 20.0 : 10.0) * log10(floor_x);
    default: return x;
    }
}

/* Sample i of the frame as a double: int16 / 32768, or the float32. */
static double sample_at(const unsigned char *in, uint32_t sample_bytes, uint32_t i) {
    if (sample_bytes == 2) {
        int16_t s;
        memcpy(&s, in + (size_t)i * 2, sizeof s);
        return (double)s / GF_INT16_FULL_SCALE;
    }
    float f;
    memcpy(&f, in + (size_t)i * 4, sizeof f);
    return (double)f;
}

void gf_spectrogram_ref(const gf_params *p, const void *in, size_t in_bytes, void *out) {
    const gf_spec_shape s = gf_spec_shape_of(p);
    const uint32_t n = p->n_fft;
    double cos_t[GF_SPEC_N_FFT_MAX], sin_t[GF_SPEC_N_FFT_MAX], v[GF_SPEC_N_FFT_MAX];
    double bins[GF_SPEC_N_FFT_MAX / 2 + 1], f_pts[GF_SPEC_N_MELS_MAX + 2];
    unsigned char *dst = out;

    assert(in_bytes == (size_t)p->samples * s.sample_bytes && n <= GF_SPEC_N_FFT_MAX &&
           p->n_mels <= GF_SPEC_N_MELS_MAX && s.columns > 0);
    (void)in_bytes;
    for (uint32_t j = 0; j < n; j++) {
        cos_t[j] = cos(2.0 * PI * (double)j / (double)n);
        sin_t[j] = sin(2.0 * PI * (double)j / (double)n);
    }
    if (p->n_mels > 0)
        gf_mel_points(p, f_pts);
    for (uint32_t t = 0; t < s.columns; t++) {
        /* The windowed column. */
        for (uint32_t j = 0; j < n; j++) {
            const int64_t i = (int64_t)t * p->hop + j - s.pad;
            v[j] = gf_spec_window(j, n) *
                   sample_at(in, s.sample_bytes, gf_spec_reflect(i, p->samples));
        }
        for (uint32_t k = 0; k < s.n_freqs; k++) {
            double re = 0.0, im = 0.0;
            uint32_t idx = 0; /* k j mod n, kept by adding k */
            for (uint32_t j = 0; j < n; j++) {
                re += v[j] * cos_t[idx];
                im -= v[j] * sin_t[idx];
                idx += k;
                if (idx >= n)
                    idx -= n;
            }
            bins[k] = p->power == 1 ? sqrt(re * re + im * im) : re * re + im * im;
        }
        for (uint32_t r = 0; r < s.rows; r++) {
            double y = 0.0;
            if (p->n_mels == 0) {
                y = bins[r];
            } else {
                /* Only the bins under the triangle: the others add 0. */
                const double hz_per_bin = (double)(p->sample_rate / 2) / (double)(s.n_freqs - 1);
                double lo = floor(f_pts[r] / hz_per_bin) - 1.0,
                       hi = ceil(f_pts[r + 2] / hz_per_bin) + 1.0;
                uint32_t k0 = lo > 0.0 ? (uint32_t)lo : 0;
                uint32_t k1 = hi < (double)(s.n_freqs - 1) ? (uint32_t)hi : s.n_freqs - 1;
                for (uint32_t k = k0; k <= k1; k++)
                    y += gf_mel_weight(p, f_pts, s.n_freqs, k, r) * bins[k];
            }
            /* Row r, column t: (rows x columns) row-major, as torch.stft. */
            const float f = (float)gf_spec_log_value(p, y);
            memcpy(dst + ((size_t)r * s.columns + t) * sizeof f, &f, sizeof f);
        }
    }
}
