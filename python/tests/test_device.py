# SPDX-License-Identifier: MIT
"""Device regions in the Python package (gpuframe.device; PROTOCOL.md,
"Device frames (version 4)").

Everywhere (no GPU needed):
- the ctypes layouts of the driver's structs are cuda_abi.h's, and DLPack's
  the header's (sizes and offsets);
- a DeviceBuffer's __cuda_array_interface__ and DLPack capsule say exactly
  its address, device, dtype and shape, and a capsule never consumed frees
  its tensor when collected; buffers and capsules keep a closed region's
  memory until the last of them goes;
- a device frame's encoding: version 4, flag DEVICE, the 40-byte descriptor
  byte for byte; with set_frame_options it stays version 4 and carries the
  scheduling flags too;
- DEVICE_REGION_ADD through a real daemon on the CPU engine, with a stand-in
  allocation (a memfd where the fd goes): bad_region naming the engine, the
  allocation freed, the connection served on.
With GF_TEST_ENGINE=cuda (python_device_gpu; exit 77, skipped, where every
one of these skipped): affine and echo on device frames through copy_from and
numpy() alone, exact; through torch.from_dlpack and cupy (skipped without
PyTorch with a GPU, or CuPy), exact against the same arithmetic; a stream of
frames at distinct offsets; the region removed and freed; the package's
driver calls leave the calling thread's current context as it was.
"""

import ctypes
import gc
import os
import sys
import threading
import unittest

import numpy as np

import gpuframe
import support
from gpuframe import device, protocol
from support import DaemonTestCase

CONFIG = {
    "slots": 2,
    "pipelines": [
        {"name": "echo", "kind": "echo"},
        {"name": "affine", "kind": "affine", "params": {"a": 2.0, "b": 0.5}},
    ],
}


class _FakeAllocation:
    device, nbytes, ptr = 1, 1 << 21, 0x7F0000200000


class _FakeRegion:
    """What a DeviceBuffer needs of its region, without a GPU."""
    id, device, nbytes, _alloc = 3, 1, 1 << 21, _FakeAllocation()


class LayoutTest(unittest.TestCase):
    def test_driver_structs_are_cuda_abi_h(self):
        self.assertEqual(ctypes.sizeof(device._AllocProp), 32)
        self.assertEqual(device._AllocProp.location.offset, 8)
        self.assertEqual(device._AllocProp.win32_handle_meta_data.offset, 16)
        self.assertEqual(device._AllocProp.alloc_flags.offset, 24)
        self.assertEqual(ctypes.sizeof(device._AccessDesc), 12)
        self.assertEqual(device._AccessDesc.flags.offset, 8)

    def test_dlpack_structs_are_dlpack_h(self):
        self.assertEqual(ctypes.sizeof(device._DLTensor), 48)
        self.assertEqual(device._DLTensor.shape.offset, 24)
        self.assertEqual(device._DLTensor.byte_offset.offset, 40)
        self.assertEqual(ctypes.sizeof(device._DLManagedTensor), 64)

    def test_cuda_array_interface(self):
        b = device.DeviceBuffer(_FakeRegion(), 4096, np.float32, (16, 8))
        self.assertEqual(b.__cuda_array_interface__,
                         {"shape": (16, 8), "typestr": "<f4", "data": (0x7F0000201000, False),
                          "version": 3, "strides": None, "stream": None})
        self.assertEqual(b.nbytes, 512)
        with self.assertRaisesRegex(ValueError, "outside"):
            device.DeviceBuffer(_FakeRegion(), (1 << 21) - 256, np.float32, (128,))
        with self.assertRaisesRegex(TypeError, "native numbers"):
            device.DeviceBuffer(_FakeRegion(), 0, ">f4", (4,))

    def test_dlpack_capsule(self):
        b = device.DeviceBuffer(_FakeRegion(), 512, np.uint8, (3, 5))
        self.assertEqual(b.__dlpack_device__(), (2, 1))
        before = len(device._exported)
        cap = b.__dlpack__(stream=None)
        self.assertEqual(len(device._exported), before + 1)
        ptr = device._capsule_pointer(id(cap), b"dltensor")  # id(): its address in CPython
        t = ctypes.cast(ptr, ctypes.POINTER(device._DLManagedTensor)).contents
        dl = t.dl_tensor
        self.assertEqual(dl.data, 0x7F0000200200)
        self.assertEqual((dl.device.device_type, dl.device.device_id), (2, 1))
        self.assertEqual(dl.ndim, 2)
        self.assertEqual([dl.shape[0], dl.shape[1]], [3, 5])
        self.assertFalse(dl.strides)
        self.assertEqual((dl.dtype.code, dl.dtype.bits, dl.dtype.lanes), (1, 8, 1))
        del t, dl, cap
        gc.collect()
        self.assertEqual(len(device._exported), before)  # never consumed: freed
        with self.assertRaisesRegex(BufferError, "without a copy"):
            b.__dlpack__(copy=True)
        with self.assertRaisesRegex(BufferError, "device 1"):
            b.__dlpack__(dl_device=(2, 0))


class _Counted(device._Allocation):
    """An allocation that counts its frees instead of calling the driver."""
    freed = 0

    def __init__(self):  # no driver: nothing allocated
        self.device, self.nbytes, self.ptr, self.handle, self.fd = 0, 1 << 21, 0x1000, 1, -1

    def free(self):
        if self.ptr:
            _Counted.freed += 1
            self.ptr = 0


class LifetimeTest(unittest.TestCase):
    def test_buffers_keep_a_closed_regions_memory(self):
        region = device.DeviceRegion(None, 1, _Counted())
        b = region.buffer(256, 16, np.float32)
        cap = b.__dlpack__()
        freed = _Counted.freed
        region.close()  # no client: only the local side
        self.assertTrue(region.closed)
        del b
        gc.collect()
        self.assertEqual(_Counted.freed, freed)  # the capsule still holds it
        with self.assertRaisesRegex(ValueError, "closed"):
            region.buffer(0, 1)
        del cap
        gc.collect()
        self.assertEqual(_Counted.freed, freed + 1)


class _StandIn:
    """A device._Allocation stand-in: a memfd where the fd goes."""
    freed = 0

    def __init__(self, dev, nbytes):
        self.device, self.nbytes, self.ptr, self.handle = dev, nbytes, 0x1000, 7
        self.fd = os.memfd_create("not-cuda")

    def free(self):
        _StandIn.freed += 1


class WireTest(DaemonTestCase):
    CONFIG = CONFIG

    def test_encoding(self):
        c = self.client()
        p = c.pipeline("affine")
        region = device.DeviceRegion(c, 4, _StandIn(0, 2 << 20))
        x = region.buffer(256, 1024, np.float32)
        f = region.frame(x, 8192)
        enc = device.encode_device(p, f, c)
        self.assertEqual((enc.version, enc.flags), (4, protocol.FLAG_DEVICE))
        self.assertEqual(bytes(enc.payload).hex(),
                         "04000000" "00000000" "0001000000000000" "0010000000000000"
                         "0020000000000000" + (((2 << 20) - 8192).to_bytes(8, "little").hex()))
        region._alloc = None  # nothing to free, nothing sent

    def test_refused_on_the_cpu_engine(self):
        if support.engine() != "cpu":
            self.skipTest("the CPU engine's refusal")
        c = self.client()
        real = device._Allocation
        device._Allocation = _StandIn
        try:
            freed = _StandIn.freed
            with self.assertRaisesRegex(gpuframe.BadRegionError, "the cpu engine"):
                c.device_region(1 << 20)
            self.assertEqual(_StandIn.freed, freed + 1)
        finally:
            device._Allocation = real
        self.assertEqual(c.process("echo", b"still served"), bytearray(b"still served"))


def _torch():
    try:
        import torch
    except ImportError:
        raise unittest.SkipTest("no PyTorch")
    if not torch.cuda.is_available():
        raise unittest.SkipTest("PyTorch sees no GPU (torch.cuda.is_available() is False)")
    return torch


class GpuTest(DaemonTestCase):
    CONFIG = CONFIG

    def setUp(self):
        if support.engine() != "cuda":
            self.skipTest("device frames need the cuda engine (GF_TEST_ENGINE=cuda)")

    def test_numpy_affine_and_echo(self):
        # Neither PyTorch nor CuPy: DeviceBuffer.copy_from and numpy() alone.
        c = self.client()
        before = c.stats()["device_regions"]["frames"]
        with c.device_region(2 << 20) as r:
            x = r.buffer(0, 1 << 14, np.float32)
            src = np.linspace(-4, 4, 1 << 14, dtype=np.float32)
            x.copy_from(src)
            e = c.process("echo", r.frame(x, 1 << 20))
            self.assertIsInstance(e, gpuframe.DeviceBuffer)
            self.assertEqual((e.offset, e.shape, e.dtype), (1 << 20, (1 << 14,), np.float32))
            self.assertEqual(e.numpy().tobytes(), src.tobytes())
            # 2x is exact, so x * 2 + 0.5 rounds once on the GPU (fmaf) and
            # in numpy alike: exact.
            y = c.process("affine", r.frame(x, (1 << 20) + (1 << 16)))
            np.testing.assert_array_equal(y.numpy(), src * np.float32(2) + np.float32(0.5))
            self.assertEqual(x.numpy().tobytes(), src.tobytes())  # the input untouched
            # Bytes: a uint8 frame echoed byte for byte.
            b = r.buffer(1 << 19, 4096, np.uint8)
            raw = np.random.default_rng(36).integers(0, 256, 4096, dtype=np.uint8)
            b.copy_from(raw)
            self.assertEqual(c.process("echo", r.frame(b, 3 << 19)).numpy().tobytes(),
                             raw.tobytes())
            self.assertEqual(c.stats()["device_regions"]["frames"] - before, 3)

    def test_torch_dlpack_affine_and_echo(self):
        torch = _torch()
        c = self.client()
        before = c.stats()["device_regions"]["frames"]  # the class's daemon serves test_cupy too
        with c.device_region(4 << 20) as r:
            x = r.buffer(0, 1 << 16, np.float32)
            t = torch.from_dlpack(x)
            self.assertEqual((t.device.type, t.device.index, t.dtype), ("cuda", 0, torch.float32))
            t.copy_(torch.linspace(-4, 4, 1 << 16, device="cuda"))
            torch.cuda.synchronize()
            y = c.process("affine", r.frame(x, 1 << 20))
            self.assertIsInstance(y, gpuframe.DeviceBuffer)
            self.assertEqual((y.offset, y.shape), (1 << 20, (1 << 16,)))
            out = torch.from_dlpack(y)
            want = torch.addcmul(torch.tensor(0.5, device="cuda"), t,
                                 torch.tensor(2.0, device="cuda"))
            self.assertTrue(torch.equal(out, want))
            np.testing.assert_array_equal(y.numpy(), want.cpu().numpy())
            e = c.process("echo", r.frame(x, 2 << 20))
            self.assertTrue(torch.equal(torch.from_dlpack(e), t))
            # A window of frames at distinct offsets, results in order.
            frames = [r.frame(r.buffer(k * 8192, 1024, np.float32), (1 << 21) + k * 8192)
                      for k in range(8)]
            for k, f in enumerate(frames):
                torch.from_dlpack(r.buffer(k * 8192, 1024, np.float32)).fill_(float(k))
            torch.cuda.synchronize()
            got = list(c.stream("affine", frames, 4))
            for k, g in enumerate(got):
                np.testing.assert_array_equal(g.numpy(), np.full(1024, 2.0 * k + 0.5, np.float32))
            stats = c.stats()
            self.assertEqual(stats["device_regions"]["frames"] - before, 10)
            self.assertEqual(stats["device_regions"]["regions_open"], 1)
        self.assertEqual(c.stats()["device_regions"]["regions_open"], 0)

    def test_callers_context_unchanged(self):
        # On a thread of its own, with no CUDA context current: the
        # package's allocation, copies and free leave it with none.
        cuda = ctypes.CDLL("libcuda.so.1")
        failures = []

        def current():
            ctx = ctypes.c_void_p(1)
            self.assertEqual(cuda.cuCtxGetCurrent(ctypes.byref(ctx)), 0)
            return ctx.value

        def run():
            try:
                a = device._Allocation(0, 1 << 20)
                os.close(a.fd)
                self.assertIsNone(current(), "after the allocation")
                host = np.arange(256, dtype=np.uint8)
                device._copy(a, 4096, host, to_device=True)
                self.assertIsNone(current(), "after a copy to the device")
                back = np.zeros(256, np.uint8)
                device._copy(a, 4096, back, to_device=False)
                self.assertIsNone(current(), "after a copy from the device")
                np.testing.assert_array_equal(back, host)
                a.free()
                self.assertIsNone(current(), "after the free")
            except BaseException as e:  # reported on the test's thread
                failures.append(e)

        t = threading.Thread(target=run)
        t.start()
        t.join()
        if failures:
            raise failures[0]

    def test_cupy(self):
        try:
            import cupy
        except ImportError:
            self.skipTest("no CuPy")
        c = self.client()
        with c.device_region(2 << 20) as r:
            x = r.buffer(0, 4096, np.float32)
            a = cupy.asarray(x)  # __cuda_array_interface__
            a[:] = cupy.arange(4096, dtype=cupy.float32)
            cupy.cuda.runtime.deviceSynchronize()
            y = c.process("affine", r.frame(x, 1 << 20))
            np.testing.assert_array_equal(cupy.asnumpy(cupy.from_dlpack(y)),
                                          np.arange(4096, dtype=np.float32) * 2 + 0.5)


def main():
    """support.main(), and with the cuda engine exit 77 (ctest: skipped)
    where every GPU test skipped: a GPU run that checked nothing never
    passes."""
    try:
        engine = support.engine()
    except unittest.SkipTest as e:
        print("SKIP: %s" % e)
        sys.exit(support.SKIP_CODE)
    result = unittest.main(verbosity=2, exit=False).result
    if not result.wasSuccessful():
        sys.exit(1)
    gpu_tests = unittest.TestLoader().getTestCaseNames(GpuTest)
    skipped = [t for t, _ in result.skipped if isinstance(t, GpuTest)]
    if engine == "cuda" and len(skipped) == len(gpu_tests):
        print("SKIP: every GPU test skipped: %s" % "; ".join(why for _, why in result.skipped))
        sys.exit(support.SKIP_CODE)
    sys.exit(0)


if __name__ == "__main__":
    main()
