# SPDX-License-Identifier: MIT
"""Shared-memory regions and frames by reference (PROTOCOL.md, "Shared-memory
frames (version 2)").

A :class:`Region` is a sealed memfd mapped here and in the daemon.  Frames
whose input lies in it go to the daemon as a 40-byte descriptor
(:class:`ShmFrame`) instead of their bytes; the daemon writes the output into
the region, and the client hands it out as a NumPy view of the region: no
frame byte crosses the socket or is copied by either side's CPU.

    with client.region(1 << 20) as r:
        x = r.array(np.float32, 0, 1024)        # a view of the region
        x[:] = data                             # the input, written in place
        y = client.process("affine", r.frame(x, 4096))
        # y: float32 (1024,), a view of r at offset 4096

A region belongs to the client that created it; its id means something on
that connection only.

:class:`FrameBuffers` (``client.frame_buffers(count, nbytes)``) lays a region
out as libgpuframe's frame buffers do: one input and one output per frame in
flight, which a producer fills in place::

    with client.frame_buffers(8, 4 << 20) as fb:
        x = fb.input(0, np.float32)             # entry 0's input, a view
        x[:] = data
        y = client.process("affine", fb.frame(0, x))   # a view of entry 0's output
"""

from __future__ import annotations

import mmap
import os
from types import ModuleType, TracebackType
from typing import TYPE_CHECKING, Any, Optional, Protocol, Sequence, Tuple, Type, TypeVar, Union

import numpy as np

from . import protocol
from .errors import ProtocolError
from .pipelines import (REFUSED, EncodedFrame, Pipeline, _expect, _resolve, input_dtype,
                        result_layout)

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["Region", "ShmFrame", "FrameBuffers", "create_memfd"]

# Linux's numbers, for a Python whose os/fcntl modules lack the names
# (include/uapi/linux/memfd.h, fcntl.h).
_MFD_CLOEXEC = getattr(os, "MFD_CLOEXEC", 0x0001)
_MFD_ALLOW_SEALING = getattr(os, "MFD_ALLOW_SEALING", 0x0002)
_fcntl: Optional[ModuleType]
try:
    import fcntl as _fcntl
except ImportError:  # not a POSIX system: create_memfd says why
    _fcntl = None
fcntl = _fcntl
_F_ADD_SEALS = getattr(fcntl, "F_ADD_SEALS", 1033)
_F_SEAL_SEAL = getattr(fcntl, "F_SEAL_SEAL", 0x0001)
_F_SEAL_SHRINK = getattr(fcntl, "F_SEAL_SHRINK", 0x0002)
_F_SEAL_GROW = getattr(fcntl, "F_SEAL_GROW", 0x0004)
#: The seals of a region: its size is final, so the daemon's mapping never
#: loses pages, and nobody can add a write seal that would stop results.
REGION_SEALS = _F_SEAL_SHRINK | _F_SEAL_GROW | _F_SEAL_SEAL

_U64_MAX = (1 << 64) - 1
_U8 = np.dtype(np.uint8)


def create_memfd(nbytes: int, name: str = "gpuframe-region") -> int:
    """A new memfd of ``nbytes`` bytes, close-on-exec, sealed against
    shrinking, growing and further seals (not against writing).  Returns the
    descriptor, which the caller owns.  Raises OSError (NotImplementedError
    where the system has no memfd_create)."""
    if not hasattr(os, "memfd_create") or fcntl is None:
        raise NotImplementedError("shared-memory regions need Linux's memfd_create")
    fd = os.memfd_create(name, _MFD_CLOEXEC | _MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, nbytes)
        fcntl.fcntl(fd, _F_ADD_SEALS, REGION_SEALS)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _u64(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError("%s must be an integer, not %s" % (name, type(value).__name__))
    number = int(value)
    if not 0 <= number <= _U64_MAX:
        raise ValueError("%s must be in [0, 2**64), not %d" % (name, number))
    return number


_Self = TypeVar("_Self", bound="_ClosedOnExit")


class _ClosedOnExit:
    """A context manager whose exit calls ``close()``."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]],
                 exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        self.close()


class RegionOwner(Protocol):
    """What a :class:`Region` needs of the :class:`~gpuframe.Client` that
    made it.  This module does not import the client's (the client calls
    its regions, not the other way round), so a region reaches its client
    through these two alone."""

    def _region_remove(self, region: Region) -> None:
        """REGION_REMOVE of ``region``, then ``region._release()``."""

    def _region_forget(self, region: Region) -> None:
        """Drops ``region`` from the client's open regions."""


class Region(_ClosedOnExit):
    """A shared-memory region of one :class:`~gpuframe.Client`: made by
    ``client.region(nbytes)``, never directly.

    Attributes:
        id: the daemon's id of the region on this connection (1, 2, ...).
        nbytes: its size in bytes.
        pinned: True when the daemon page-locked it for the GPU's copy
            engines (the CUDA engine does).
        closed: True after :meth:`close` or the client's close.  When the
            daemon closes the connection it forgets the region, but the
            mapping here stays until one of those.

    Its memory is read and written through NumPy views (:meth:`array`,
    :attr:`buffer`); frames by reference are described with :meth:`frame`.
    Use it as a context manager, or call :meth:`close`.
    """

    def __init__(self, client: RegionOwner, info: protocol.RegionInfo,
                 mapping: mmap.mmap) -> None:
        self._client = client
        self.id = info.region_id
        self.nbytes = info.region_bytes
        self.pinned = bool(info.flags & protocol.REGION_PINNED)
        self._mmap: Optional[mmap.mmap] = mapping
        # Every view is made from this one array, which holds the mapping's
        # only buffer export (see _release).
        self._bytes: Optional[npt.NDArray[np.uint8]] = np.frombuffer(mapping, _U8)
        self._base: int = self._bytes.__array_interface__["data"][0]

    def __repr__(self) -> str:
        return "<gpuframe.Region %d of %d bytes%s%s>" % (
            self.id, self.nbytes, ", pinned" if self.pinned else "",
            " closed" if self.closed else "")

    @property
    def closed(self) -> bool:
        """True once the region is closed."""
        return self._bytes is None

    @property
    def client(self) -> RegionOwner:
        """The client (a :class:`~gpuframe.Client`) whose connection holds the
        region."""
        return self._client

    def _open_bytes(self) -> npt.NDArray[np.uint8]:
        if self._bytes is None:
            raise ValueError("region %d is closed" % self.id)
        return self._bytes

    @property
    def buffer(self) -> memoryview:
        """A writable memoryview of the whole region."""
        return self._open_bytes().data

    def array(self, dtype: npt.DTypeLike = np.uint8, offset: int = 0,
              shape: Union[None, int, Sequence[int]] = None) -> npt.NDArray[Any]:
        """A NumPy view (no copy) of the region: ``dtype`` values from byte
        ``offset`` (no alignment needed), in ``shape`` (an int for 1-D; None:
        as many whole values as fit up to the region's end).  Writing it
        writes the region.  Raises ValueError when it does not fit or the
        region is closed."""
        b = self._open_bytes()
        dt = np.dtype(dtype)
        if dt.hasobject or dt.itemsize == 0:
            raise TypeError("a region holds no %s values" % dt)
        offset = _u64("offset", offset)
        if offset > self.nbytes:
            raise ValueError("offset %d is past region %d's %d bytes"
                             % (offset, self.id, self.nbytes))
        dims: Tuple[int, ...]
        if shape is None:
            dims = ((self.nbytes - offset) // dt.itemsize,)
        elif isinstance(shape, (int, np.integer)):
            dims = (int(shape),)
        else:
            dims = tuple(int(n) for n in shape)
        if any(n < 0 for n in dims):
            raise ValueError("negative dimension in shape %r" % (dims,))
        nbytes = int(np.prod(dims, dtype=np.int64)) * dt.itemsize
        if offset + nbytes > self.nbytes:
            raise ValueError("%d bytes at offset %d do not fit region %d's %d bytes"
                             % (nbytes, offset, self.id, self.nbytes))
        return b[offset:offset + nbytes].view(dt).reshape(dims)

    def offset_of(self, arr: npt.NDArray[Any]) -> int:
        """Where the C-contiguous array ``arr`` (a view of this region) starts
        in it.  Raises ValueError when ``arr`` is not contiguous or not inside
        the region."""
        self._open_bytes()
        if not isinstance(arr, np.ndarray):
            raise TypeError("expected a NumPy array viewing region %d, not %s"
                            % (self.id, type(arr).__name__))
        if not arr.flags.c_contiguous:
            raise ValueError("a frame's array in region %d must be C-contiguous" % self.id)
        # While the region is open its mapping lives (self._bytes holds it),
        # so no other memory can lie at these addresses.
        offset: int = arr.__array_interface__["data"][0] - self._base
        if not 0 <= offset <= self.nbytes - arr.nbytes:
            raise ValueError("the array does not lie in region %d (use region.array() to "
                             "make views of it)" % self.id)
        return offset

    def frame(self, x: npt.NDArray[Any], out: Union[int, npt.NDArray[Any]],
              out_capacity: Optional[int] = None) -> ShmFrame:
        """A :class:`ShmFrame` whose input is the array ``x``, a C-contiguous
        view of this region; its result has ``x``'s dtype and shape as a
        socket frame's would.  ``out`` is where the result goes: a byte offset
        in the region (room: ``out_capacity``, default up to the region's
        end) or an array viewing the region (room: its bytes)."""
        in_offset = self.offset_of(x)
        if isinstance(out, np.ndarray):
            out_offset = self.offset_of(out)
            if out_capacity is None:
                out_capacity = out.nbytes
        else:
            out_offset = out
        return ShmFrame(self, in_offset, x.nbytes, out_offset, out_capacity,
                        dtype=x.dtype, shape=x.shape)

    def close(self) -> None:
        """Removes the region from the daemon (REGION_REMOVE) and releases the
        mapping here.  Raises BusyError, changing nothing, while frames of a
        stream are in flight.  Views of the region stay valid: the mapping
        goes with the last of them.  Closing twice does nothing; closing a
        region of a closed client only releases the mapping (the daemon
        removed the region with the connection)."""
        if not self.closed:
            self._client._region_remove(self)

    def _release(self) -> None:
        """Marks the region closed and unmaps it, or leaves that to the last
        view of it.  Unmapping under a live view would crash the interpreter
        on its next use; mmap refuses (BufferError) while one exists."""
        self._client._region_forget(self)
        self._bytes = None
        mapping, self._mmap = self._mmap, None
        if mapping is None:
            return
        try:
            mapping.close()
        except BufferError:
            pass  # views remain; mmap unmaps when it is collected

    def _view(self, offset: int, nbytes: int, dtype: np.dtype[Any],
              shape: Tuple[int, ...]) -> npt.NDArray[Any]:
        """The region's ``nbytes`` at ``offset`` as an array of dtype and shape."""
        b = self._open_bytes()
        return b[offset:offset + nbytes].view(dtype).reshape(shape)


class ShmFrame:
    """One frame by reference: its input is ``in_bytes`` at ``in_offset`` of
    ``region``, its output goes to ``out_offset`` with ``out_capacity`` bytes
    of room (None: up to the region's end).  ``dtype`` and ``shape`` describe
    the input as an array would (None: raw bytes) and give the result's type
    as for a socket frame.  Usually made by :meth:`Region.frame`.

    Offsets are not checked here beyond fitting 64 bits: the daemon is the
    authority and refuses a frame that does not fit its region
    (``bad_descriptor``) or its pipeline (``bad_length``).  The input must not
    change, and the output range must not be read, until the frame's result
    has been delivered.
    """

    __slots__ = ("region", "in_offset", "in_bytes", "out_offset", "out_capacity", "dtype",
                 "shape")

    def __init__(self, region: Region, in_offset: int, in_bytes: int, out_offset: int,
                 out_capacity: Optional[int] = None, *, dtype: npt.DTypeLike = None,
                 shape: Optional[Sequence[int]] = None) -> None:
        if not isinstance(region, Region):
            raise TypeError("a ShmFrame's region is a gpuframe.Region, not %s"
                            % type(region).__name__)
        self.region = region
        self.in_offset = _u64("in_offset", in_offset)
        self.in_bytes = _u64("in_bytes", in_bytes)
        self.out_offset = _u64("out_offset", out_offset)
        if out_capacity is None:
            out_capacity = max(region.nbytes - self.out_offset, 0)
        self.out_capacity = _u64("out_capacity", out_capacity)
        self.dtype: Optional[np.dtype[Any]] = None if dtype is None else np.dtype(dtype)
        if self.dtype is not None and self.dtype.hasobject:
            raise TypeError("a frame cannot hold Python objects (dtype %s)" % self.dtype)
        self.shape: Optional[Tuple[int, ...]] = (
            None if shape is None else tuple(int(n) for n in shape))

    def __repr__(self) -> str:
        return ("ShmFrame(region=%d, in_offset=%d, in_bytes=%d, out_offset=%d, "
                "out_capacity=%d%s)" % (
                    self.region.id, self.in_offset, self.in_bytes, self.out_offset,
                    self.out_capacity,
                    "" if self.dtype is None else ", dtype=%s, shape=%r" % (self.dtype,
                                                                          self.shape)))


def _page_round(nbytes: int) -> int:
    """``nbytes`` rounded up to whole pages, at least one."""
    page = mmap.PAGESIZE
    return max(1, -(-nbytes // page)) * page


class FrameBuffers(_ClosedOnExit):
    """Frame buffers in shared memory, which a producer fills in place: made
    by ``client.frame_buffers(count, nbytes)``, never directly.  The Python
    form of libgpuframe's gf_client_shm_* functions, with their layout.

    ``count`` entries in one :class:`Region` (``region``): entry ``i`` has an
    input of ``in_nbytes`` bytes (:meth:`input`, where the producer writes
    frame ``i``) and an output of ``out_nbytes`` bytes, where the daemon
    writes its result; each starts on a page of its own, the inputs one
    after another, then the outputs, so that frames whose size is a multiple
    of the page size lie back to back and the daemon moves a batch of them
    in one copy.  :meth:`frame` makes the :class:`ShmFrame` that
    :meth:`~gpuframe.Client.stream`, ``map`` and ``process`` take; its result
    is a NumPy view of the entry's output.

    An entry is free to write again once its frame's result has been
    yielded, and its output is overwritten by the entry's next frame: in a
    stream with ``window`` at most ``count`` that filled entry ``k % count``
    for frame ``k``, both hold when the stream asks for frame ``k``.  Use it
    as a context manager, or call :meth:`close` (the region's).
    """

    def __init__(self, region: Region, count: int, in_nbytes: int, out_nbytes: int) -> None:
        self.region = region
        self.count = count
        self.in_nbytes = in_nbytes
        self.out_nbytes = out_nbytes
        self._in_stride = _page_round(in_nbytes)
        self._out_stride = _page_round(out_nbytes)

    @staticmethod
    def region_bytes(count: int, in_nbytes: int, out_nbytes: int) -> int:
        """The size of the region that ``count`` entries need."""
        return count * (_page_round(in_nbytes) + _page_round(out_nbytes))

    def __repr__(self) -> str:
        return "<gpuframe.FrameBuffers %d x (%d in, %d out) in %r>" % (
            self.count, self.in_nbytes, self.out_nbytes, self.region)

    @property
    def closed(self) -> bool:
        """True once the region is closed."""
        return self.region.closed

    def close(self) -> None:
        """Closes the region (:meth:`Region.close`)."""
        self.region.close()

    def _entry(self, entry: int) -> int:
        if isinstance(entry, bool) or not isinstance(entry, (int, np.integer)) \
                or not 0 <= entry < self.count:
            raise IndexError("entry %r: the frame buffers are 0 to %d" % (entry, self.count - 1))
        return int(entry)

    def input_offset(self, entry: int) -> int:
        """Where entry ``entry``'s input starts in the region."""
        return self._entry(entry) * self._in_stride

    def output_offset(self, entry: int) -> int:
        """Where entry ``entry``'s output starts in the region."""
        return self.count * self._in_stride + self._entry(entry) * self._out_stride

    def input(self, entry: int, dtype: npt.DTypeLike = np.uint8,
              shape: Union[None, int, Sequence[int]] = None) -> npt.NDArray[Any]:
        """A writable NumPy view of entry ``entry``'s input: ``dtype`` values
        in ``shape`` (None: as many as fit in ``in_nbytes``).  Raises
        ValueError when that does not fit ``in_nbytes``."""
        offset = self.input_offset(entry)
        dt = np.dtype(dtype)
        if shape is None:
            shape = self.in_nbytes // max(dt.itemsize, 1)
        view = self.region.array(dt, offset, shape)
        if view.nbytes > self.in_nbytes:
            raise ValueError("%d bytes do not fit a frame buffer of %d"
                             % (view.nbytes, self.in_nbytes))
        return view

    def frame(self, entry: int, x: Union[int, npt.NDArray[Any]]) -> ShmFrame:
        """The :class:`ShmFrame` of entry ``entry``: its input is ``x``, a
        view of that entry's input (as :meth:`input` gives; the result has its
        dtype and shape as a socket frame of ``x`` would), or the first ``x``
        bytes of it (an int; a flat result); its output is the entry's
        output.  Raises ValueError when ``x`` is not inside the entry's
        input."""
        base = self.input_offset(entry)
        out = self.output_offset(entry)
        if isinstance(x, np.ndarray):
            offset = self.region.offset_of(x)
            if not base <= offset <= base + self.in_nbytes - x.nbytes:
                raise ValueError("the array does not lie in frame buffer %d (use "
                                 "frame_buffers.input(%d) to make views of it)" % (entry, entry))
            return ShmFrame(self.region, offset, x.nbytes, out, self._out_stride,
                            dtype=x.dtype, shape=x.shape)
        nbytes = _u64("nbytes", x)
        if nbytes > self.in_nbytes:
            raise ValueError("%d bytes do not fit a frame buffer of %d" % (nbytes, self.in_nbytes))
        return ShmFrame(self.region, base, nbytes, out, self._out_stride)


def _output_layout(pipeline: Pipeline,
                   frame: ShmFrame) -> Tuple[np.dtype[Any], Optional[Tuple[int, ...]]]:
    """(dtype, shape or None) of the result of ``frame`` through ``pipeline``,
    as encode_frame gives for a socket frame (-1 in the shape: decided by the
    result's length); shape None: the output's length in dtype items.  Raises
    TypeError for an input dtype the pipeline does not take: its bytes are
    read as they lie, so nothing can convert them."""
    if frame.dtype is not None:
        input_dtype(pipeline, frame.dtype, in_place=True)
    return result_layout(pipeline, frame.dtype, frame.shape)


def encode_shm(pipeline: Pipeline, frame: ShmFrame, client: object) -> EncodedFrame:
    """Prepares the ShmFrame ``frame`` for ``pipeline`` on ``client``'s
    connection: the payload is its 40-byte descriptor (version 2, FLAG_SHM),
    the RESULT's payload is the 24-byte answer, and the result delivered is a
    NumPy view of the region where that answer says the output is, checked
    against what was asked (else a ProtocolError fails that frame).  Raises
    ValueError for a region of another client, TypeError for an input dtype
    the kind does not take."""
    region = frame.region
    if region.client is not client:
        raise ValueError("%r belongs to another client; a region id means something on "
                         "its own connection only" % (region,))
    dtype, shape = _output_layout(pipeline, frame)
    expect = _expect(pipeline, frame.in_bytes)
    payload = protocol.encode_shm_frame(region.id, frame.in_offset, frame.in_bytes,
                                        frame.out_offset, frame.out_capacity)

    def finish(answer: Any, header: protocol.Header) -> npt.NDArray[Any]:
        got = protocol.decode_shm_result(answer)
        if region.closed:
            # Only a RESULT the daemon should have refused (unknown_region).
            raise ProtocolError("shm RESULT for frame_id %d of region %d, which is closed "
                                "here" % (header.frame_id, region.id))
        want = "region %d offset %d" % (region.id, frame.out_offset)
        if expect == REFUSED:
            want += " (none: the pipeline refuses %d bytes)" % frame.in_bytes
        elif expect is not None:
            want += " bytes %d" % expect
        else:
            want += " at most %d bytes" % frame.out_capacity
        if got.region_id != region.id or got.out_offset != frame.out_offset \
                or expect == REFUSED or (expect is not None and got.out_bytes != expect) \
                or got.out_bytes > frame.out_capacity \
                or got.out_bytes > region.nbytes - got.out_offset:
            raise ProtocolError(
                "shm RESULT for frame_id %d says region %d offset %d bytes %d, but the frame "
                "asked for %s; call list() again if the pipelines changed"
                % (header.frame_id, got.region_id, got.out_offset, got.out_bytes, want))
        out_shape = _resolve(shape, dtype, got.out_bytes)
        if out_shape is None:
            out_shape = (got.out_bytes // dtype.itemsize,)
        return region._view(got.out_offset, got.out_bytes, dtype, out_shape)

    return EncodedFrame(memoryview(payload), protocol.SHM_RESULT_BYTES, _descriptor_output,
                        version=protocol.VERSION_SHM, flags=protocol.FLAG_SHM, finish=finish)


def _descriptor_output(nbytes: int) -> Tuple[bytearray, memoryview]:
    out = bytearray(nbytes)
    return out, memoryview(out)
