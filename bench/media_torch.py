#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The in-process peers of the media kinds, for bench/media.sh (issue 34):
torchvision.transforms.v2 and torchaudio on the GPU, on batches already on
the device, timed with CUDA events after a warm-up.

- image: a batch of 16 1920x1080 RGB8 frames (uint8 [16, 3, 1080, 1920]) to
  float32 [16, 3, 224, 224]: ToDtype(float32, scale=True), Resize(224,
  antialias=True), CenterCrop(224), Normalize(ImageNet) -- what the image
  stage computes (torchvision has no NV12 conversion; the RGB8 kernel is
  timed beside it for the like-for-like ratio).
- spectrogram: batches of 16 and 64 one-second 16 kHz int16 clips to
  float32 [B, 64, 101]: to float (/32768), MelSpectrogram(n_fft 400, hop
  160, 64 mels, power 2), log(max(x, 1e-6)).

  bench/media_torch.py [--short] [--socket PATH]

With --socket, before timing, frame 0 of each goes through the daemon there
(pipelines "camera_rgb" and "melspec", bench/media.sh's) and torch's result
must match it: the image within image_tol() of python/tests/test_media_torch.py
(1.3e-5 here, our float32 arithmetic's worst case) of torch's transforms redone
in float64, the spectrogram within |d| <= 1e-3 + 1e-3 |ref| (that file says
why); else exit 1.

Prints:
  torch case=image_rgb8 batch=16 us_per_batch=T frames_per_s=R
  torch case=spectrogram batch=B us_per_batch=T frames_per_s=R
or one line "torch unavailable: REASON" (exit 0), and nothing else.
"""
import os
import sys


def check(name, got, want, abs_tol, rel_tol):
    """Exits 1 unless |got - want| <= abs_tol + rel_tol |want| everywhere."""
    import numpy as np
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    ratio = float((np.abs(got - want) / (abs_tol + rel_tol * np.abs(want))).max())
    print("# %s: torch against gpuframed, largest |difference| / tolerance %.3g" % (name, ratio))
    if got.shape != want.shape or not ratio <= 1.0:
        print("bench: torch's %s differs from gpuframed's (shape %s vs %s)"
              % (name, want.shape, got.shape), file=sys.stderr)
        sys.exit(1)


def main():
    args = sys.argv[1:]
    short = "--short" in args
    socket_path = args[args.index("--socket") + 1] if "--socket" in args else None
    try:
        import torch
        import torchaudio
        import torchvision.transforms.v2.functional as TF
    except ImportError as e:
        print("torch unavailable: %s" % e)
        return 0
    if not torch.cuda.is_available():
        print("torch unavailable: torch sees no CUDA device")
        return 0
    iters = 5 if short else 100
    dev = torch.device("cuda")
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]

    def timed(fn):
        for _ in range(3):
            fn()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn()
        stop.record()
        stop.synchronize()
        return 1000.0 * start.elapsed_time(stop) / iters

    gen = torch.Generator(device=dev).manual_seed(34)
    frames = torch.randint(0, 256, (16, 3, 1080, 1920), dtype=torch.uint8, device=dev,
                           generator=gen)

    def image(batch=frames, dtype=torch.float32):
        x = TF.to_dtype(batch, dtype, scale=True)
        x = TF.center_crop(TF.resize(x, [224], antialias=True), [224, 224])
        return TF.normalize(x, mean, std)

    out = image()
    assert tuple(out.shape) == (16, 3, 224, 224), out.shape
    if socket_path:
        from gpuframe import Client
        with Client(socket_path) as c:
            got = c.process("camera_rgb", frames[0].permute(1, 2, 0).contiguous().cpu().numpy())
        exact = image(frames[:1], torch.float64)[0]
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                        "python", "tests"))
        from test_media_torch import image_tol
        check("image_rgb8", got, exact.cpu().numpy(),
              image_tol(1920, 1080, (224, 224), "crop", True, True), 0.0)
    us = timed(image)
    print("torch case=image_rgb8 batch=16 us_per_batch=%.1f frames_per_s=%.0f"
          % (us, 16e6 / us))
    sys.stdout.flush()
    del frames, out

    mel = torchaudio.transforms.MelSpectrogram(sample_rate=16000, n_fft=400, hop_length=160,
                                               n_mels=64, power=2.0).to(dev)
    for batch in (16, 64):
        clips = torch.randint(-32768, 32768, (batch, 16000), dtype=torch.int16, device=dev,
                              generator=gen)

        def spectrogram():
            return torch.log(torch.clamp(mel(clips.float() / 32768.0), min=1e-6))

        out = spectrogram()
        assert tuple(out.shape) == (batch, 64, 101), out.shape
        if socket_path and batch == 16:
            from gpuframe import Client
            with Client(socket_path) as c:
                got = c.process("melspec", clips[0].cpu().numpy())
            check("spectrogram", got, out[0].cpu().numpy(), 1e-3, 1e-3)
        us = timed(spectrogram)
        print("torch case=spectrogram batch=%d us_per_batch=%.1f frames_per_s=%.0f"
              % (batch, us, batch * 1e6 / us))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
