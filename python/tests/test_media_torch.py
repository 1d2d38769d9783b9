# SPDX-License-Identifier: MIT
"""The media kinds on the GPU against PyTorch's own libraries, where they
define the same arithmetic (docs/stages.md says what each step is):

- image: torchvision.transforms.v2 on the GPU in float64, ToDtype(scale)
  then Resize (antialias as configured, bilinear) then CenterCrop then
  Normalize, on RGB, BGR (flipped), gray (three equal planes) and RGBA
  (alpha dropped); letterbox as Resize to the fitted size pasted onto the
  pad value; NV12 with the BT.709 conversion written in torch (torchvision
  has none) before the same transforms.  float64, because torchvision's
  float32 tap positions are not exact: its kernels round the scale in/out
  to float32 (up to 4.6e-5 source pixels off at the far edge of 1080 ->
  224) and, without antialias, the source position too (1.5e-5 near
  x = 300), which moves its results by up to 4.3e-5 from the exact ones on
  these random images; ours are exact in the tap positions (docs/stages.md)
  and float32 in the sums.  Tolerances: image_tol() below, the worst case
  of our float32 arithmetic for each case's sizes (seen: about 1e-6
  normalised, 2e-7 not).
- spectrogram: torchaudio.transforms.Spectrogram, MelSpectrogram (HTK and
  Slaney scales and norms) and AmplitudeToDB, on the GPU.  Both sides run
  cuFFT in float32; torchaudio builds its filterbank in float32, we in
  double: the registry's tolerance (|d| <= 1e-3 + 1e-3 |ref|) holds with
  room, and the test prints the largest ratio seen.

Runs on the CUDA engine with torch, torchvision and torchaudio importable
and a GPU; otherwise it says why and exits 77 (skipped).
"""

import math
import sys

import numpy as np

import support
from support import DaemonTestCase

try:
    import torch
    import torchaudio
    import torchvision.transforms.v2.functional as TF
    HAVE_TORCH = torch.cuda.is_available()
    WHY_NOT = "" if HAVE_TORCH else "torch sees no CUDA device"
except ImportError as e:  # pragma: no cover - the GPU machine has them
    HAVE_TORCH = False
    WHY_NOT = "no torch, torchvision or torchaudio: %s" % e

SPEC_ABS, SPEC_REL = 1e-3, 1e-3
MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]


U = 2.0 ** -24  # float32's unit roundoff: one rounding moves x by at most U |x|


def resized_size(w, h, size, fit):
    """(width, height) torchvision resizes to: Resize([short]) for a crop."""
    if fit != "crop":
        return size[1], size[0]
    if w >= h:
        return int(size[0] * w / h), size[0]
    return size[1], int(size[1] * h / w)


def axis_rounds(src, resized, antialias):
    """Our roundings along one axis, in units of U times the full scale.

    For each resized pixel, with its n taps, exact tent values t and their
    sum T (docs/stages.md, Resize; taken over every pixel, worst first):
    each tent value is within U of the exact one (test_media.c), which
    moves the weighted mean of values <= full scale by n U / T; T is n - 1
    float32 sums, relative error (n - 1) U; the n products round relative
    to their own terms, U in all; n - 1 sums of partials <= the result; the
    division by T one more.  Together n / T + 2 n."""
    if src == resized:
        return 0.0  # the source pixel itself
    scale = src / resized
    support = scale if antialias and scale > 1 else 1.0
    worst = 0.0
    for r in range(resized):
        centre = scale * (r + 0.5)
        first = max(int(centre - support + 0.5), 0)
        taps = np.arange(first, min(int(centre + support + 0.5), src))
        t = np.clip(1 - np.abs((taps + 0.5 - centre) / support), 0, None)
        worst = max(worst, len(taps) / t.sum() + 2 * len(taps))
    return worst


def yuv_rounds(kr, kb):
    """Our Y'CbCr to R'G'B' roundings, in units of U times 255 (values in
    0..255; the test's conversion is in float64).  y' = (Y - 16) * y_scale
    and cb, cr likewise carry two each (the coefficient's rounding to
    float32 and the product's), a coefficient times cb or cr two more, a
    sum one of its result: R = y' + p is within U (2|y'| + 4|p| + |y' + p|),
    G = (y' - q1) - q2 within U (4|y'| + 6|q1| + 5|q2|), at their largest
    |y'| = 239 * 255/219 and |cb|, |cr| = 128 * 255/224."""
    kg = 1 - kr - kb
    y, c = 239 * 255 / 219, 128 * 255 / 224
    r, b = 2 * (1 - kr) * c, 2 * (1 - kb) * c
    q1, q2 = 2 * kb * (1 - kb) / kg * c, 2 * kr * (1 - kr) / kg * c
    return max(3 * y + 5 * r, 4 * y + 6 * q1 + 5 * q2, 3 * y + 5 * b) / 255


def image_tol(w, h, size, fit, antialias, normalise, half=False, yuv=0.0):
    """The largest |ours - exact| our float32 arithmetic allows (first order;
    torchvision's float64 roundings are 2^29 times smaller).  Before
    Normalize, in [0, 1] units (every value <= 1, a weighted mean of bytes /
    255; every term >= 0): the x then y axes' roundings (the y weights sum
    to 1, so the rows' errors carry over as they are), the division by 255,
    and `yuv` (yuv_rounds) before the resize, which averages it.  Normalize
    divides that by std and adds our subtraction and division (U |out|
    each) and the float32 roundings of std (U |out|) and mean (U mean /
    std).  float16: half a binary16 step at the largest |out| more (ours is
    the float32 result rounded)."""
    rw, rh = resized_size(w, h, size, fit)
    k = axis_rounds(w, rw, antialias) + axis_rounds(h, rh, antialias) + 1 + yuv
    if normalise:
        out_max = max(max(m, 1 - m) / s for m, s in zip(MEAN, STD))
        tol = k * U / min(STD) + U * (3 * out_max + max(m / s for m, s in zip(MEAN, STD)))
    else:
        out_max, tol = 1.0, k * U
    if half:
        tol += 2.0 ** (math.floor(math.log2(out_max)) - 11)
    return tol


def image(name, fmt, w, h, **params):
    p = {"format": fmt, "width": w, "height": h}
    p.update(params)
    return {"name": name, "kind": "image", "params": p}


def spec(name, **params):
    return {"name": name, "kind": "spectrogram", "params": params}


IMAGENET = {"mean": MEAN, "std": STD}
CONFIG = {
    "slots": 2,
    "max_frame_bytes": 16 << 20,
    "pipelines": [
        image("rgb_crop", "rgb8", 1920, 1080, out_width=224, out_height=224, fit="crop",
              **IMAGENET),
        image("rgb_crop_sd", "rgb8", 640, 480, out_width=224, out_height=224, fit="crop",
              **IMAGENET),
        image("rgb_stretch_plain", "rgb8", 333, 251, out_width=128, out_height=96,
              antialias=False, **IMAGENET),
        image("rgb_up", "rgb8", 45, 33, out_width=160, out_height=120),
        image("bgr_crop_f16", "bgr8", 800, 600, out_width=224, out_height=224, fit="crop",
              dtype="float16", **IMAGENET),
        image("gray_crop", "gray8", 321, 239, out_width=96, out_height=96, fit="crop"),
        image("rgba_hwc", "rgba8", 500, 300, out_width=200, out_height=100, layout="hwc"),
        image("rgb_letterbox", "rgb8", 1280, 720, out_width=640, out_height=640,
              fit="letterbox", pad_value=114),
        image("nv12_crop", "nv12", 1920, 1080, matrix="bt709", out_width=224, out_height=224,
              fit="crop", **IMAGENET),
        spec("mel_ln", samples=16000, n_fft=400, hop=160, n_mels=64, log="ln"),
        spec("mel_db_slaney", samples=22050, sample_rate=22050, n_fft=1024, hop=256, n_mels=80,
             f_min=20, f_max=8000, mel_scale="slaney", mel_norm="slaney", log="db"),
        spec("power", samples=8000, n_fft=512, hop=128),
        spec("magnitude_db", samples=8000, n_fft=255, hop=100, center=False, power=1, log="db"),
        spec("float_mel", sample_format="float32", samples=16000, n_fft=400, hop=160,
             n_mels=40, log="ln", eps=1e-6),
    ],
}

RNG = np.random.default_rng(34)


def torchvision_pipeline(chw_u8, size, fit, antialias, normalise):
    """uint8 CHW on the GPU through torchvision.transforms.v2's functions, in
    float64 (the module's docstring says why)."""
    x = TF.to_dtype(chw_u8, torch.float64, scale=True)
    if fit == "crop":
        x = TF.resize(x, [min(size)], antialias=antialias)
        x = TF.center_crop(x, list(size))
    else:
        x = TF.resize(x, list(size), antialias=antialias)
    if normalise:
        x = TF.normalize(x, MEAN, STD)
    return x


class MediaTorchTest(DaemonTestCase):
    CONFIG = CONFIG

    def assert_close(self, name, got, want, tol):
        got = np.asarray(got, dtype=np.float64)
        want = np.asarray(want, dtype=np.float64)
        self.assertEqual(got.shape, want.shape, name)
        worst = float(np.abs(got - want).max())
        print("%s: largest |difference| %.3g (tolerance %.3g)" % (name, worst, tol))
        self.assertLessEqual(worst, tol, name)

    def run_image(self, name, frame):
        return np.asarray(self.client().process(name, frame))

    def test_rgb_crop_and_stretch(self):
        for name, w, h, size, fit, aa, norm in [
                ("rgb_crop", 1920, 1080, (224, 224), "crop", True, True),
                ("rgb_crop_sd", 640, 480, (224, 224), "crop", True, True),
                ("rgb_stretch_plain", 333, 251, (96, 128), "stretch", False, True),
                ("rgb_up", 45, 33, (120, 160), "stretch", True, False)]:
            img = RNG.integers(0, 256, (h, w, 3), dtype=np.uint8)
            got = self.run_image(name, img)
            want = torchvision_pipeline(torch.from_numpy(img).permute(2, 0, 1).cuda(), size, fit,
                                        aa, norm)
            self.assert_close(name, got, want.cpu().numpy(),
                              image_tol(w, h, size, fit, aa, norm))

    def test_bgr_gray_rgba(self):
        img = RNG.integers(0, 256, (600, 800, 3), dtype=np.uint8)
        got = self.run_image("bgr_crop_f16", img)
        self.assertEqual(got.dtype, np.float16)
        want = torchvision_pipeline(torch.from_numpy(img[:, :, ::-1].copy()).permute(2, 0, 1)
                                    .cuda(), (224, 224), "crop", True, True)
        self.assert_close("bgr_crop_f16", got, want.cpu().numpy(),
                          image_tol(800, 600, (224, 224), "crop", True, True, half=True))

        gray = RNG.integers(0, 256, (239, 321), dtype=np.uint8)
        got = self.run_image("gray_crop", gray)
        three = torch.from_numpy(gray).cuda().unsqueeze(0).expand(3, -1, -1).contiguous()
        want = torchvision_pipeline(three, (96, 96), "crop", True, False)
        self.assert_close("gray_crop", got, want.cpu().numpy(),
                          image_tol(321, 239, (96, 96), "crop", True, False))
        self.assertTrue(np.array_equal(got[0], got[1]) and np.array_equal(got[0], got[2]))

        rgba = RNG.integers(0, 256, (300, 500, 4), dtype=np.uint8)
        got = self.run_image("rgba_hwc", rgba)
        want = torchvision_pipeline(torch.from_numpy(rgba[:, :, :3].copy()).permute(2, 0, 1)
                                    .cuda(), (100, 200), "stretch", True, False)
        self.assert_close("rgba_hwc", got, want.permute(1, 2, 0).cpu().numpy(),
                          image_tol(500, 300, (100, 200), "stretch", True, False))

    def test_letterbox(self):
        img = RNG.integers(0, 256, (720, 1280, 3), dtype=np.uint8)
        got = self.run_image("rgb_letterbox", img)
        inner = torchvision_pipeline(torch.from_numpy(img).permute(2, 0, 1).cuda(), (360, 640),
                                     "stretch", True, False)
        want = torch.full((3, 640, 640), 114 / 255.0, dtype=torch.float64, device="cuda")
        want[:, 140:500, :] = inner
        self.assert_close("rgb_letterbox", got, want.cpu().numpy(),
                          image_tol(1280, 720, (360, 640), "stretch", True, False))

    def test_nv12_bt709(self):
        w, h = 1920, 1080
        frame = RNG.integers(0, 256, w * h * 3 // 2, dtype=np.uint8)
        got = self.run_image("nv12_crop", frame)
        t = torch.from_numpy(frame).cuda().double()
        y = t[:w * h].reshape(h, w)
        uv = t[w * h:].reshape(h // 2, w // 2, 2)
        u = uv[..., 0].repeat_interleave(2, 0).repeat_interleave(2, 1)
        v = uv[..., 1].repeat_interleave(2, 0).repeat_interleave(2, 1)
        kr, kb = 0.2126, 0.0722
        kg = 1 - kr - kb
        yy = (y - 16) * (255 / 219)
        cb, cr = (u - 128) * (255 / 224), (v - 128) * (255 / 224)
        rgb = torch.stack([yy + 2 * (1 - kr) * cr,
                           yy - 2 * kb * (1 - kb) / kg * cb - 2 * kr * (1 - kr) / kg * cr,
                           yy + 2 * (1 - kb) * cb]).clamp(0, 255)
        x = TF.resize(rgb / 255.0, [224], antialias=True)
        x = TF.normalize(TF.center_crop(x, [224, 224]), MEAN, STD)
        self.assert_close("nv12_crop", got, x.cpu().numpy(),
                          image_tol(w, h, (224, 224), "crop", True, True, yuv=yuv_rounds(kr, kb)))

    def check_spec(self, name, samples, want_fn, float_input=False):
        if float_input:
            x = RNG.uniform(-1, 1, samples).astype(np.float32)
            wave = torch.from_numpy(x).cuda()
        else:
            x = RNG.integers(-32768, 32768, samples, dtype=np.int16)
            wave = torch.from_numpy(x.astype(np.float32) / 32768.0).cuda()
        got = np.asarray(self.client().process(name, x), dtype=np.float64)
        want = want_fn(wave).cpu().double().numpy()
        self.assertEqual(got.shape, want.shape, name)
        ratio = float((np.abs(got - want) / (SPEC_ABS + SPEC_REL * np.abs(want))).max())
        print("%s: largest |difference| / tolerance %.3g" % (name, ratio))
        self.assertLessEqual(ratio, 1.0, name)

    def test_spectrograms_against_torchaudio(self):
        T = torchaudio.transforms
        mel = T.MelSpectrogram(sample_rate=16000, n_fft=400, hop_length=160, n_mels=64,
                               power=2.0).cuda()
        self.check_spec("mel_ln", 16000, lambda w: torch.log(torch.clamp(mel(w), min=1e-10)))
        slaney = T.MelSpectrogram(sample_rate=22050, n_fft=1024, hop_length=256, n_mels=80,
                                  f_min=20, f_max=8000, mel_scale="slaney", norm="slaney").cuda()
        db = T.AmplitudeToDB(stype="power").cuda()
        self.check_spec("mel_db_slaney", 22050, lambda w: db(slaney(w)))
        power = T.Spectrogram(n_fft=512, hop_length=128, power=2.0).cuda()
        self.check_spec("power", 8000, power)
        mag = T.Spectrogram(n_fft=255, hop_length=100, power=1.0, center=False).cuda()
        db_mag = T.AmplitudeToDB(stype="magnitude").cuda()
        self.check_spec("magnitude_db", 8000, lambda w: db_mag(mag(w)))
        mel40 = T.MelSpectrogram(sample_rate=16000, n_fft=400, hop_length=160, n_mels=40).cuda()
        self.check_spec("float_mel", 16000, lambda w: torch.log(torch.clamp(mel40(w), min=1e-6)),
                        float_input=True)


if __name__ == "__main__":
    if not HAVE_TORCH:
        print("SKIP: %s" % WHY_NOT)
        sys.exit(support.SKIP_CODE)
    support.main()
