# SPDX-License-Identifier: MIT
"""What the Python package's tests share: a real gpuframed on a temporary socket,
the pipelines' C references redone in NumPy, and the comparison rules of
kernels/registry.c.

The daemon is started the way tests/testutil.c starts it: a temporary directory
holding the configuration, the socket and the log; ``--engine`` from
$GF_TEST_ENGINE (cpu unless it says cuda); the binary from $GF_TEST_DAEMON (ctest
sets it) or the build tree's build/gpuframed.  Every limit is multiplied by
$GF_TEST_TIMEOUT_SCALE (ctest sets 4 under sanitizers, as for the C suites).
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Exit status by which a suite tells ctest it skipped (tests/CMakeLists.txt).
SKIP_CODE = 77
TIMEOUT_SCALE = float(os.environ.get("GF_TEST_TIMEOUT_SCALE") or 1)
# How long a daemon may take to accept its first connection, and to exit
# after SIGTERM (tests/testutil.h's GF_TEST_START/STOP_TIMEOUT_MS).
START_TIMEOUT_S = 30.0 * TIMEOUT_SCALE
# A start-up that takes longer than this prints its log's last line, and
# again after as long again.
START_PROGRESS_S = 15.0
STOP_TIMEOUT_S = 30.0 * TIMEOUT_SCALE
# The client timeout of every test: a hung daemon fails the test instead of
# hanging it (GF_TEST_REPLY_TIMEOUT_MS).
REPLY_TIMEOUT_S = 30.0 * TIMEOUT_SCALE
# Log lines that mean the daemon failed (testutil.c, is_failure_line).
FAILURE_MARKS = ("]: error: ", "]: warn: ", "Sanitizer", "runtime error:", "Assertion")

# The pipelines the suites against a daemon configure, in this order: every
# kind once, an RGB image of RGB_W x RGB_H, and a second affine with other
# parameters.  A list of configuration entries, as "pipelines" takes them.
RGB_W, RGB_H = 64, 48
PIPELINES = [
    {"name": "echo", "kind": "echo"},
    {"name": "scale", "kind": "affine", "params": {"a": 1.5, "b": -0.25}},
    {"name": "wobble", "kind": "sincos", "params": {"iters": 16}},
    {"name": "rgb", "kind": "normalize_u8",
     "params": {"width": RGB_W, "height": RGB_H,
                "mean": [0.5, 0.25, 0.125], "std": [0.2, 0.3, 0.7]}},
    {"name": "shift", "kind": "affine", "params": {"a": -3.0, "b": 1000.0}},
]

# ---- the daemon ------------------------------------------------------------


def daemon_path():
    """The gpuframed binary: $GF_TEST_DAEMON, else the build tree's."""
    return os.environ.get("GF_TEST_DAEMON") or os.path.join(REPO, "build", "gpuframed")


def engine():
    """The engine the suite runs its daemons on: $GF_TEST_ENGINE or cpu.
    Raises unittest.SkipTest for cuda without an NVIDIA device node, and
    ValueError for anything but cpu or cuda."""
    e = os.environ.get("GF_TEST_ENGINE") or "cpu"
    if e not in ("cpu", "cuda"):
        raise ValueError("GF_TEST_ENGINE must be cpu or cuda, not %r" % e)
    if e == "cuda" and not os.path.exists("/dev/nvidiactl"):
        raise unittest.SkipTest(
            "no NVIDIA device node (/dev/nvidiactl); the cuda engine cannot run here")
    return e


def main():
    """main() of a suite that starts daemons: ctest sees exit 77 where the
    engine cannot run here (as gf_test_suite_engine), else unittest's result."""
    try:
        engine()
    except unittest.SkipTest as e:
        print("SKIP: %s" % e)
        sys.exit(SKIP_CODE)
    unittest.main(verbosity=2)


class Daemon:
    """One gpuframed process on a temporary socket, started by ``start()``.

    ``config`` is the configuration as a dict (socket and engine come from
    the command line).  ``stop()`` sends SIGTERM and returns the exit status;
    ``failures()`` lists the log's failure lines.  Used as a context manager
    it starts and stops, and leaves nothing behind.
    """

    def __init__(self, config, engine_name=None):
        self.config = config
        self.engine = engine_name or engine()
        self.dir = None
        self.proc = None
        self.socket_path = None
        self.log_path = None

    def start(self):
        # Short: the socket's path must fit sun_path (108 bytes).
        base = os.environ.get("TMPDIR") or "/tmp"
        if len(base) > 60:
            base = "/tmp"
        self.dir = tempfile.mkdtemp(prefix="gfpytest.", dir=base)
        config_path = os.path.join(self.dir, "gpuframed.json")
        self.socket_path = os.path.join(self.dir, "s.sock")
        self.log_path = os.path.join(self.dir, "daemon.log")
        with open(config_path, "w") as f:
            json.dump(self.config, f)
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [daemon_path(), "--config", config_path, "--socket", self.socket_path,
                 "--engine", self.engine],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        t0 = time.monotonic()
        deadline, next_say = t0 + START_TIMEOUT_S, t0 + START_PROGRESS_S
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError("gpuframed exited with %s during start-up, after %.1f s; "
                                   "log:\n%s" % (self.proc.returncode, time.monotonic() - t0,
                                                  self.log_tail()))
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(self.socket_path)
                return self
            except OSError:
                now = time.monotonic()
                if now > deadline:
                    self.proc.kill()
                    self.proc.wait()
                    raise RuntimeError("gpuframed did not listen within %g s; log:\n%s"
                                       % (START_TIMEOUT_S, self.log_tail()))
                if now > next_say:  # a long start-up (a GPU's plugins) says where it is
                    print("gpuframed still starting after %.0f s; its log's last line: %s"
                          % (now - t0, self.log_tail(1)), flush=True)
                    next_say += START_PROGRESS_S
                time.sleep(0.01)
            finally:
                s.close()

    def stop(self):
        """SIGTERM, then SIGKILL after STOP_TIMEOUT_S.  Returns the exit
        status (negative: the signal that killed it)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def log_tail(self, lines=30):
        return "\n".join(self.log().splitlines()[-lines:])

    def failures(self):
        """The log's lines that report a failure: error or warn level,
        sanitizer reports, failed assertions."""
        return [l for l in self.log().splitlines() if any(m in l for m in FAILURE_MARKS)]

    def cleanup(self):
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        self.cleanup()


class DaemonTestCase(unittest.TestCase):
    """A test class with one daemon of CONFIG for all its tests, stopped at
    the end with a check that it exited 0 and logged no failure."""

    CONFIG = None

    @classmethod
    def setUpClass(cls):
        cls.daemon = Daemon(cls.CONFIG).start()

    @classmethod
    def tearDownClass(cls):
        d = cls.daemon
        try:
            status = d.stop()
            log = d.log_tail()
            failures = d.failures()
        finally:
            d.cleanup()
        if status != 0:
            raise AssertionError("gpuframed exited with %s after SIGTERM; log:\n%s"
                                 % (status, log))
        if failures:
            raise AssertionError("gpuframed logged failures:\n%s" % "\n".join(failures))

    def client(self, **kw):
        import gpuframe
        kw.setdefault("timeout", REPLY_TIMEOUT_S)
        c = gpuframe.Client(self.daemon.socket_path, **kw)
        self.addCleanup(c.close)
        return c


# ---- the C references in NumPy ---------------------------------------------------
#
# Each mirrors kernels/<kind>_ref.c operation for operation in float32, each
# operation rounded on its own (the references are built with
# -ffp-contract=off; NumPy never fuses).  sinf/cosf are sin/cos in double
# rounded to float32, i.e. correctly rounded, which glibc's are within an ulp.

F32 = np.dtype("<f4")


def ref_echo(params, data):
    """The input's bytes (an array's in C order; bytes() of a 0-d array would
    be that many zero bytes)."""
    if isinstance(data, np.ndarray):
        return data.tobytes()
    return bytes(data)


def ref_affine(params, x):
    """gf_affine_ref: y = a*x, then y + b, in float32."""
    a, b = np.float32(params["a"]), np.float32(params["b"])
    with np.errstate(over="ignore", invalid="ignore"):  # inf, as in C
        y = np.multiply(x.astype(F32, copy=False), a, dtype=F32)
        return np.add(y, b, dtype=F32)


def ref_sincos(params, x):
    """gf_sincos_ref: iters times v = sinf(v)*cosf(v) + v, in float32."""
    v = x.astype(F32, copy=True)
    with np.errstate(invalid="ignore"):  # sin(inf) is NaN, as in C
        for _ in range(int(params["iters"])):
            d = v.astype(np.float64)
            s = np.sin(d).astype(F32)
            c = np.cos(d).astype(F32)
            v = np.add(np.multiply(s, c, dtype=F32), v, dtype=F32)
    return v


def ref_normalize_u8(params, rgb):
    """gf_normalize_u8_ref: plane c = (in/255 - mean[c]) / std[c], in float32."""
    w, h = int(params["width"]), int(params["height"])
    pix = np.asarray(rgb, np.uint8).reshape(h * w, 3).astype(F32)
    out = np.empty((3, h, w), F32)
    for c in range(3):
        v = np.divide(pix[:, c], np.float32(255.0), dtype=F32)
        v = np.subtract(v, np.float32(params["mean"][c]), dtype=F32)
        v = np.divide(v, np.float32(params["std"][c]), dtype=F32)
        out[c] = v.reshape(h, w)
    return out


def ref_mlp(weights_path, x, softmax):
    """plugins/mlp's reference: each row of x (float32 vectors of dims[0])
    through the network in weights_path (plugins/mlp/README.md, "Weights
    file"), in double, ReLU after every layer but the last, softmax at the
    end when asked; float32 rows of dims[-1]."""
    with open(weights_path, "rb") as f:
        data = f.read()
    layers = int(np.frombuffer(data, "<u4", 1, 8)[0])
    dims = [int(n) for n in np.frombuffer(data, "<u4", layers + 1, 12)]
    off = 16 + 4 * layers
    v = np.asarray(x, F32).reshape(-1, dims[0]).astype(np.float64)
    for l in range(layers):
        w = np.frombuffer(data, "<f4", dims[l + 1] * dims[l], off).reshape(dims[l + 1], dims[l])
        off += 4 * w.size
        b = np.frombuffer(data, "<f4", dims[l + 1], off)
        off += 4 * b.size
        v = v @ w.astype(np.float64).T + b
        if l + 1 < layers:
            v = np.maximum(v, 0.0)
    if softmax:
        e = np.exp(v - v.max(axis=1, keepdims=True))
        v = e / e.sum(axis=1, keepdims=True)
    return v.astype(F32)


REFERENCES = {
    "echo": ref_echo,
    "affine": ref_affine,
    "sincos": ref_sincos,
    "normalize_u8": ref_normalize_u8,
}

# kernels/registry.c: echo, affine and normalize_u8 are exact (.exact = 1,
# compared byte for byte); sincos within |got - ref| <= abs + rel*|ref|
# (SINCOS_ABS_TOLERANCE, SINCOS_REL_TOLERANCE).
SINCOS_ABS_TOLERANCE = 5e-5
SINCOS_REL_TOLERANCE = 5e-5
EXACT_KINDS = ("echo", "affine", "normalize_u8")


def mismatch(kind, got, ref):
    """Why ``got`` does not match the reference ``ref`` under kind's rule
    (gf_pipeline_compare), or None when it does."""
    g = np.frombuffer(memoryview(got).cast("B") if not isinstance(got, np.ndarray)
                      else got.tobytes(), np.uint8)
    r = np.frombuffer(ref if not isinstance(ref, np.ndarray) else ref.tobytes(), np.uint8)
    if g.size != r.size:
        return "%d bytes, expected %d" % (g.size, r.size)
    if kind in EXACT_KINDS:
        diff = np.flatnonzero(g != r)
        if diff.size:
            i = diff[0]
            return "byte offset %d differs: got 0x%02x, expected 0x%02x (%d bytes differ)" % (
                i, g[i], r[i], diff.size)
        return None
    gf, rf = g.view(F32).astype(np.float64), r.view(F32).astype(np.float64)
    with np.errstate(invalid="ignore"):
        same = (gf == rf) | (np.isnan(gf) & np.isnan(rf))
        tol = SINCOS_ABS_TOLERANCE + SINCOS_REL_TOLERANCE * np.abs(rf)
        ok = same | (~np.isinf(rf) & (np.abs(gf - rf) <= tol))
    bad = np.flatnonzero(~ok)
    if bad.size:
        i = bad[0]
        return "element %d: got %.9g, expected %.9g (%d elements outside tolerance)" % (
            i, gf[i], rf[i], bad.size)
    return None


# Float values the float pipelines must carry through like any other.
SPECIAL_F32 = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, 1e30, -1e30, 1e-40, -1e-40,
                        np.finfo(np.float32).max, np.finfo(np.float32).tiny], F32)


def open_fds():
    """How many file descriptors this process holds (/proc/self/fd)."""
    return len(os.listdir("/proc/self/fd"))


def random_f32(rng, count):
    """float32 values uniform in [-4, 4], none exactly 0 (gf_test_fill_input)."""
    x = rng.uniform(-4.0, 4.0, count).astype(F32)
    x[x == 0] = 0.25
    return x
