#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""How far a float32 spectrogram lands from the double-precision reference,
as a ratio to kernels/registry.c's SPECTROGRAM_ABS/REL_TOLERANCE.

The float32 side computes each DFT as a float32 matrix product (its error
grows as sqrt(n_fft), faster than cuFFT's log(n_fft)), so it bounds what the
GPU does from above; the double side is the reference's arithmetic.  Inputs
are what clients and the tests make up: full-scale int16 noise and float32
uniform in [-4, 4].  Every ratio must stay below 1; a wrong window (the
symmetric Hann) or a column shifted by one sample must land far above it.
Needs NumPy; about a minute.  Run: python3 bench/repro/spectrogram_tolerance.py
"""
import itertools

import numpy as np

ABS_TOL, REL_TOL = 1e-3, 1e-3


def hz_to_mel(f, scale):
    if scale == "htk":
        return 2595.0 * np.log10(1.0 + f / 700.0)
    f = np.asarray(f, dtype=np.float64)
    return np.where(f >= 1000.0, 15.0 + np.log(np.maximum(f, 1e-30) / 1000.0) / (np.log(6.4) / 27.0),
                    f / (200.0 / 3.0))


def mel_to_hz(m, scale):
    if scale == "htk":
        return 700.0 * (10.0 ** (m / 2595.0) - 1.0)
    return np.where(m >= 15.0, 1000.0 * np.exp(np.log(6.4) / 27.0 * (m - 15.0)), m * 200.0 / 3.0)


def filterbank(n_freqs, sample_rate, n_mels):
    all_freqs = np.arange(n_freqs) * (sample_rate // 2) / (n_freqs - 1)
    f_pts = mel_to_hz(np.linspace(hz_to_mel(0.0, "htk"), hz_to_mel(sample_rate / 2, "htk"),
                                  n_mels + 2), "htk")
    diff = np.diff(f_pts)
    slopes = f_pts[None, :] - all_freqs[:, None]
    return np.maximum(0.0, np.minimum(-slopes[:, :-2] / diff[:-1], slopes[:, 2:] / diff[1:]))


def spectrogram(x, n_fft, hop, power, n_mels, log, window_denominator, dtype):
    padded = np.pad(x, n_fft // 2, mode="reflect")
    columns = 1 + (len(padded) - n_fft) // hop
    idx = np.arange(columns)[:, None] * hop + np.arange(n_fft)[None, :]
    window = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n_fft) / window_denominator)
    frames = padded[idx].astype(dtype) * window.astype(dtype)
    k = np.arange(n_fft // 2 + 1)
    angle = 2 * np.pi * ((k[:, None] * np.arange(n_fft)[None, :]) % n_fft) / n_fft
    re = frames @ np.cos(angle).astype(dtype).T
    im = frames @ np.sin(angle).astype(dtype).T
    p = re * re + im * im
    if power == 1:
        p = np.sqrt(p)
    if n_mels:
        p = p @ filterbank(n_fft // 2 + 1, 16000, n_mels).astype(dtype)
    p = p.T
    eps = dtype(1e-10)
    if log == "ln":
        p = np.log(np.maximum(p, eps))
    elif log == "db":
        p = (20 if power == 1 else 10) * np.log10(np.maximum(p, eps))
    return p.astype(np.float32).astype(np.float64)


def ratio(got, ref):
    return float((np.abs(got - ref) / (ABS_TOL + REL_TOL * np.abs(ref))).max())


def main():
    rng = np.random.default_rng(1)
    worst = 0.0
    for n_fft, hop, samples in [(400, 160, 16000), (64, 16, 2000), (1024, 256, 8000),
                                (4096, 1024, 20000), (401, 100, 4000)]:
        for source in ("int16", "float32"):
            x = (rng.integers(-32768, 32768, samples) / 32768.0 if source == "int16"
                 else rng.uniform(-4, 4, samples))
            for power, n_mels, log in itertools.product((1, 2), (0, 64), ("none", "ln", "db")):
                ref = spectrogram(x, n_fft, hop, power, n_mels, log, n_fft, np.float64)
                got = spectrogram(x, n_fft, hop, power, n_mels, log, n_fft, np.float32)
                r = ratio(got, ref)
                worst = max(worst, r)
                print("n_fft %4d %-7s power %d n_mels %2d log %-4s: %.3f" % (
                    n_fft, source, power, n_mels, log, r))
    print("worst float32 ratio: %.3f (must be < 1)" % worst)
    x = rng.integers(-32768, 32768, 16000) / 32768.0
    ref = spectrogram(x, 400, 160, 2, 64, "ln", 400, np.float64)
    print("symmetric Hann window: %.1f (must be > 1)"
          % ratio(spectrogram(x, 400, 160, 2, 64, "ln", 399, np.float64), ref))
    print("column shifted by one sample: %.1f (must be > 1)"
          % ratio(spectrogram(np.roll(x, 1), 400, 160, 2, 64, "ln", 400, np.float64), ref))


if __name__ == "__main__":
    main()
