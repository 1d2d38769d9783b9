# SPDX-License-Identifier: MIT
"""Device regions and frames on the GPU (PROTOCOL.md, "Device frames
(version 4)").

A :class:`DeviceRegion` is GPU memory made here with the CUDA driver's
virtual memory management (cuMemCreate, shareable as a POSIX file
descriptor) and mapped by the daemon too.  Frames whose input lies there go
to the daemon as a 40-byte descriptor (:class:`DeviceFrame`); the pipeline
reads and writes them in place on the GPU, and the result is handed out as a
:class:`DeviceBuffer`: a view of the region that PyTorch, CuPy and anything
else that speaks DLPack or ``__cuda_array_interface__`` takes without a
copy::

    with client.device_region(64 << 20) as r:
        x = r.buffer(0, 4096, np.float32)       # a DeviceBuffer over the region
        torch.from_dlpack(x).copy_(t)           # the input, written on the GPU
        torch.cuda.synchronize()                # written before it is sent
        y = client.process("affine", r.frame(x, 1 << 20))
        out = torch.from_dlpack(y)              # float32 (4096,), in the region

The driver (libcuda.so.1) is loaded with ctypes on first use: the package
needs no CUDA to import, and says why when there is none
(:class:`DeviceUnavailableError`).  A region belongs to the client that made
it; freeing it here while frames on it are in flight is safe (the daemon's
mapping keeps the memory until its last frame is done).
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
from typing import TYPE_CHECKING, Any, Dict, Iterator, Optional, Sequence, Tuple, Union

import numpy as np

from . import protocol
from .errors import GpuframeError, ProtocolError
from .pipelines import REFUSED, EncodedFrame, Pipeline, _expect, _resolve, result_layout
from .shm import RegionOwner, _ClosedOnExit, _descriptor_output, _u64

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["DeviceRegion", "DeviceFrame", "DeviceBuffer", "DeviceUnavailableError"]

#: Where a device frame's input and output may start: multiples of this.
ALIGN_BYTES = 256


class DeviceUnavailableError(GpuframeError, OSError):
    """No CUDA driver or device here to make a device region with."""


# ---- the driver, through ctypes -----------------------------------------------------

_CUDA_SUCCESS = 0
_CUDA_ERROR_OUT_OF_MEMORY = 2
_ALLOCATION_TYPE_PINNED = 1
_HANDLE_TYPE_POSIX_FD = 1
_LOCATION_TYPE_DEVICE = 1
_ACCESS_READWRITE = 3
_GRANULARITY_MINIMUM = 0
_DRIVER_ABI = 12000  # the calls used exist unchanged since CUDA 10.2


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [("compression_type", ctypes.c_ubyte), ("gpu_direct_rdma_capable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class _AllocProp(ctypes.Structure):
    """CUmemAllocationProp (client/cuda_abi.h says the same, checked against
    cuda.h by test_cuda_abi)."""
    _fields_ = [("type", ctypes.c_int), ("requested_handle_types", ctypes.c_int),
                ("location", _Location), ("win32_handle_meta_data", ctypes.c_void_p),
                ("alloc_flags", _AllocFlags)]


class _AccessDesc(ctypes.Structure):
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


_u64_t = ctypes.c_uint64
_size_t = ctypes.c_size_t
# name: (restype is CUresult = int), argtypes
_CALLS: Dict[str, Tuple[Any, ...]] = {
    "cuInit": (ctypes.c_uint,),
    "cuDeviceGet": (ctypes.POINTER(ctypes.c_int), ctypes.c_int),
    "cuDevicePrimaryCtxRetain": (ctypes.POINTER(ctypes.c_void_p), ctypes.c_int),
    "cuCtxPushCurrent": (ctypes.c_void_p,),
    "cuCtxPopCurrent": (ctypes.POINTER(ctypes.c_void_p),),
    "cuMemGetAllocationGranularity": (ctypes.POINTER(_size_t), ctypes.POINTER(_AllocProp),
                                      ctypes.c_int),
    "cuMemCreate": (ctypes.POINTER(_u64_t), _size_t, ctypes.POINTER(_AllocProp),
                    ctypes.c_ulonglong),
    "cuMemRelease": (_u64_t,),
    "cuMemAddressReserve": (ctypes.POINTER(_u64_t), _size_t, _size_t, _u64_t, ctypes.c_ulonglong),
    "cuMemAddressFree": (_u64_t, _size_t),
    "cuMemMap": (_u64_t, _size_t, _size_t, _u64_t, ctypes.c_ulonglong),
    "cuMemUnmap": (_u64_t, _size_t),
    "cuMemSetAccess": (_u64_t, _size_t, ctypes.POINTER(_AccessDesc), _size_t),
    "cuMemExportToShareableHandle": (ctypes.c_void_p, _u64_t, ctypes.c_int, ctypes.c_ulonglong),
    "cuMemcpyHtoD": (_u64_t, ctypes.c_void_p, _size_t),
    "cuMemcpyDtoH": (ctypes.c_void_p, _u64_t, _size_t),
    "cuCtxSynchronize": (),
    "cuGetErrorName": (ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)),
}


class _Driver:
    """The CUDA driver's calls, looked up once with cuGetProcAddress."""

    def __init__(self) -> None:
        try:
            lib = ctypes.CDLL("libcuda.so.1")
        except OSError as e:
            raise DeviceUnavailableError("the CUDA driver (libcuda.so.1) cannot be loaded: %s"
                                         % e) from e
        try:
            proc = lib.cuGetProcAddress_v2
        except AttributeError as e:
            raise DeviceUnavailableError("the CUDA driver has no cuGetProcAddress_v2 (12.0)") \
                from e
        proc.restype = ctypes.c_int
        proc.argtypes = (ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int,
                         _u64_t, ctypes.POINTER(ctypes.c_int))
        self.fn: Dict[str, Any] = {}
        for name, argtypes in _CALLS.items():
            ptr, found = ctypes.c_void_p(), ctypes.c_int(-1)
            if proc(name.encode(), ctypes.byref(ptr), _DRIVER_ABI, 0, ctypes.byref(found)) \
                    != _CUDA_SUCCESS or found.value != 0 or not ptr.value:
                raise DeviceUnavailableError("the CUDA driver has no %s" % name)
            self.fn[name] = ctypes.CFUNCTYPE(ctypes.c_int, *argtypes)(ptr.value)
        rc = self.fn["cuInit"](0)
        if rc != _CUDA_SUCCESS:
            raise DeviceUnavailableError("cuInit failed (%s): no usable GPU" % self.name(rc))
        self.contexts: Dict[int, int] = {}

    def name(self, rc: int) -> str:
        s = ctypes.c_char_p()
        if self.fn["cuGetErrorName"](rc, ctypes.byref(s)) != _CUDA_SUCCESS or not s.value:
            return "CUDA error %d" % rc
        return s.value.decode()

    def call(self, name: str, *args: Any) -> None:
        rc = self.fn[name](*args)
        if rc != _CUDA_SUCCESS:
            err = MemoryError if rc == _CUDA_ERROR_OUT_OF_MEMORY else OSError
            raise err("%s failed: %s" % (name, self.name(rc)))

    @contextlib.contextmanager
    def current(self, device: int) -> Iterator[None]:
        """``device``'s primary context (the runtime's, PyTorch's), retained
        once per device, pushed current on this thread for the ``with``
        block and popped after it: the caller's current context is
        unchanged."""
        ctx = self.contexts.get(device)
        if ctx is None:
            dev, c = ctypes.c_int(), ctypes.c_void_p()
            try:
                self.call("cuDeviceGet", ctypes.byref(dev), device)
                self.call("cuDevicePrimaryCtxRetain", ctypes.byref(c), dev.value)
            except OSError as e:
                raise DeviceUnavailableError("CUDA device %d: %s" % (device, e)) from e
            ctx = self.contexts[device] = c.value or 0
        self.call("cuCtxPushCurrent", ctypes.c_void_p(ctx))
        try:
            yield
        finally:
            self.call("cuCtxPopCurrent", ctypes.byref(ctypes.c_void_p()))


_driver: Optional[_Driver] = None
_driver_lock = threading.Lock()


def _drv() -> _Driver:
    global _driver
    with _driver_lock:
        if _driver is None:
            _driver = _Driver()
        return _driver


class _Allocation:
    """``nbytes`` (rounded up to the granularity) on ``device``, mapped here
    at ``ptr``, exported as a POSIX fd (``fd``, closed by the caller)."""

    def __init__(self, device: int, nbytes: int) -> None:
        d = _drv()
        with d.current(device):
            prop = _AllocProp(type=_ALLOCATION_TYPE_PINNED,
                              requested_handle_types=_HANDLE_TYPE_POSIX_FD,
                              location=_Location(_LOCATION_TYPE_DEVICE, device))
            g = _size_t()
            d.call("cuMemGetAllocationGranularity", ctypes.byref(g), ctypes.byref(prop),
                   _GRANULARITY_MINIMUM)
            self.device = device
            self.nbytes = -(-nbytes // g.value) * g.value
            handle, ptr, fd = _u64_t(), _u64_t(), ctypes.c_int(-1)
            d.call("cuMemCreate", ctypes.byref(handle), self.nbytes, ctypes.byref(prop), 0)
            try:
                d.call("cuMemAddressReserve", ctypes.byref(ptr), self.nbytes, g.value, 0, 0)
                try:
                    d.call("cuMemMap", ptr.value, self.nbytes, 0, handle.value, 0)
                    try:
                        access = _AccessDesc(_Location(_LOCATION_TYPE_DEVICE, device),
                                             _ACCESS_READWRITE)
                        d.call("cuMemSetAccess", ptr.value, self.nbytes, ctypes.byref(access), 1)
                        d.call("cuMemExportToShareableHandle", ctypes.byref(fd), handle.value,
                               _HANDLE_TYPE_POSIX_FD, 0)
                    except BaseException:
                        d.call("cuMemUnmap", ptr.value, self.nbytes)
                        raise
                except BaseException:
                    d.call("cuMemAddressFree", ptr.value, self.nbytes)
                    raise
            except BaseException:
                d.call("cuMemRelease", handle.value)
                raise
        self.handle, self.ptr, self.fd = handle.value, ptr.value, fd.value

    def free(self) -> None:
        """Unmaps and releases it here (the daemon's mapping is its own)."""
        if not self.ptr:
            return
        d = _drv()
        with d.current(self.device):
            d.call("cuMemUnmap", self.ptr, self.nbytes)
            d.call("cuMemAddressFree", self.ptr, self.nbytes)
            d.call("cuMemRelease", self.handle)
        self.ptr = 0

    def __del__(self) -> None:
        # The last DeviceBuffer (or tensor made from one) over it is gone.
        try:
            self.free()
        except Exception:  # the interpreter is going: the process frees it
            pass


# ---- DLPack ---------------------------------------------------------------------------

_kDLCUDA = 2
_DL_CODES = {"i": 0, "u": 1, "f": 2, "b": 6}  # kDLInt, kDLUInt, kDLFloat, kDLBool


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    pass


_Deleter = ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensor))
_DLManagedTensor._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                             ("deleter", _Deleter)]

# Tensors handed out and not yet deleted by their consumer (or their unused
# capsule): address -> (the struct, its shape array, the buffer it keeps alive).
_exported: Dict[int, Tuple[Any, ...]] = {}
_exported_lock = threading.Lock()


def _dl_delete(managed: Any) -> None:
    with _exported_lock:
        _exported.pop(ctypes.addressof(managed.contents), None)


_dl_deleter = _Deleter(_dl_delete)


# The destructor gets the dying capsule as a bare pointer: a py_object
# argument would take a reference to an object whose count reached zero.
_PyCapsule_Destructor = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
# Prototypes of our own: ctypes.pythonapi's function objects are shared by
# everyone in the process, and so are their argtypes.
_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p,
                                 _PyCapsule_Destructor)(("PyCapsule_New", ctypes.pythonapi))
_capsule_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi))
_capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))


def _capsule_destroy(capsule: int) -> None:
    # A consumer renames the capsule "used_dltensor" and calls the deleter
    # itself; one never consumed is deleted here.
    if _capsule_is_valid(capsule, b"dltensor"):
        ptr = _capsule_pointer(capsule, b"dltensor")
        _dl_deleter(ctypes.cast(ptr, ctypes.POINTER(_DLManagedTensor)))


_capsule_destructor = _PyCapsule_Destructor(_capsule_destroy)


def _copy(alloc: Any, offset: int, host: npt.NDArray[Any], *, to_device: bool) -> None:
    """Copies between ``host`` and ``offset`` of ``alloc``, synchronously."""
    if offset < 0 or offset + host.nbytes > alloc.nbytes:
        raise ValueError("%d bytes at offset %d lie outside the region's %d"
                         % (host.nbytes, offset, alloc.nbytes))
    d = _drv()
    with d.current(alloc.device):
        if to_device:
            d.call("cuMemcpyHtoD", alloc.ptr + offset, host.ctypes.data, host.nbytes)
            # From pageable memory the call may return before the bytes
            # reach the device, where the daemon's context would read them.
            d.call("cuCtxSynchronize")
        else:
            d.call("cuMemcpyDtoH", host.ctypes.data, alloc.ptr + offset, host.nbytes)


class DeviceBuffer:
    """``shape`` items of ``dtype`` at ``offset`` of a :class:`DeviceRegion`,
    on its GPU: what ``region.buffer()`` gives and a device frame's result.
    It keeps the region's memory here alive while it (or a tensor made from
    it) lives, even past ``region.close()``: a consumer never reads memory
    that is gone.  Reading it before its frame's result arrived reads
    whatever is there.

    ``torch.from_dlpack(b)``, ``cupy.from_dlpack(b)``, ``cupy.asarray(b)``
    (``__cuda_array_interface__``) and :meth:`numpy` (a copy to the host)
    read it.
    """

    __slots__ = ("region", "offset", "nbytes", "dtype", "shape", "_alloc")

    def __init__(self, region: DeviceRegion, offset: int, dtype: npt.DTypeLike,
                 shape: Sequence[int]) -> None:
        if region._alloc is None:
            raise ValueError("%r is closed" % (region,))
        self.region = region
        self._alloc = region._alloc
        self.offset = int(offset)
        self.dtype: np.dtype[Any] = np.dtype(dtype)
        self.shape: Tuple[int, ...] = tuple(int(n) for n in shape)
        self.nbytes = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize
        if self.dtype.kind not in _DL_CODES or self.dtype.byteorder == ">":
            raise TypeError("a device buffer holds native numbers, not %s" % self.dtype)
        if self.offset < 0 or self.offset + self.nbytes > region.nbytes:
            raise ValueError("%d bytes at offset %d lie outside %r"
                             % (self.nbytes, self.offset, region))

    def __repr__(self) -> str:
        return "DeviceBuffer(region=%d, offset=%d, dtype=%s, shape=%r)" % (
            self.region.id, self.offset, self.dtype, self.shape)

    @property
    def ptr(self) -> int:
        """Its address on the GPU, in this process."""
        return int(self._alloc.ptr) + self.offset

    @property
    def __cuda_array_interface__(self) -> Dict[str, Any]:
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, False),
                "version": 3, "strides": None, "stream": None}

    def __dlpack_device__(self) -> Tuple[int, int]:
        return (_kDLCUDA, self.region.device)

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None,
                   dl_device: Any = None, copy: Any = None) -> Any:
        """A DLPack capsule ("dltensor") over this buffer.  The data is
        complete on the device (a result: when its reply arrived), so no
        stream is waited on; a copy is never made."""
        if copy:
            raise BufferError("a device buffer is exported without a copy")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError("a device buffer lives on CUDA device %d" % self.region.device)
        managed = _DLManagedTensor()
        shape = (ctypes.c_int64 * max(len(self.shape), 1))(*self.shape)
        managed.dl_tensor = _DLTensor(
            data=self.ptr, device=_DLDevice(_kDLCUDA, self.region.device), ndim=len(self.shape),
            dtype=_DLDataType(_DL_CODES[self.dtype.kind], self.dtype.itemsize * 8, 1),
            shape=shape, strides=None, byte_offset=0)
        managed.deleter = _dl_deleter
        with _exported_lock:
            _exported[ctypes.addressof(managed)] = (managed, shape, self)
        return _capsule_new(ctypes.addressof(managed), b"dltensor", _capsule_destructor)

    def numpy(self) -> npt.NDArray[Any]:
        """A copy on the host (synchronous)."""
        out = np.empty(self.shape, self.dtype)
        _copy(self._alloc, self.offset, out, to_device=False)
        return out

    def copy_from(self, data: npt.ArrayLike) -> None:
        """Writes host ``data`` (its bytes, this buffer's size) here, synchronously."""
        a = np.ascontiguousarray(data, dtype=self.dtype)
        if a.nbytes != self.nbytes:
            raise ValueError("%d bytes into a device buffer of %d" % (a.nbytes, self.nbytes))
        _copy(self._alloc, self.offset, a, to_device=True)


class DeviceRegion(_ClosedOnExit):
    """GPU memory of one :class:`~gpuframe.Client` that the daemon maps: made
    by ``client.device_region(nbytes, device)``, never directly.  ``id`` is
    its id on that connection, ``ptr`` its address here, ``nbytes`` its size
    (the asked size rounded up to the allocation granularity, 2 MiB on
    current GPUs).  ``close()`` removes it from the daemon (which unmaps it
    once its frames are done) and frees it here."""

    def __init__(self, client: RegionOwner, region_id: int, alloc: _Allocation) -> None:
        self._client: Optional[RegionOwner] = client
        self.id = region_id
        self.device = alloc.device
        self.nbytes = alloc.nbytes
        self._alloc: Optional[_Allocation] = alloc

    def __repr__(self) -> str:
        return "DeviceRegion(id=%d, device=%d, nbytes=%d%s)" % (
            self.id, self.device, self.nbytes, ", closed" if self.closed else "")

    @property
    def closed(self) -> bool:
        return self._alloc is None

    @property
    def ptr(self) -> int:
        if self._alloc is None:
            raise ValueError("%r is closed" % self)
        return self._alloc.ptr

    @property
    def client(self) -> Optional[RegionOwner]:
        return self._client

    def buffer(self, offset: int, count: int, dtype: npt.DTypeLike = np.uint8,
               shape: Optional[Sequence[int]] = None) -> DeviceBuffer:
        """``count`` items of ``dtype`` at ``offset`` (a multiple of 256 to be
        a frame's input), as ``shape`` (default ``(count,)``)."""
        return DeviceBuffer(self, offset, dtype, (count,) if shape is None else shape)

    def frame(self, x: DeviceBuffer, out: Union[int, DeviceBuffer],
              out_capacity: Optional[int] = None) -> DeviceFrame:
        """A frame whose input is ``x`` (a buffer of this region) and whose
        output goes to offset ``out`` (or buffer ``out``'s place)."""
        if x.region is not self:
            raise ValueError("%r is not of %r" % (x, self))
        out_offset = out.offset if isinstance(out, DeviceBuffer) else int(out)
        if out_capacity is None:
            out_capacity = out.nbytes if isinstance(out, DeviceBuffer) else \
                max(self.nbytes - out_offset, 0)
        return DeviceFrame(self, x.offset, x.nbytes, out_offset, out_capacity, dtype=x.dtype,
                           shape=x.shape)

    def close(self) -> None:
        """Removes the region from the daemon (raises BusyError, changing
        nothing, while frames of a stream are in flight) and frees it here
        once no DeviceBuffer, or tensor made from one, uses it."""
        if self._alloc is None:
            return
        if self._client is not None:
            self._client._region_remove(self)  # type: ignore[arg-type]
        else:
            self._release()

    def _release(self) -> None:
        alloc, self._alloc = self._alloc, None
        client, self._client = self._client, None
        if client is not None:
            client._region_forget(self)  # type: ignore[arg-type]
        del alloc  # freed here now, or with the last buffer over it


class DeviceFrame:
    """One frame on the GPU: its input is ``in_bytes`` at ``in_offset`` of a
    :class:`DeviceRegion`, its output goes to ``out_offset`` (``out_capacity``
    bytes of room); both offsets multiples of 256.  Usually made by
    :meth:`DeviceRegion.frame`.  The input must be written (its stream
    synchronised) before the frame is sent and stay unchanged until its
    result is delivered."""

    __slots__ = ("region", "in_offset", "in_bytes", "out_offset", "out_capacity", "dtype",
                 "shape")

    def __init__(self, region: DeviceRegion, in_offset: int, in_bytes: int, out_offset: int,
                 out_capacity: int, *, dtype: npt.DTypeLike = None,
                 shape: Optional[Sequence[int]] = None) -> None:
        self.region = region
        self.in_offset = _u64("in_offset", in_offset)
        self.in_bytes = _u64("in_bytes", in_bytes)
        self.out_offset = _u64("out_offset", out_offset)
        self.out_capacity = _u64("out_capacity", out_capacity)
        self.dtype: Optional[np.dtype[Any]] = None if dtype is None else np.dtype(dtype)
        self.shape = None if shape is None else tuple(int(n) for n in shape)


def add_device_region(request: Any, nbytes: int, device: int) -> Tuple[int, _Allocation]:
    """Makes the allocation and sends DEVICE_REGION_ADD through ``request(payload,
    fd)`` (the client's, which returns the reply's payload); returns the
    region id and the allocation.  The fd is closed here either way."""
    import os
    try:
        alloc = _Allocation(device, nbytes)
    except (MemoryError, DeviceUnavailableError):
        raise
    except OSError as e:
        raise DeviceUnavailableError("a device region on device %d: %s" % (device, e)) from e
    try:
        payload = protocol.encode_device_region(alloc.nbytes)
        try:
            info = protocol.decode_region_info(request(payload, alloc.fd))
        finally:
            os.close(alloc.fd)
        if info.region_bytes != alloc.nbytes or not info.flags & protocol.REGION_DEVICE:
            raise ProtocolError("DEVICE_REGION_ADD reply says region %d of %d bytes, flags %#x, "
                                "for a device region of %d bytes"
                                % (info.region_id, info.region_bytes, info.flags, alloc.nbytes))
    except BaseException:
        alloc.free()
        raise
    return info.region_id, alloc


def encode_device(pipeline: Pipeline, frame: DeviceFrame, client: object) -> EncodedFrame:
    """Prepares ``frame`` for ``pipeline`` on ``client``'s connection:
    version 4, FLAG_DEVICE, its descriptor as payload; the result delivered
    is a :class:`DeviceBuffer` where the RESULT says the output lies,
    checked against what was asked."""
    region = frame.region
    if region.client is not client:
        raise ValueError("%r belongs to another client; a region id means something on "
                         "its own connection only" % (region,))
    dtype, shape = result_layout(pipeline, frame.dtype, frame.shape)
    expect = _expect(pipeline, frame.in_bytes)
    payload = protocol.encode_shm_frame(region.id, frame.in_offset, frame.in_bytes,
                                        frame.out_offset, frame.out_capacity)

    def finish(answer: Any, header: protocol.Header) -> DeviceBuffer:
        got = protocol.decode_shm_result(answer)
        if region.closed or got.region_id != region.id or got.out_offset != frame.out_offset \
                or expect == REFUSED or (expect is not None and got.out_bytes != expect) \
                or got.out_bytes > frame.out_capacity:
            raise ProtocolError(
                "device RESULT for frame_id %d says region %d offset %d bytes %d, but the frame "
                "asked for region %d offset %d (%s)"
                % (header.frame_id, got.region_id, got.out_offset, got.out_bytes, region.id,
                   frame.out_offset, "closed here" if region.closed else "open"))
        out_shape = _resolve(shape, dtype, got.out_bytes)
        if out_shape is None:
            out_shape = (got.out_bytes // dtype.itemsize,)
        return DeviceBuffer(region, got.out_offset, dtype, out_shape)

    return EncodedFrame(memoryview(payload), protocol.SHM_RESULT_BYTES, _descriptor_output,
                        version=protocol.VERSION_DEVICE, flags=protocol.FLAG_DEVICE,
                        finish=finish)
