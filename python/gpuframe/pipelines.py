# SPDX-License-Identifier: MIT
"""Pipelines as the daemon's LIST reply describes them, and how frames of each
kind go onto the wire and come back as NumPy arrays or bytes.

The length rules and output types are PROTOCOL.md's "Pipelines" table:

============== ============================== ===================================
kind           input                          output
============== ============================== ===================================
echo           any bytes                      the same bytes
affine         float32 array                  float32, same shape
sincos         float32 array                  float32, same shape
normalize_u8   uint8, width*height*3 bytes    float32 planes, shape (3, height, width)
============== ============================== ===================================

A kind this package does not know (a newer daemon's) still streams: its frames
go as bytes and its results come back as flat uint8 arrays (or bytearrays).
"""

from __future__ import annotations

import collections.abc
from typing import (TYPE_CHECKING, Any, Callable, Dict, Iterable, Iterator, List, Mapping,
                    Optional, Tuple, Union, overload)

import numpy as np

from .errors import NoSuchPipelineError, ProtocolError

if TYPE_CHECKING:
    import numpy.typing as npt

    from .protocol import Header

__all__ = ["Pipeline", "Pipelines", "KNOWN_KINDS", "Frame", "Result"]

#: What a frame may be: a NumPy array or any bytes-like object.
Frame = Union["npt.NDArray[Any]", bytes, bytearray, memoryview]
#: What a frame's result is: an array, or a bytearray for a bytes-like frame.
Result = Union["npt.NDArray[Any]", bytearray]
#: Allocates the result of an n-byte RESULT: the object delivered and a
#: writable memoryview of exactly n bytes over its memory.
MakeOutput = Callable[[int], Tuple[Any, memoryview]]
#: Turns what was read for a RESULT into what the caller gets, or raises.
Finish = Callable[[Any, "Header"], Any]

#: Kinds whose length rules and output types this package knows.
KNOWN_KINDS = ("echo", "affine", "sincos", "normalize_u8")

# float32 as the wire has it: little-endian whatever the host.
_F32 = np.dtype("<f4")
_U8 = np.dtype(np.uint8)
_F32_BYTES = 4
_RGB_CHANNELS = 3
_U32_MAX = 0xFFFFFFFF


class Pipeline:
    """One pipeline of the daemon: what a FRAME names by ``id``.

    Attributes:
        id: the number a FRAME carries (the pipeline's position in the daemon's
            configuration; it can change when the daemon restarts).
        name: unique name, as in ``gpuframe list`` (None for an id the LIST
            lacks, which :meth:`Client.pipeline` still lets you send to).
        kind: "echo", "affine", "sincos", "normalize_u8", or a newer kind
            (None as for ``name``).
        params: dict of every parameter with the value in force.
        doc: one sentence for people.
        info: the whole LIST entry, keys this package does not know included.
    """

    __slots__ = ("id", "name", "kind", "params", "doc", "info")

    def __init__(self, id: int, name: Optional[str], kind: Optional[str],
                 params: Optional[Mapping[str, Any]] = None, doc: str = "",
                 info: Optional[Mapping[str, Any]] = None) -> None:
        self.id = id
        self.name = name
        self.kind = kind
        self.params: Dict[str, Any] = dict(params or {})
        self.doc = doc
        self.info: Dict[str, Any] = dict(info) if info is not None else {
            "id": id, "name": name, "kind": kind, "params": self.params, "doc": doc}

    def __repr__(self) -> str:
        return "Pipeline(id=%r, name=%r, kind=%r, params=%r)" % (
            self.id, self.name, self.kind, self.params)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Pipeline):
            return NotImplemented
        return self.info == other.info and self.id == other.id

    def __hash__(self) -> int:
        return hash((self.id, self.name, self.kind))

    def as_dict(self) -> Dict[str, Any]:
        """The LIST entry as a new dict."""
        return dict(self.info)

    @property
    def input_bytes(self) -> Optional[int]:
        """The one input length the kind takes (normalize_u8: width*height*3),
        or None when it takes many."""
        if self.kind == "normalize_u8":
            return int(self.params["width"]) * int(self.params["height"]) * _RGB_CHANNELS
        return None

    def output_bytes(self, input_bytes: int) -> Optional[int]:
        """The length of the result of a frame of ``input_bytes`` bytes.

        Raises ValueError when the kind's rule refuses that length (the daemon
        would answer ``bad_length``); returns None for a kind this package does
        not know, whose rule only the daemon knows.
        """
        n = int(input_bytes)
        if n < 0:
            raise ValueError("negative length %d" % n)
        if self.kind == "echo":
            return n
        if self.kind in ("affine", "sincos"):
            if n % _F32_BYTES:
                raise ValueError(
                    "%s takes whole float32 values: %d bytes is not a multiple of 4"
                    % (self.kind, n))
            return n
        if self.kind == "normalize_u8":
            want = self.input_bytes
            assert want is not None
            if n != want:
                raise ValueError(
                    "normalize_u8 %dx%d takes exactly width*height*3 = %d bytes, not %d"
                    % (self.params["width"], self.params["height"], want, n))
            return 4 * n
        return None


def _pipeline_from_json(entry: Any, index: int) -> Pipeline:
    """One element of a LIST reply's "pipelines" as a Pipeline; ProtocolError
    when a key the protocol requires is missing or of the wrong type."""
    if not isinstance(entry, dict):
        raise ProtocolError("LIST: pipelines[%d] is not an object" % index)
    pid, name, kind = entry.get("id"), entry.get("name"), entry.get("kind")
    params = entry.get("params", {})
    stages = entry.get("stages")
    if kind is None and isinstance(stages, list) and stages:
        # A pipeline of several stages (PROTOCOL.md, LIST): named by its
        # stages' kinds, as STATS names it ("normalize_u8+mlp"); the stages
        # stay in ``info``.  Its length rule is the daemon's to apply.
        if not all(isinstance(s, dict) and isinstance(s.get("kind"), str) for s in stages):
            raise ProtocolError("LIST: pipelines[%d].stages has a stage without a kind" % index)
        kind = "+".join(s.get("plugin") or s["kind"] for s in stages)
        params = {}
    if not isinstance(pid, int) or isinstance(pid, bool) or not 0 <= pid <= _U32_MAX:
        raise ProtocolError("LIST: pipelines[%d].id is %r, not a 32-bit id" % (index, pid))
    if not isinstance(name, str) or not isinstance(kind, str):
        raise ProtocolError("LIST: pipelines[%d] lacks a string name or kind" % index)
    if not isinstance(params, dict):
        raise ProtocolError("LIST: pipelines[%d].params is not an object" % index)
    if kind == "normalize_u8":
        for key in ("width", "height"):
            if not isinstance(params.get(key), int):
                raise ProtocolError(
                    "LIST: pipelines[%d] (normalize_u8) lacks an integer %s" % (index, key))
    doc = entry.get("doc", "")
    return Pipeline(pid, name, kind, params, doc if isinstance(doc, str) else "", entry)


class Pipelines(collections.abc.Sequence):  # type: ignore[type-arg]
    """The daemon's pipelines in LIST order, looked up by position or by name.

    ``pipelines["rgb224"]`` is the pipeline of that name (NoSuchPipelineError,
    a LookupError, when there is none); ``pipelines[0]`` the first; ``ids``
    maps every name to its id; ``by_id(n)`` finds one by id.
    """

    def __init__(self, pipelines: Iterable[Pipeline]) -> None:
        self._items = tuple(pipelines)
        self._by_name = {p.name: p for p in self._items if p.name is not None}
        self._by_id = {p.id: p for p in self._items}

    @classmethod
    def from_json(cls, doc: Any) -> Pipelines:
        """Builds the list from a parsed LIST reply ({"pipelines": [...]}).
        Unknown keys are kept in each Pipeline's ``info`` and otherwise
        ignored.  Raises ProtocolError for a document without the keys the
        protocol requires."""
        if not isinstance(doc, dict) or not isinstance(doc.get("pipelines"), list):
            raise ProtocolError("LIST reply has no \"pipelines\" array")
        return cls(_pipeline_from_json(e, i) for i, e in enumerate(doc["pipelines"]))

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, key: Union[int, str]) -> Pipeline: ...

    @overload
    def __getitem__(self, key: slice) -> Tuple[Pipeline, ...]: ...

    def __getitem__(self, key: Union[int, str, slice]) -> Union[Pipeline, Tuple[Pipeline, ...]]:
        if isinstance(key, str):
            try:
                return self._by_name[key]
            except KeyError:
                raise NoSuchPipelineError(
                    "no pipeline named %r (the daemon has: %s)"
                    % (key, ", ".join(self._by_name) or "none")) from None
        return self._items[key]

    def __contains__(self, item: object) -> bool:
        if isinstance(item, str):
            return item in self._by_name
        return item in self._items

    def __iter__(self) -> Iterator[Pipeline]:
        return iter(self._items)

    def __repr__(self) -> str:
        return "Pipelines(%r)" % (list(self._items),)

    def get(self, name: str, default: Optional[Pipeline] = None) -> Optional[Pipeline]:
        """The pipeline called ``name``, or ``default``."""
        return self._by_name.get(name, default)

    def by_id(self, pipeline_id: int, default: Optional[Pipeline] = None) -> Optional[Pipeline]:
        """The pipeline whose id is ``pipeline_id``, or ``default``."""
        return self._by_id.get(pipeline_id, default)

    @property
    def ids(self) -> Dict[str, int]:
        """A new dict mapping each pipeline's name to its id."""
        return {p.name: p.id for p in self._items if p.name is not None}

    @property
    def names(self) -> List[str]:
        """The names in LIST order."""
        return [p.name for p in self._items if p.name is not None]

    def as_dicts(self) -> List[Dict[str, Any]]:
        """The LIST entries as a list of new dicts."""
        return [p.as_dict() for p in self._items]


# ---- frames -----------------------------------------------------------------

#: expect_bytes of a frame whose length the kind's rule refuses: any RESULT is
#: wrong, since the daemon must answer bad_length.
REFUSED = -1


class EncodedFrame:
    """One frame ready for the wire and the recipe for its result.

    ``payload`` is a C-contiguous byte memoryview of the input (the caller's
    own memory where it already had the wire's layout); ``expect_bytes`` the
    RESULT payload length the pipeline's rule gives (None: any, for an
    unknown kind; REFUSED: the daemon will answer bad_length);
    ``make_output(n)`` allocates the result object for an n-byte RESULT and
    returns it with a writable byte memoryview of exactly n bytes over its
    memory, which the reply is read into with no further copy.

    A frame by reference (gpuframe.shm) fills the same roles with
    ``version`` 2 and ``flags`` FLAG_SHM: its payload is a descriptor, its
    RESULT's payload the 24-byte answer, and ``finish(result, header)`` turns
    that answer into a view of the region (None: the result is delivered as
    read).
    """

    __slots__ = ("payload", "expect_bytes", "make_output", "version", "flags", "finish")

    def __init__(self, payload: memoryview, expect_bytes: Optional[int], make_output: MakeOutput,
                 *, version: Optional[int] = None, flags: int = 0,
                 finish: Optional[Finish] = None) -> None:
        self.payload = payload
        self.expect_bytes = expect_bytes
        self.make_output = make_output
        self.version = version  # None: the connection's (version 1)
        self.flags = flags
        self.finish = finish


def _bytes_view(arr: npt.NDArray[Any]) -> memoryview:
    """A flat byte memoryview over the C-contiguous ndarray ``arr``'s memory."""
    return arr.reshape(-1).view(_U8).data


def _array_output(shape: Tuple[int, ...], dtype: np.dtype[Any]) -> MakeOutput:
    """make_output for a result read into a new array of shape and dtype."""
    def make(nbytes: int) -> Tuple[npt.NDArray[Any], memoryview]:
        out = np.empty(shape, dtype)
        assert out.nbytes == nbytes
        return out, _bytes_view(out)
    return make


def _flat_u8_output(nbytes: int) -> Tuple[npt.NDArray[np.uint8], memoryview]:
    out = np.empty(nbytes, _U8)
    return out, out.data


def _bytearray_output(nbytes: int) -> Tuple[bytearray, memoryview]:
    out = bytearray(nbytes)
    return out, memoryview(out)


def _expect(pipeline: Pipeline, nbytes: int) -> Optional[int]:
    """expect_bytes for an input of nbytes to pipeline (see EncodedFrame)."""
    if pipeline.kind is None:
        return None
    try:
        return pipeline.output_bytes(nbytes)
    except ValueError:
        return REFUSED


def encode_frame(pipeline: Pipeline, frame: Frame) -> EncodedFrame:
    """Prepares ``frame`` (a NumPy array or any bytes-like object) for ``pipeline``.

    Arrays: echo takes any dtype without Python objects and returns the same
    shape and dtype; affine and sincos take float32 and return float32 of the
    same shape; normalize_u8 takes uint8 (any shape holding width*height*3
    values, typically (height, width, 3)) and returns float32 (3, height,
    width).  An array that is already C-contiguous and in the wire's byte order
    is sent from its own memory; others are copied once into that layout.
    Other bytes-like objects are sent as they are and their results come back
    as bytearrays.  Raises TypeError for a frame of the wrong type or dtype.
    A length the pipeline refuses is not refused here: the daemon is the
    authority and answers bad_length for that frame.
    """
    kind = pipeline.kind
    if isinstance(frame, np.ndarray):
        if frame.dtype.hasobject:
            raise TypeError("a frame cannot hold Python objects (dtype %s)" % frame.dtype)
        if kind in ("affine", "sincos"):
            if frame.dtype.kind != "f" or frame.dtype.itemsize != _F32_BYTES:
                raise TypeError(
                    "%s pipeline %r takes float32 arrays, not %s (convert with "
                    ".astype(numpy.float32))" % (kind, pipeline.name, frame.dtype))
            arr = frame.astype(_F32, order="C", copy=False)
            make = _array_output(arr.shape, _F32)
        elif kind == "normalize_u8":
            if frame.dtype != _U8:
                raise TypeError(
                    "normalize_u8 pipeline %r takes uint8 RGB arrays, not %s"
                    % (pipeline.name, frame.dtype))
            arr = np.asarray(frame, order="C")
            shape = (_RGB_CHANNELS, int(pipeline.params["height"]),
                     int(pipeline.params["width"]))
            make = _array_output(shape, _F32)
        elif kind == "echo":
            arr = np.asarray(frame, order="C")
            make = _array_output(arr.shape, arr.dtype)
        else:
            arr = np.asarray(frame, order="C")
            make = _flat_u8_output
        payload = _bytes_view(arr)
    else:
        try:
            view = memoryview(frame)
        except TypeError:
            raise TypeError(
                "a frame is a NumPy array or a bytes-like object, not %s"
                % type(frame).__name__) from None
        if not view.c_contiguous:
            view = memoryview(view.tobytes())
        payload = view.cast("B") if (view.format != "B" or view.ndim != 1) else view
        make = _bytearray_output
    return EncodedFrame(payload, _expect(pipeline, payload.nbytes), make)
