# SPDX-License-Identifier: MIT
"""Frames by reference through shared-memory regions (PROTOCOL.md,
"Shared-memory frames (version 2)") against a real gpuframed, the CPU engine
unless $GF_TEST_ENGINE says cuda:

- every pipeline by reference matches the NumPy references under
  kernels/registry.c's rules and the socket path's results, and its results
  are views of the region (writing the region changes them);
- socket and shm frames mix in one stream; a ring of window slots streams
  thousands of frames; frame buffers (client.frame_buffers) are filled in
  place and streamed, their layout libgpuframe's;
- each bad descriptor fails its frame with its exception, and the connection
  goes on; a removed region is unknown; bad regions, max_regions and
  max_shm_bytes are refused and the connection goes on; an fd with another
  request is fatal;
- the client's file descriptors and mappings return to their baseline.
"""

import mmap
import os
import time

import numpy as np

import gpuframe
import support
from gpuframe import protocol
from gpuframe.protocol import MsgType
from gpuframe.shm import REGION_SEALS, create_memfd
from support import (F32, PIPELINES, REFERENCES, RGB_H, RGB_W, SPECIAL_F32, DaemonTestCase,
                     mismatch, open_fds, random_f32)

MAX_FRAME_BYTES = 1 << 20
MAX_REGIONS = 3
MAX_SHM_BYTES = 16 << 20
# Room after every output that must stay untouched.
SENTINEL_BYTES = 64
SENTINEL = 0xEE

CONFIG = {
    "slots": 2,
    "max_frame_bytes": MAX_FRAME_BYTES,
    "max_regions": MAX_REGIONS,
    "max_shm_bytes": MAX_SHM_BYTES,
    "log_level": "info",
    "pipelines": PIPELINES,
}
RGB_BYTES = RGB_W * RGB_H * 3

# Linux's F_GET_SEALS and seals (fcntl.h), as gpuframe.shm falls back to them.
F_GET_SEALS = 1034
F_SEAL_SHRINK, F_SEAL_WRITE = 0x0002, 0x0008


class Layout:
    """Hands out ranges of a region one after the other, each at an odd
    offset (nothing needs alignment) with a sentinel gap after it."""

    def __init__(self, region):
        self.region = region
        self.next = 3

    def take(self, nbytes):
        offset = self.next
        self.next += nbytes + SENTINEL_BYTES + 5
        assert self.next <= self.region.nbytes, "the test's region is too small"
        self.region.array(np.uint8, offset, nbytes + SENTINEL_BYTES)[:] = SENTINEL
        return offset

    def place(self, frame):
        """``frame`` copied into the region; returns the view there."""
        frame = np.asarray(frame)
        view = self.region.array(frame.dtype, self.take(frame.nbytes), frame.shape)
        view[...] = frame
        return view


def output_bytes(p, frame):
    return p.output_bytes(np.asarray(frame).nbytes)


class ShmTest(DaemonTestCase):
    CONFIG = CONFIG

    def setUp(self):
        self.c = self.client()
        self.pipelines = self.c.list()
        self.rng = np.random.default_rng(21)

    def region(self, nbytes, client=None):
        r = (client or self.c).region(nbytes)
        self.addCleanup(r.close)
        return r

    def shm_stats(self):
        return self.c.stats()["shm"]

    def assert_view_of(self, region, arr, offset):
        """``arr`` is a view of ``region`` at ``offset``: it shares its memory
        and a write to the region shows in it.  (An empty array has no
        memory, and NumPy gives an empty slice any address.)"""
        if arr.nbytes:
            self.assertEqual(region.offset_of(arr), offset)
            self.assertTrue(np.shares_memory(arr, region.array()))
            raw = region.array(np.uint8, offset, arr.nbytes)
            before = arr.copy()
            raw[0] ^= 0xFF
            self.assertFalse(np.array_equal(arr, before, equal_nan=True))
            raw[0] ^= 0xFF
            np.testing.assert_array_equal(arr, before)

    # ---- regions ---------------------------------------------------------------

    def test_memfd_is_sealed_against_resizing_not_writing(self):
        fd = create_memfd(4096)
        try:
            import fcntl
            self.assertEqual(fcntl.fcntl(fd, F_GET_SEALS), REGION_SEALS)
            self.assertEqual(os.fstat(fd).st_size, 4096)
            with self.assertRaises(PermissionError):
                os.ftruncate(fd, 2048)
            with self.assertRaises(PermissionError):
                os.ftruncate(fd, 8192)
            self.assertEqual(os.pwrite(fd, b"results go here", 100), 15)
        finally:
            os.close(fd)

    def test_region_is_added_viewed_and_removed(self):
        base_fds = open_fds()
        before = self.shm_stats()
        r = self.c.region(1 << 20)
        self.assertEqual((r.id, r.nbytes, r.closed), (1, 1 << 20, False))
        self.assertEqual(r.pinned, self.daemon.engine == "cuda")
        self.assertIs(r.client, self.c)
        self.assertEqual(repr(r), "<gpuframe.Region 1 of 1048576 bytes%s>"
                         % (", pinned" if r.pinned else ""))
        s = self.shm_stats()
        self.assertEqual((s["regions_open"], s["region_bytes"], s["regions_added"]),
                         (1, 1 << 20, before["regions_added"] + 1))
        # One descriptor more: mmap's own; the memfd itself was closed.
        self.assertEqual(open_fds(), base_fds + 1)

        buf = r.buffer
        self.assertEqual((buf.nbytes, buf.readonly), (1 << 20, False))
        f = r.array(np.float32, 2, (3, 4))
        f[...] = np.arange(12).reshape(3, 4)
        self.assertEqual(bytes(buf[2:6]), np.float32(0).tobytes())
        self.assertEqual(bytes(buf[6:10]), np.float32(1).tobytes())
        self.assertEqual(r.offset_of(f), 2)
        self.assertEqual(r.array(np.uint16, 10).shape, (((1 << 20) - 10) // 2,))
        with self.assertRaisesRegex(ValueError, "do not fit region 1"):
            r.array(np.uint8, (1 << 20) - 3, 4)
        with self.assertRaisesRegex(ValueError, "does not lie in region 1"):
            r.offset_of(np.zeros(4))
        with self.assertRaisesRegex(ValueError, "C-contiguous"):
            r.offset_of(f[:, ::2])
        del f, buf

        r2 = self.c.region(4096)
        self.assertEqual(r2.id, 2)
        r2.close()
        with r:
            pass
        self.assertTrue(r.closed)
        r.close()  # twice: nothing
        with self.assertRaisesRegex(ValueError, "region 1 is closed"):
            r.array()
        s = self.shm_stats()
        self.assertEqual((s["regions_open"], s["region_bytes"], s["regions_removed"]),
                         (0, 0, before["regions_removed"] + 2))
        self.assertEqual(open_fds(), base_fds)

    def test_views_outlive_close_and_the_mapping_goes_with_them(self):
        base_fds = open_fds()
        r = self.c.region(8192)
        x = r.array(np.float32, 0, 16)
        x[:] = 2.0
        y = self.c.process("scale", r.frame(x, 4096))
        r.close()
        self.assertTrue(r.closed)
        # Still mapped while a view lives; reading it is safe.
        np.testing.assert_array_equal(y, np.full(16, 2.75, F32))
        self.assertEqual(open_fds(), base_fds + 1)
        del x, y
        self.assertEqual(open_fds(), base_fds)

    # ---- every pipeline by reference --------------------------------------------

    def frames_for(self, name):
        """The test_client frames of each pipeline (lengths, shapes, special
        values)."""
        rng = self.rng
        kind = self.pipelines[name].kind
        if kind == "echo":
            frames = [rng.integers(0, 256, n, dtype=np.uint8)
                      for n in (0, 1, 3, 4, 31, 4096, 16 * 1024 + 1, 100003, MAX_FRAME_BYTES)]
            frames += [np.arange(105, dtype=np.uint16).reshape(3, 5, 7),
                       rng.standard_normal(10), np.zeros((0, 4), np.int8),
                       np.arange(100, dtype=">i4").reshape(10, 10), np.array(7, np.int64)]
            return frames
        if kind == "affine":
            return [random_f32(rng, 1000), random_f32(rng, 32 * 64).reshape(32, 64),
                    np.zeros(0, F32), SPECIAL_F32, random_f32(rng, 256 * 1024)]
        if kind == "sincos":
            near_pi = np.float32(np.pi) + np.arange(-512, 512, dtype=F32) * np.float32(1e-5)
            return [random_f32(rng, 4096) for _ in range(6)] + [
                near_pi, -near_pi, SPECIAL_F32, np.zeros(0, F32),
                rng.uniform(-1e4, 1e4, 2048).astype(F32)]
        images = [rng.integers(0, 256, (RGB_H, RGB_W, 3), dtype=np.uint8) for _ in range(6)]
        return images + [np.arange(RGB_BYTES, dtype=np.uint64).astype(np.uint8)]

    def test_every_pipeline_by_reference_matches_the_references(self):
        shm_frames = 0
        before = self.shm_stats()
        for name in ("echo", "scale", "shift", "wobble", "rgb"):
            with self.subTest(name):
                p = self.pipelines[name]
                frames = self.frames_for(name)
                need = sum(f.nbytes + output_bytes(p, f) + 2 * SENTINEL_BYTES + 10
                           for f in frames)
                with self.c.region(need + 64) as r:
                    lay = Layout(r)
                    inputs = [lay.place(f) for f in frames]
                    outs = [lay.take(output_bytes(p, f)) for f in frames]
                    shm = [r.frame(x, o) for x, o in zip(inputs, outs)]
                    results = self.c.map(name, shm, window=8)
                    socket = self.c.map(name, frames, window=8)
                    shm_frames += len(frames)
                    for i, (frame, x, o, got, want) in enumerate(
                            zip(frames, inputs, outs, results, socket)):
                        where = "%s frame %d" % (name, i)
                        # The dtype and shape the socket path gives.
                        self.assertEqual((got.dtype, got.shape), (want.dtype, want.shape), where)
                        why = mismatch(p.kind, got, REFERENCES[p.kind](p.params, frame))
                        self.assertIsNone(why, "%s: %s" % (where, why))
                        # The same bytes as the socket path, on any engine.
                        self.assertEqual(got.tobytes(), want.tobytes(), where)
                        self.assert_view_of(r, got, o)
                        np.testing.assert_array_equal(x, frame, where)  # input unchanged
                        gap = r.array(np.uint8, o + got.nbytes, SENTINEL_BYTES)
                        self.assertTrue((gap == SENTINEL).all(), "%s: wrote past its output"
                                        % where)
                    del inputs, shm, results, x, got
        s = self.shm_stats()
        self.assertEqual(s["frames"] - before["frames"], shm_frames)

    def test_raw_offsets_give_flat_results(self):
        r = self.region(1 << 16)
        r.array(F32, 8, 4)[:] = [1, 2, 3, 4]
        y = self.c.process("scale", gpuframe.ShmFrame(r, 8, 16, 100))
        self.assertEqual((y.dtype, y.shape), (F32, (4,)))
        np.testing.assert_array_equal(y, np.float32([1.25, 2.75, 4.25, 5.75]))
        r.buffer[200:205] = b"hello"
        z = self.c.process("echo", gpuframe.ShmFrame(r, 200, 5, 300, 5))
        self.assertEqual((z.dtype, bytes(z)), (np.uint8, b"hello"))
        self.assert_view_of(r, z, 300)
        rgb = self.c.process("rgb", gpuframe.ShmFrame(r, 0, RGB_BYTES, RGB_BYTES))
        self.assertEqual((rgb.dtype, rgb.shape), (F32, (3, RGB_H, RGB_W)))

    def test_a_ring_of_window_slots_streams_many_frames(self):
        # Each input slot is written when the stream pulls its frame: by then
        # the frame that used the slot before has been answered and yielded.
        window, count, n = 8, 3000, 256
        slot_bytes = n * 4
        r = self.region(2 * window * slot_bytes)
        pool = [random_f32(self.rng, n) for _ in range(37)]
        p = self.pipelines["shift"]

        def frames():
            for k in range(count):
                i = k % window
                x = r.array(F32, i * slot_bytes, n)
                x[:] = pool[k % len(pool)]
                yield r.frame(x, (window + i) * slot_bytes)
        got = 0
        for k, y in enumerate(self.c.stream("shift", frames(), window=window)):
            self.assertEqual(r.offset_of(y), (window + k % window) * slot_bytes)
            ref = REFERENCES["affine"](p.params, pool[k % len(pool)])
            self.assertEqual(y.tobytes(), ref.tobytes(), "frame %d" % k)
            got += 1
        self.assertEqual((got, self.c.in_flight), (count, 0))

    def test_frame_buffers_are_filled_in_place_and_streamed(self):
        # The producer writes each frame into its entry's input as the stream
        # asks for it; every result is a view of that entry's output.
        page = mmap.PAGESIZE
        count, n = 4, 3000  # 12000 bytes: not a whole number of pages
        for name, dtype, shape, out_shape in (
                ("shift", F32, (n,), (n,)), ("echo", np.uint8, (5, 7), (5, 7)),
                ("rgb", np.uint8, (RGB_H, RGB_W, 3), (3, RGB_H, RGB_W))):
            with self.subTest(name):
                p = self.pipelines[name]
                in_nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
                out_nbytes = p.output_bytes(in_nbytes)
                with self.c.frame_buffers(count, in_nbytes, out_nbytes) as fb:
                    self.assertEqual(fb.region.nbytes, count * (
                        -(-in_nbytes // page) + -(-out_nbytes // page)) * page)
                    self.assertEqual([fb.input_offset(i) for i in range(count)],
                                     [i * -(-in_nbytes // page) * page for i in range(count)])
                    self.assertEqual(fb.output_offset(0), count * -(-in_nbytes // page) * page)
                    pool = [self.rng.integers(0, 256, shape, dtype=np.uint8) if dtype is np.uint8
                            else random_f32(self.rng, n) for _ in range(7)]

                    def frames():
                        for k in range(30):
                            x = fb.input(k % count, dtype, shape)
                            x[...] = pool[k % len(pool)]
                            yield fb.frame(k % count, x)
                    for k, y in enumerate(self.c.stream(name, frames(), window=count)):
                        want = REFERENCES[p.kind](p.params, pool[k % len(pool)])
                        why = mismatch(p.kind, y, want)
                        self.assertIsNone(why, "frame %d: %s" % (k, why))
                        self.assertEqual(y.shape, out_shape)
                        self.assert_view_of(fb.region, y, fb.output_offset(k % count))
                self.assertTrue(fb.closed)

    def test_frame_buffers_refuse_what_does_not_fit(self):
        fb = self.c.frame_buffers(2, 100)
        self.addCleanup(fb.close)
        with self.assertRaisesRegex(IndexError, "entry 2: the frame buffers are 0 to 1"):
            fb.input(2)
        with self.assertRaisesRegex(ValueError, "104 bytes do not fit a frame buffer of 100"):
            fb.input(0, F32, 26)
        with self.assertRaisesRegex(ValueError, "101 bytes do not fit a frame buffer of 100"):
            fb.frame(1, 101)
        with self.assertRaisesRegex(ValueError, "does not lie in frame buffer 1"):
            fb.frame(1, fb.input(0))
        raw = fb.frame(1, 8)  # the first 8 bytes of entry 1's input: a flat result
        fb.input(1)[:8] = np.arange(8, dtype=np.uint8)
        self.assertEqual(bytes(self.c.process("echo", raw)), bytes(range(8)))
        with self.assertRaisesRegex(ValueError, "count must be an integer >= 1"):
            self.c.frame_buffers(0, 100)

    def test_socket_and_shm_frames_mix_in_one_stream(self):
        r = self.region(1 << 20)
        lay = Layout(r)
        frames, expect = [], []
        for k in range(40):
            x = random_f32(self.rng, 100 + k)
            if k % 3:
                frames.append(r.frame(lay.place(x), lay.take(x.nbytes)))
            else:
                frames.append(x)
            expect.append(REFERENCES["affine"](self.pipelines["scale"].params, x))
        before = self.shm_stats()["frames"]
        results = self.c.map("scale", frames, window=16)
        for k, (got, want) in enumerate(zip(results, expect)):
            self.assertEqual(got.tobytes(), want.tobytes(), "frame %d" % k)
            self.assertEqual(np.shares_memory(got, r.array()), bool(k % 3), "frame %d" % k)
        self.assertEqual(self.shm_stats()["frames"] - before, sum(1 for k in range(40) if k % 3))

    def test_input_dtype_must_be_what_the_kind_reads(self):
        r = self.region(4096)
        frame_id = self.c.next_frame_id
        with self.assertRaisesRegex(TypeError, "little-endian float32, not float64"):
            self.c.process("scale", r.frame(r.array(np.float64, 0, 4), 1024))
        with self.assertRaisesRegex(TypeError, "little-endian float32, not >f4"):
            self.c.process("scale", r.frame(r.array(">f4", 0, 4), 1024))
        with self.assertRaisesRegex(TypeError, "takes uint8, not int16"):
            self.c.process("rgb", r.frame(r.array(np.int16, 0, 4), 1024))
        self.assertEqual((self.c.next_frame_id, self.c.in_flight), (frame_id, 0))
        # echo takes any dtype, and gives it back.
        be = r.array(">i4", 0, 4)
        be[:] = [1, -2, 3, -4]
        got = self.c.process("echo", r.frame(be, 1024))
        self.assertEqual(got.dtype, np.dtype(">i4"))
        self.assertEqual(got.tolist(), [1, -2, 3, -4])

    # ---- refusals ---------------------------------------------------------------

    def test_bad_descriptors_fail_only_their_frame(self):
        size = 1 << 16
        r = self.region(size)
        u64 = (1 << 64) - 1
        F = gpuframe.ShmFrame
        cases = [
            ("echo", F(r, size - 8, 16, 64, 16), gpuframe.BadDescriptorError,
             "input of 16 bytes at offset"),
            ("echo", F(r, u64 - 4, 16, 0, 16), gpuframe.BadDescriptorError, "outside region 1"),
            ("echo", F(r, 0, 16, size, 16), gpuframe.BadDescriptorError,
             "output capacity of 16 bytes"),
            ("echo", F(r, 0, 16, 64, u64), gpuframe.BadDescriptorError, "outside region 1"),
            ("echo", F(r, 0, 64, 4096, 63), gpuframe.BadDescriptorError,
             "less than the pipeline's 64"),
            ("rgb", F(r, 0, RGB_BYTES, 16384, 8192), gpuframe.BadDescriptorError,
             "less than the pipeline's %d" % (4 * RGB_BYTES)),
            ("echo", F(r, 100, 64, 163, 64), gpuframe.BadDescriptorError, "overlap"),
            ("scale", F(r, 0, 6, 64, 64), gpuframe.BadLengthError, "multiple of 4"),
            ("echo", F(r, 0, MAX_FRAME_BYTES + 1, 0, 1), gpuframe.BadLengthError,
             "max_frame_bytes"),
            (99, F(r, 0, 16, 64, 16), gpuframe.UnknownPipelineError, "pipeline id 99"),
        ]
        before = self.c.stats()["rejected"]
        for i, (pipeline, frame, error, words) in enumerate(cases):
            with self.subTest(i=i, words=words):
                with self.assertRaises(error) as cm:
                    self.c.process(pipeline, frame)
                e = cm.exception
                self.assertEqual((e.fatal, e.index), (False, 0))
                self.assertIn(words, e.text)
                self.assertFalse(self.c.closed)
                # The connection goes on: a good frame right after.
                r.buffer[:32] = bytes([i]) * 32
                ok = self.c.process("echo", F(r, 0, 32, 4096, 32))
                self.assertEqual(bytes(ok), bytes([i]) * 32)
        after = self.c.stats()["rejected"]
        self.assertEqual(after["bad_descriptor"] - before["bad_descriptor"], 7)
        self.assertEqual(after["bad_length"] - before["bad_length"], 2)

        # In one stream: each refusal in its frame's place.
        r.buffer[:16] = b"0123456789abcdef"
        out = self.c.map("echo", [F(r, 0, 16, 1000, 16), F(r, 0, 16, 8, 16),
                                  F(r, 0, 16, 2000, 15), F(r, 0, 16, 3000, 16)],
                         window=4, errors="yield")
        self.assertEqual([type(o) for o in out], [np.ndarray, gpuframe.BadDescriptorError,
                                                  gpuframe.BadDescriptorError, np.ndarray])
        self.assertEqual([out[1].index, out[2].index], [1, 2])
        self.assertEqual((bytes(out[0]), bytes(out[3])), (b"0123456789abcdef",) * 2)
        with self.assertRaises(gpuframe.BadDescriptorError) as cm:
            self.c.map("echo", [F(r, 0, 16, 1000, 16), F(r, 0, 16, 8, 16),
                                F(r, 0, 16, 3000, 16)], window=4)
        self.assertEqual(cm.exception.index, 1)
        self.assertEqual(self.c.process("echo", b"after"), b"after")

    def test_reserved_descriptor_bytes_are_refused(self):
        # The public API writes 0 there; forged under it, as test_shm.c does.
        r = self.region(4096)
        desc = protocol.encode_shm_frame(r.id, 0, 16, 64, 16, reserved=1)
        req = self.c._conn.submit(MsgType.FRAME, 0, memoryview(desc), protocol.SHM_RESULT_BYTES,
                                  version=2, flags=protocol.FLAG_SHM)
        self.c._conn.wait(req)
        self.assertIsInstance(req.error, gpuframe.BadDescriptorError)
        self.assertIn("reserved bytes", req.error.text)
        self.assertEqual(self.c.process("echo", b"still here"), b"still here")

    def test_a_removed_region_is_unknown(self):
        r = self.c.region(4096)
        r.buffer[:4] = b"abcd"
        self.assertEqual(bytes(self.c.process("echo", gpuframe.ShmFrame(r, 0, 4, 64))), b"abcd")
        stale = gpuframe.ShmFrame(r, 0, 4, 64)
        r.close()
        with self.assertRaises(gpuframe.UnknownRegionError) as cm:
            self.c.process("echo", stale)
        e = cm.exception
        self.assertEqual((e.status, e.name, e.fatal), (13, "unknown_region", False))
        self.assertIn("region 1", e.text)
        with self.assertRaisesRegex(ValueError, "region 1 is closed"):
            r.frame(np.zeros(4), 0)
        # REGION_REMOVE of it again (forged: close() sends it once).
        with self.assertRaises(gpuframe.UnknownRegionError):
            self.c._request(MsgType.REGION_REMOVE, r.id, version=2)
        self.assertEqual(self.c.process("echo", b"fine"), b"fine")
        # Ids are not reused.
        self.assertEqual(self.region(4096).id, 2)

    def test_region_limits_refuse_and_the_connection_goes_on(self):
        base_fds = open_fds()
        held = [self.c.region(4096) for _ in range(MAX_REGIONS)]
        self.assertEqual([r.id for r in held], [1, 2, 3])
        with self.assertRaises(gpuframe.RegionLimitError) as cm:
            self.c.region(4096)
        e = cm.exception
        self.assertEqual((e.status, e.name, e.fatal), (16, "region_limit", False))
        self.assertIn("max_regions is %d" % MAX_REGIONS, e.text)
        self.assertEqual(self.c.process("echo", b"on"), b"on")
        held.pop(1).close()
        r = self.c.region(4096)
        self.assertEqual(r.id, 4)
        held.append(r)
        for r in held:
            r.close()
        # max_shm_bytes counts every connection's regions.
        with self.assertRaisesRegex(gpuframe.RegionLimitError, "max_shm_bytes"):
            self.c.region(MAX_SHM_BYTES + 1)
        other = self.client()
        big = other.region(MAX_SHM_BYTES // 2 + 4096)
        with self.assertRaisesRegex(gpuframe.RegionLimitError, "max_shm_bytes"):
            self.c.region(MAX_SHM_BYTES // 2)
        big.close()
        self.region(MAX_SHM_BYTES // 2).close()
        other.close()
        self.assertEqual(open_fds(), base_fds)
        self.assertEqual(self.shm_stats()["regions_open"], 0)

    def test_bad_regions_are_refused_and_the_connection_goes_on(self):
        import fcntl
        base_fds = open_fds()

        def memfd(nbytes, seals):
            fd = os.memfd_create("test", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
            os.ftruncate(fd, nbytes)
            if seals:
                fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
            return fd
        with open("/proc/self/stat", "rb") as not_memfd:
            cases = [
                (None, "without a file descriptor"),
                (memfd(4096, 0), "not sealed against shrinking"),
                (memfd(4096, F_SEAL_SHRINK | F_SEAL_WRITE), "sealed against writing"),
                (memfd(0, F_SEAL_SHRINK), "empty"),
                (not_memfd.fileno(), "not a memfd"),
            ]
            for fd, words in cases:
                with self.subTest(words):
                    # Through the request under client.region(), which only
                    # ever sends good memfds.
                    with self.assertRaises(gpuframe.BadRegionError) as cm:
                        self.c._region_add(fd)
                    self.assertEqual((cm.exception.status, cm.exception.fatal), (15, False))
                    self.assertIn(words, cm.exception.text)
                    self.assertEqual(self.c.process("echo", b"ok"), b"ok")
                    if fd is not None and fd != not_memfd.fileno():
                        os.close(fd)
        self.assertEqual(open_fds(), base_fds)
        self.assertEqual(self.region(4096).id, 1)  # refusals took no id

    def test_an_fd_with_another_request_is_fatal(self):
        c = self.client()
        fd = create_memfd(4096)
        try:
            req = c._conn.submit(MsgType.STATS, 0, fd=fd)
            c._conn.wait(req)
        finally:
            os.close(fd)
        e = req.error
        self.assertIsInstance(e, gpuframe.StrayFdError)
        self.assertEqual((e.status, e.fatal), (17, True))
        self.assertTrue(c.closed)
        self.assertEqual(self.c.process("echo", b"others go on"), b"others go on")

    def test_a_region_of_another_client_is_refused_before_sending(self):
        other = self.client()
        r = self.region(4096, other)
        frame_id = self.c.next_frame_id
        with self.assertRaisesRegex(ValueError, "belongs to another client"):
            self.c.process("echo", r.frame(r.array(np.uint8, 0, 4), 64))
        self.assertEqual((self.c.next_frame_id, self.c.in_flight), (frame_id, 0))

    # ---- lifetimes --------------------------------------------------------------

    def test_an_abandoned_stream_does_not_keep_the_region_busy(self):
        r = self.c.region(1 << 20)
        x = r.array(np.uint8, 0, 20000)
        frames = [r.frame(x, 32768 + 20000 * (k % 8)) for k in range(40)]
        for k, _ in enumerate(self.c.stream("echo", frames, window=8)):
            if k == 2:
                break
        r.close()  # reads the abandoned frames' replies first
        self.assertTrue(r.closed)
        self.assertEqual(self.c.in_flight, 0)
        self.assertEqual(self.shm_stats()["regions_open"], 0)

    def test_closing_the_client_closes_its_regions(self):
        c = self.client()
        r = c.region(1 << 16)
        x = c.process("echo", r.frame(r.array(np.uint8, 0, 8), 64))
        c.close()
        self.assertTrue(r.closed)
        r.close()  # nothing left to do, and no error
        self.assertEqual(x.nbytes, 8)  # still mapped through the view
        deadline = time.monotonic() + 10 * support.TIMEOUT_SCALE
        while self.shm_stats()["regions_open"]:
            self.assertLess(time.monotonic(), deadline, "the daemon kept the region")
            time.sleep(0.02)
        with self.assertRaises(gpuframe.ConnectionClosedError):
            c.region(4096)


if __name__ == "__main__":
    support.main()

