# SPDX-License-Identifier: MIT
"""The package against a real gpuframed (the CPU engine unless $GF_TEST_ENGINE
says cuda): every pipeline streamed and checked against the NumPy copies of
the C references under kernels/registry.c's rules, windows far larger than
the slots and the socket buffers, thousands of frames, the ERROR statuses a
client can cause with their exact codes, STATS counters to the frame, and the
TRACE document's shape."""

import os
import time
import unittest

import numpy as np

import gpuframe
import support
from support import (F32, PIPELINES, REFERENCES, RGB_H, RGB_W, SPECIAL_F32, DaemonTestCase,
                     mismatch, random_f32)

MAX_FRAME_BYTES = 1 << 20
TRACE_FRAMES = 32
SLOTS = 2

CONFIG = {
    "slots": SLOTS,
    "max_frame_bytes": MAX_FRAME_BYTES,
    "trace_frames": TRACE_FRAMES,
    "log_level": "info",
    "pipelines": PIPELINES,
}


def wait_idle(c, open_connections, timeout_s=10.0):
    """Polls STATS until no slot is busy and `open_connections` connections
    are open (gf_test_wait_idle); returns the last STATS and how many STATS
    requests it sent."""
    deadline = time.monotonic() + timeout_s * support.TIMEOUT_SCALE
    sent = 0
    while True:
        s = c.stats()
        sent += 1
        slots = s["slots"]
        if slots["free"] == slots["count"] and slots["in_flight"] == 0 \
                and s["connections"]["open"] == open_connections:
            return s, sent
        if time.monotonic() > deadline:
            raise AssertionError("daemon not idle: slots %r, connections %r"
                                 % (slots, s["connections"]))
        time.sleep(0.02)


class StreamTest(DaemonTestCase):
    CONFIG = CONFIG

    def setUp(self):
        self.c = self.client()
        self.pipelines = self.c.list()
        self.rng = np.random.default_rng(12)

    def assert_results(self, name, frames, results):
        """Every result matches its frame's reference under the kind's rule."""
        p = self.pipelines[name]
        self.assertEqual(len(results), len(frames))
        for i, (frame, got) in enumerate(zip(frames, results)):
            ref = REFERENCES[p.kind](p.params, frame)
            why = mismatch(p.kind, got, ref)
            self.assertIsNone(why, "%s frame %d of %d: %s" % (name, i, len(frames), why))

    def test_list_is_the_configuration(self):
        p = self.pipelines
        self.assertEqual(p.ids, {e["name"]: i for i, e in enumerate(CONFIG["pipelines"])})
        for entry, got in zip(CONFIG["pipelines"], p):
            self.assertEqual(got.kind, entry["kind"])
            self.assertTrue(got.doc)
            for key, value in entry.get("params", {}).items():
                # Floats are float32 in the daemon; LIST shows them so that
                # they read back to the same float32.
                np.testing.assert_array_equal(np.float32(got.params[key]), np.float32(value),
                                              err_msg="%s.%s" % (entry["name"], key))
        self.assertEqual(p["wobble"].params, {"iters": 16})
        self.assertEqual(p["rgb"].input_bytes, RGB_W * RGB_H * 3)

    def test_list_describes_every_pipelines_frames(self):
        T = gpuframe.TensorSpec
        f32, u8 = (T("float32", (-1,)),), (T("uint8", (-1,)),)
        want = {"echo": (u8, u8), "scale": (f32, f32), "wobble": (f32, f32), "shift": (f32, f32),
                "rgb": ((T("uint8", (RGB_H, RGB_W, 3)),), (T("float32", (3, RGB_H, RGB_W)),))}
        for p in self.pipelines:
            self.assertEqual((p.inputs, p.outputs), want[p.name], p.name)
            # What the daemon sent, to the byte's meaning: -1 for the length's.
            self.assertEqual(p.info["inputs"], [{"dtype": t.dtype_name, "shape": list(t.shape)}
                                                for t in want[p.name][0]])
        self.assertEqual(self.pipelines["rgb"].output_bytes(RGB_W * RGB_H * 3),
                         RGB_W * RGB_H * 3 * 4)

    def test_echo_returns_the_exact_bytes_of_every_length(self):
        lengths = [0, 1, 3, 4, 31, 4096, 16 * 1024, 16 * 1024 + 1, 100003, MAX_FRAME_BYTES]
        frames = [self.rng.integers(0, 256, n, dtype=np.uint8).tobytes() for n in lengths]
        for window in (1, 4):
            results = self.c.map("echo", frames, window)
            self.assertTrue(all(type(r) is bytearray for r in results))
            self.assert_results("echo", frames, results)

    def test_echo_arrays_keep_dtype_and_shape(self):
        frames = [
            np.arange(105, dtype=np.uint16).reshape(3, 5, 7),
            self.rng.standard_normal(10),
            np.zeros((0, 4), np.int8),
            (self.rng.standard_normal((4, 4)) + 1j).astype(np.complex64),
            np.arange(100, dtype=">i4").reshape(10, 10)[::2, 1::3],  # strided, big-endian
            np.array(7, np.int64),
        ]
        results = self.c.map("echo", frames)
        for frame, got in zip(frames, results):
            self.assertEqual((got.dtype, got.shape), (frame.dtype, frame.shape))
            np.testing.assert_array_equal(got, frame)

    def test_affine_is_bit_exact(self):
        frames = [random_f32(self.rng, 1000), random_f32(self.rng, 32 * 64).reshape(32, 64),
                  np.zeros(0, F32), SPECIAL_F32, random_f32(self.rng, 256 * 1024)]
        for name in ("scale", "shift"):
            for window in (1, 16):
                results = self.c.map(name, frames, window)
                for frame, got in zip(frames, results):
                    self.assertEqual((got.dtype, got.shape), (F32, frame.shape))
                self.assert_results(name, frames, results)

    def test_affine_carries_nan_through(self):
        x = np.array([np.nan, 1.0, -np.nan, 2.0], F32)
        got = self.c.process("scale", x)
        np.testing.assert_array_equal(np.isnan(got), [True, False, True, False])
        np.testing.assert_array_equal(got[[1, 3]], np.float32([1.25, 2.75]))

    def test_sincos_within_the_registry_tolerance(self):
        near_pi = (np.float32(np.pi) + np.arange(-512, 512, dtype=F32) * np.float32(1e-5))
        frames = [random_f32(self.rng, 4096) for _ in range(12)]
        frames += [near_pi, -near_pi, SPECIAL_F32, np.zeros(0, F32),
                   self.rng.uniform(-1e4, 1e4, 2048).astype(F32)]
        results = self.c.map("wobble", frames, window=8)
        self.assert_results("wobble", frames, results)
        # Bytes in, bytes out, the same values.
        raw = self.c.process("wobble", frames[0].tobytes())
        self.assertIsInstance(raw, bytearray)
        np.testing.assert_array_equal(np.frombuffer(raw, F32), results[0])

    def test_normalize_u8_is_bit_exact_planes(self):
        images = [self.rng.integers(0, 256, (RGB_H, RGB_W, 3), dtype=np.uint8)
                  for _ in range(10)]
        images.append(np.arange(RGB_W * RGB_H * 3, dtype=np.uint64).astype(np.uint8))  # flat
        results = self.c.map("rgb", images, window=16)
        for got in results:
            self.assertEqual((got.dtype, got.shape), (F32, (3, RGB_H, RGB_W)))
        self.assert_results("rgb", images, results)
        # The planes are R, G, B of pixel (y, x): spot-check one by hand.
        y, x = 5, 7
        for ch, (mean, std) in enumerate(zip([0.5, 0.25, 0.125], [0.2, 0.3, 0.7])):
            v = np.float32(images[0][y, x, ch]) / np.float32(255)
            self.assertEqual(results[0][ch, y, x], (v - np.float32(mean)) / np.float32(std))

    def test_window_far_larger_than_the_slots_and_the_socket_buffers(self):
        # 64 frames of 512 KiB in flight is 32 MiB each way against 2 slots
        # and a few hundred KiB of socket buffers: a client that wrote its
        # window before reading would block for ever (PROTOCOL.md).
        pool = [self.rng.integers(0, 256, 512 * 1024, dtype=np.uint8) for _ in range(5)]
        frames = [pool[i % len(pool)] for i in range(80)]
        results = self.c.map("echo", frames, window=64)
        self.assert_results("echo", frames, results)
        floats = [random_f32(self.rng, 64 * 1024) for _ in range(30)]
        self.assert_results("scale", floats, self.c.map("scale", floats, window=32))
        self.assertEqual(self.c.in_flight, 0)

    def test_many_small_frames(self):
        pool = [self.rng.integers(0, 256, int(n), dtype=np.uint8).tobytes()
                for n in self.rng.integers(0, 512, 97)]
        frames = [pool[i % len(pool)] for i in range(5000)]
        self.assert_results("echo", frames, self.c.map("echo", frames, window=16))
        floats = [random_f32(self.rng, 64) for _ in range(61)]
        frames = [floats[i % len(floats)] for i in range(2000)]
        self.assert_results("scale", frames, self.c.map("scale", frames, window=16))

    def test_window_bounds_what_is_in_flight(self):
        window = 5
        pulled = []

        def frames():
            for i in range(40):
                pulled.append(i)
                yield np.full(100, i, np.uint8)
        for k, got in enumerate(self.c.stream("echo", frames(), window)):
            self.assertEqual(got.tolist(), [k] * 100)
            # Result k is out; at most frames k+1 .. k+window-1 are in flight.
            self.assertLessEqual(len(pulled), k + window)
            self.assertLessEqual(self.c.in_flight, window - 1)
        self.assertEqual(len(pulled), 40)

    def test_requests_mix_with_a_suspended_stream(self):
        frames = [np.full(1000, i, np.uint8) for i in range(10)]
        gen = self.c.stream("echo", frames, window=4)
        first = [next(gen), next(gen)]
        stats = self.c.stats()  # answered after the frames already sent
        self.assertEqual(stats["engine"], self.daemon.engine)
        self.assertEqual(self.c.list().names, self.pipelines.names)
        rest = list(gen)
        self.assert_results("echo", frames, first + rest)

    def test_an_abandoned_stream_leaves_the_connection_usable(self):
        frames = [np.full(20000, i, np.uint8) for i in range(20)]
        for k, got in enumerate(self.c.stream("echo", frames, window=8)):
            if k == 3:
                break
        self.assertEqual(len(self.c.list()), len(CONFIG["pipelines"]))
        self.assertEqual(self.c.in_flight, 0)
        self.assertEqual(self.c.process("echo", b"after"), b"after")

    def test_unknown_pipeline_fails_that_frame_only(self):
        frame_id = self.c.next_frame_id
        with self.assertRaises(gpuframe.UnknownPipelineError) as cm:
            self.c.process(99, b"abcd")
        e = cm.exception
        self.assertEqual((e.status, e.name, e.fatal, e.frame_id, e.pipeline_id, e.index),
                         (6, "unknown_pipeline", False, frame_id, 99, 0))
        self.assertTrue(e.text)
        self.assertFalse(self.c.closed)
        self.assertEqual(self.c.process("echo", b"still here"), b"still here")

    def test_bad_length_fails_that_frame_only(self):
        cases = [("scale", b"123456"), ("wobble", b"1"), ("rgb", b""),
                 ("rgb", np.zeros((RGB_H, RGB_W - 1, 3), np.uint8))]
        for name, frame in cases:
            with self.subTest(name):
                with self.assertRaises(gpuframe.BadLengthError) as cm:
                    self.c.process(name, frame)
                e = cm.exception
                self.assertEqual((e.status, e.name, e.fatal, e.pipeline_id),
                                 (7, "bad_length", False, self.pipelines[name].id))
                self.assertFalse(self.c.closed)
        good = random_f32(self.rng, 10)
        self.assert_results("scale", [good], [self.c.process("scale", good)])

    def test_errors_yield_in_place(self):
        g = [random_f32(self.rng, 100) for _ in range(3)]
        out = self.c.map("scale", [g[0], b"12345", g[1], b"", g[2]], window=4, errors="yield")
        self.assertIsInstance(out[1], gpuframe.BadLengthError)
        self.assertEqual((out[1].status, out[1].index), (7, 1))
        self.assertEqual(out[3], bytearray())  # 0 bytes is a valid float32 array
        self.assert_results("scale", g, [out[0], out[2], out[4]])

    def test_frame_options_send_deadlines(self):
        """Frames after set_frame_options carry their deadline (protocol 3):
        one of a minute runs, exact; one of a nanosecond has passed when the
        daemon reads it and is answered deadline_exceeded in its place, the
        stream going on; plain frames again after the options are cleared."""
        g = [random_f32(self.rng, 64) for _ in range(6)]
        before = self.c.stats()["rejected"]["deadline_exceeded"]
        self.c.set_frame_options(deadline=60)
        self.assert_results("scale", g, self.c.map("scale", g, window=4))
        self.c.set_frame_options(deadline=1e-9)
        out = self.c.map("scale", g[:3], window=4, errors="yield")
        for i, e in enumerate(out):
            self.assertIsInstance(e, gpuframe.DeadlineExceededError)
            self.assertEqual((e.status, e.name, e.index, e.fatal), (20, "deadline_exceeded", i,
                                                                     False))
        # Newest-frame-only with one frame in flight: nothing waits to be replaced.
        self.c.set_frame_options(latest_only=True)
        self.assert_results("scale", g, self.c.map("scale", g, window=1))
        # A class: version-3 frames, counted under it (no "priorities": at most normal).
        classes = self.c.stats()["priorities"]
        self.c.set_frame_options(priority="batch")
        self.assert_results("scale", g, self.c.map("scale", g, window=4))
        self.c.set_frame_options(priority="realtime")
        self.assert_results("scale", g, self.c.map("scale", g, window=4))
        now = self.c.stats()["priorities"]
        self.assertEqual(now["batch"]["frames"], classes["batch"]["frames"] + len(g))
        self.assertEqual(now["normal"]["frames"], classes["normal"]["frames"] + len(g))
        self.assertEqual(now["realtime"]["frames"], classes["realtime"]["frames"])
        with self.assertRaisesRegex(ValueError, "priority must be"):
            self.c.set_frame_options(priority="urgent")
        self.c.set_frame_options()
        self.assert_results("scale", g, self.c.map("scale", g, window=4))
        self.assertEqual(self.c.stats()["rejected"]["deadline_exceeded"], before + 3)
        for bad in (0, -1, 1801):
            with self.assertRaisesRegex(ValueError, "deadline must be in"):
                self.c.set_frame_options(deadline=bad)

    def test_errors_raise_at_the_failed_frame(self):
        g = [random_f32(self.rng, 100) for _ in range(4)]
        got = []
        with self.assertRaises(gpuframe.BadLengthError) as cm:
            for r in self.c.stream("scale", [g[0], g[1], b"odd", g[2], g[3]], window=4):
                got.append(r)
        self.assertEqual(cm.exception.index, 2)
        self.assert_results("scale", g[:2], got)
        # The frames after it were sent; their replies are dropped here.
        self.assertEqual(self.c.stats()["engine"], self.daemon.engine)
        self.assertEqual(self.c.in_flight, 0)

    def test_client_side_refusals_send_nothing(self):
        with self.assertRaises(gpuframe.NoSuchPipelineError):
            self.c.stream("nope", [b"x"])
        frame_id = self.c.next_frame_id
        with self.assertRaisesRegex(TypeError, "float32"):
            self.c.process("scale", np.zeros(4))
        self.assertEqual((self.c.next_frame_id, self.c.in_flight), (frame_id, 0))

    def test_too_large_is_fatal_and_closes_the_connection(self):
        c = self.client()
        ok = [self.rng.integers(0, 256, 1000, dtype=np.uint8) for _ in range(3)]
        huge = np.zeros(MAX_FRAME_BYTES + 4, np.uint8)
        got = []
        with self.assertRaises(gpuframe.TooLargeError) as cm:
            for r in c.stream("echo", [ok[0], ok[1], huge, ok[2]], window=4, errors="yield"):
                got.append(r)
        e = cm.exception
        self.assertEqual((e.status, e.name, e.fatal, e.index), (5, "too_large", True, 2))
        self.assertIsInstance(e, gpuframe.FatalStatusError)
        self.assert_results("echo", ok[:2], got)
        self.assertTrue(c.closed)
        with self.assertRaises(gpuframe.ConnectionClosedError) as cm:
            c.stats()
        self.assertIs(cm.exception.cause.cause, e)
        # Other connections are not affected.
        self.assertEqual(self.c.process("echo", b"fine"), b"fine")

    def test_trace_has_the_last_frames_in_order(self):
        c = self.client()
        c.list()  # the name lookup's LIST, which takes a frame_id too
        first = c.next_frame_id
        count = TRACE_FRAMES + 8
        c.map("echo", [bytes([i]) * 100 for i in range(count)], window=4)
        ids = list(range(first, first + count))
        tr = c.trace(5)
        self.assertEqual((tr["clock"], tr["engine"], tr["slots"]),
                         ("monotonic", self.daemon.engine, SLOTS))
        self.assertIsInstance(tr["t0_ns"], int)
        frames = tr["frames"]
        self.assertEqual([f["frame_id"] for f in frames], ids[-5:])
        self.assertEqual(len({f["conn"] for f in frames}), 1)
        stage_keys = ("arrived", "claimed", "submitted", "done", "drained", "written")
        for f in frames:
            self.assertEqual((f["pipeline"], f["status"], f["in_bytes"], f["out_bytes"]),
                             (0, 0, 100, 100))
            self.assertIn(f["slot"], range(SLOTS))
            times = [f[k] for k in stage_keys]
            self.assertEqual(times, sorted(times), "stages out of order: %r" % f)
            for stage in ("h2d", "kernel", "d2h"):
                span = f[stage]
                if self.daemon.engine == "cpu":
                    self.assertEqual(len(span), 2)
                    self.assertLessEqual(span[0], span[1])
                    if stage != "kernel":
                        self.assertEqual(span[0], span[1])  # no copies on the CPU
                else:
                    self.assertTrue(span is None or span[0] <= span[1])
        # 0: every frame the daemon keeps, its trace_frames; more is capped.
        self.assertEqual([f["frame_id"] for f in c.trace(0)["frames"]], ids[-TRACE_FRAMES:])
        self.assertEqual(len(c.trace(TRACE_FRAMES * 10)["frames"]), TRACE_FRAMES)


class StatsTest(DaemonTestCase):
    """STATS counts every frame exactly (daemon/STATS.md); a daemon of its own,
    so that no other test's frames are counted."""

    CONFIG = CONFIG

    def test_counters_count_every_frame(self):
        c = self.client()
        stats_sent = 0

        s = c.stats()
        stats_sent += 1
        self.assertEqual(s["frames"], {"received": 0, "answered": 0, "failed": 0, "dropped": 0,
                                       "truncated": 0, "timed": 0, "results_evicted": 0,
                                       "parked": 0, "in_progress": 0})
        self.assertEqual(s["requests"], {"list": 0, "stats": stats_sent, "trace": 0})

        rng = np.random.default_rng(3)
        c.map("echo", [rng.integers(0, 256, 1000, dtype=np.uint8) for _ in range(37)], 8)
        c.map("scale", [random_f32(rng, 100) for _ in range(5)], 8)  # 400 bytes each
        s, n = wait_idle(c, 1)
        stats_sent += n
        answered = 42
        f = s["frames"]
        self.assertEqual((f["received"], f["answered"], f["failed"], f["dropped"],
                          f["truncated"], f["in_progress"]), (answered, answered, 0, 0, 0, 0))
        if s["engine"] == "cpu":
            self.assertEqual(f["timed"], answered)  # the CPU engine times every frame
        self.assertEqual(s["bytes"], {"in": 37 * 1000 + 5 * 400, "out": 37 * 1000 + 5 * 400})
        self.assertEqual({p["name"]: p["frames"] for p in s["pipelines"]},
                         {"echo": 37, "scale": 5, "wobble": 0, "rgb": 0, "shift": 0})
        echo = s["pipelines"][0]["phases"]
        self.assertEqual(echo["end_to_end"]["count"], 37)
        self.assertEqual(s["latency"]["count"], answered)
        self.assertEqual(sum(s["latency"]["counts"]), answered)
        self.assertEqual(s["requests"], {"list": 1, "stats": stats_sent, "trace": 0})
        self.assertEqual(set(s["rejected"].values()), {0})

        for pipeline, frame, error in ((99, b"x", gpuframe.UnknownPipelineError),
                                       ("scale", b"12345", gpuframe.BadLengthError),
                                       ("rgb", b"", gpuframe.BadLengthError)):
            with self.assertRaises(error):
                c.process(pipeline, frame)
        s, n = wait_idle(c, 1)
        stats_sent += n
        f = s["frames"]
        self.assertEqual((f["received"], f["answered"], f["failed"], f["in_progress"]),
                         (answered + 3, answered, 3, 0))
        self.assertEqual(f["received"], f["answered"] + f["failed"] + f["dropped"]
                         + f["truncated"] + f["in_progress"])
        rejected = dict.fromkeys(gpuframe.Status.__members__.keys(), 0)
        rejected = {name.lower(): 0 for name in rejected if name != "OK"}
        rejected.update(unknown_pipeline=1, bad_length=2)
        self.assertEqual(s["rejected"], rejected)

        # A fatal refusal on another connection: counted in rejected and
        # connections, not as a frame (its header was not accepted).
        c2 = self.client()
        with self.assertRaises(gpuframe.TooLargeError):
            c2.process("echo", bytes(MAX_FRAME_BYTES + 1))
        self.assertTrue(c2.closed)
        s, n = wait_idle(c, 1)
        stats_sent += n
        self.assertEqual(s["frames"]["received"], answered + 3)
        self.assertEqual(s["rejected"]["too_large"], 1)
        self.assertEqual(s["connections"]["rejected"], 1)
        self.assertEqual(s["connections"]["open"], 1)
        self.assertEqual(s["requests"], {"list": 2, "stats": stats_sent, "trace": 0})


PLUGIN_DIR = os.environ.get("GF_TEST_PLUGIN_DIR", "")
MLP_WEIGHTS = os.path.join(PLUGIN_DIR, "mlp-demo.gfw")


@unittest.skipUnless(PLUGIN_DIR, "GF_TEST_PLUGIN_DIR names no built plugins")
class TypedResultsTest(DaemonTestCase):
    """Pipelines this package knows only by their LIST entry (a chain, a
    plugin) give arrays of the dtype and shape it describes, checked against
    NumPy references: today's "classify" gives float32 (1, 10), not bytes."""

    CONFIG = {"slots": 2, "pipelines": [
        {"name": "classify", "stages": [
            {"kind": "normalize_u8", "params": {"width": 32, "height": 32}},
            {"kind": "plugin", "path": os.path.join(PLUGIN_DIR, "gf_mlp.so"),
             "params": {"weights": MLP_WEIGHTS, "softmax": 1}}]},
        {"name": "logits", "kind": "plugin", "path": os.path.join(PLUGIN_DIR, "gf_mlp.so"),
         "params": {"weights": MLP_WEIGHTS}},
        {"name": "scaled", "stages": [
            {"kind": "normalize_u8", "params": {"width": 4, "height": 2}},
            {"kind": "affine", "params": {"a": 2.0, "b": 1.0}}]},
    ]}

    # plugins/mlp/mlp.c: MLP_ABS_TOLERANCE, MLP_REL_TOLERANCE.
    MLP_TOLERANCE = 1e-5

    def setUp(self):
        self.c = self.client()
        self.pipelines = self.c.list()
        self.rng = np.random.default_rng(33)

    def test_list_describes_chains_and_plugins(self):
        T = gpuframe.TensorSpec
        p = self.pipelines
        self.assertEqual((p["classify"].inputs, p["classify"].outputs),
                         ((T("uint8", (32, 32, 3)),), (T("float32", (1, 10)),)))
        self.assertEqual((p["logits"].inputs, p["logits"].outputs),
                         ((T("float32", (-1, 3072)),), (T("float32", (-1, 10)),)))
        self.assertEqual((p["scaled"].inputs, p["scaled"].outputs),
                         ((T("uint8", (2, 4, 3)),), (T("float32", (24,)),)))
        self.assertEqual(p["classify"].output_bytes(32 * 32 * 3), 40)
        with self.assertRaisesRegex(ValueError, "takes frames of exactly 3072 bytes, not 3071"):
            p["classify"].output_bytes(3071)

    def test_list_shows_chains_and_plugins_parameters(self):
        p = self.pipelines
        self.assertEqual(p["scaled"].params["affine"], {"a": 2.0, "b": 1.0})
        self.assertEqual((p["scaled"].params["normalize_u8"]["width"],
                          p["scaled"].params["normalize_u8"]["height"]), (4, 2))
        self.assertEqual(sorted(p["classify"].params), ["mlp", "normalize_u8"])
        self.assertEqual(p["classify"].params["mlp"]["softmax"], 1)
        self.assertEqual(p["logits"].params["weights"], p["classify"].params["mlp"]["weights"])
        self.assertEqual([s.get("plugin", s["kind"]) for s in p["classify"].stages],
                         ["normalize_u8", "mlp"])
        self.assertEqual(p["classify"].stages[1]["path"], os.path.join(PLUGIN_DIR, "gf_mlp.so"))

    def test_classify_gives_float32_probabilities(self):
        images = [self.rng.integers(0, 256, (32, 32, 3), dtype=np.uint8) for _ in range(6)]
        results = self.c.map("classify", images, window=4)
        params = {"width": 32, "height": 32, "mean": [0.485, 0.456, 0.406],
                  "std": [0.229, 0.224, 0.225]}
        for image, got in zip(images, results):
            self.assertEqual((got.dtype, got.shape), (F32, (1, 10)))
            want = support.ref_mlp(MLP_WEIGHTS, REFERENCES["normalize_u8"](params, image), 1)
            np.testing.assert_allclose(got, want, rtol=self.MLP_TOLERANCE,
                                       atol=self.MLP_TOLERANCE)

    def test_logits_give_one_row_per_vector(self):
        for rows in (1, 3):
            x = random_f32(self.rng, rows * 3072).reshape(rows, 3072)
            got = self.c.process("logits", x)
            self.assertEqual((got.dtype, got.shape), (F32, (rows, 10)))
            np.testing.assert_allclose(got, support.ref_mlp(MLP_WEIGHTS, x, 0),
                                       rtol=self.MLP_TOLERANCE, atol=self.MLP_TOLERANCE)
        with self.assertRaisesRegex(TypeError, "takes float32 arrays, not uint8"):
            self.c.process("logits", np.zeros(3072, np.uint8))

    def test_chain_of_built_in_kinds_is_exact(self):
        image = self.rng.integers(0, 256, (2, 4, 3), dtype=np.uint8)
        got = self.c.process("scaled", image)
        params = {"width": 4, "height": 2, "mean": [0.485, 0.456, 0.406],
                  "std": [0.229, 0.224, 0.225]}
        want = REFERENCES["affine"]({"a": 2.0, "b": 1.0},
                                    REFERENCES["normalize_u8"](params, image).reshape(-1))
        self.assertEqual((got.dtype, got.shape), (F32, (24,)))
        self.assertEqual(got.tobytes(), want.tobytes())


if __name__ == "__main__":
    support.main()
