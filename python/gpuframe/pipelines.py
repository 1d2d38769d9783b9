# SPDX-License-Identifier: MIT
"""Pipelines as the daemon's LIST reply describes them, and how frames of each
kind go onto the wire and come back as NumPy arrays or bytes.

LIST says what every pipeline's frames and results hold, as tensors
(PROTOCOL.md, "Frames as tensors"): ``Pipeline.inputs`` and
``Pipeline.outputs``, each a tuple of :class:`TensorSpec` (dtype and shape, -1
for the dimension a frame's length decides).  Array frames are checked
against the input's dtype and results come back as arrays of the output's
dtype and shape, whatever the kind: a plugin's, a chain's ("classify":
uint8 (32, 32, 3) in, float32 (1, 10) out), a newer daemon's.  The built-in
kinds, as PROTOCOL.md's "Pipelines" table has them:

============== ============================== ===================================
kind           input                          output
============== ============================== ===================================
echo           any bytes                      the same bytes
affine         float32 array                  float32, same shape
sincos         float32 array                  float32, same shape
normalize_u8   uint8, width*height*3 bytes    float32 planes, shape (3, height, width)
============== ============================== ===================================

A frame or result of several tensors is one NumPy record (a structured
array of shape ()) with a field per tensor, "t0", "t1", ...  bfloat16 is
``ml_dtypes.bfloat16`` where ml_dtypes is installed, else its bits as
uint16.  A pipeline whose LIST entry has no ``inputs`` (a daemon older than
them) and whose kind this package does not know still streams: its frames go
as bytes and its results come back as flat uint8 arrays (or bytearrays).
"""

from __future__ import annotations

import collections.abc
import importlib
from typing import (TYPE_CHECKING, Any, Callable, Dict, Iterable, Iterator, List, Mapping,
                    Optional, Tuple, Union, overload)

import numpy as np

from .errors import NoSuchPipelineError, ProtocolError

if TYPE_CHECKING:
    import numpy.typing as npt

    from .protocol import Header

__all__ = ["Pipeline", "Pipelines", "KNOWN_KINDS", "TensorSpec", "Frame", "Result"]

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
# LIST's limits on a frame's tensors (kernels/gpuframe_plugin.h).
_TENSORS_MAX = 8
_RANK_MAX = 8


def _bfloat16() -> np.dtype[Any]:
    """ml_dtypes' bfloat16 where installed, else uint16 (its bits)."""
    try:
        ml_dtypes = importlib.import_module("ml_dtypes")
    except ImportError:
        return np.dtype("<u2")
    return np.dtype(ml_dtypes.bfloat16)


#: LIST's dtype names as NumPy dtypes, little-endian as the wire has them.
DTYPES: Dict[str, np.dtype[Any]] = {
    "uint8": _U8, "int16": np.dtype("<i2"), "int32": np.dtype("<i4"), "int64": np.dtype("<i8"),
    "float16": np.dtype("<f2"), "bfloat16": _bfloat16(), "float32": _F32,
}


class TensorSpec:
    """One tensor of a frame or result, as LIST describes it.

    Attributes:
        dtype_name: LIST's name ("uint8", "int16", "int32", "int64", "float16",
            "bfloat16", "float32", or a newer daemon's).
        dtype: its NumPy dtype, little-endian (None for a name this package
            does not know).
        shape: one frame's dimensions, -1 for the one its length decides.
    """

    __slots__ = ("dtype_name", "dtype", "shape")

    def __init__(self, dtype_name: str, shape: Iterable[int]) -> None:
        self.dtype_name = dtype_name
        self.dtype: Optional[np.dtype[Any]] = DTYPES.get(dtype_name)
        self.shape: Tuple[int, ...] = tuple(int(n) for n in shape)

    def __repr__(self) -> str:
        return "TensorSpec(%r, %r)" % (self.dtype_name, self.shape)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TensorSpec):
            return NotImplemented
        return (self.dtype_name, self.shape) == (other.dtype_name, other.shape)

    def __hash__(self) -> int:
        return hash((self.dtype_name, self.shape))

    @property
    def variable(self) -> bool:
        """Whether a frame's length decides one of its dimensions."""
        return -1 in self.shape

    @property
    def nbytes(self) -> Optional[int]:
        """Its length in bytes; None when variable or of an unknown dtype."""
        if self.variable or self.dtype is None:
            return None
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


Specs = Tuple[TensorSpec, ...]


def _specs_from_json(v: Any, where: str) -> Specs:
    """LIST's "inputs" or "outputs" as TensorSpecs; ProtocolError when it is
    not a list of 1 to 8 {"dtype": str, "shape": [int >= -1, ...]}."""
    if not isinstance(v, list) or not 1 <= len(v) <= _TENSORS_MAX:
        raise ProtocolError("LIST: %s is not a list of 1 to %d tensors" % (where, _TENSORS_MAX))
    specs = []
    for k, t in enumerate(v):
        shape = t.get("shape") if isinstance(t, dict) else None
        if not isinstance(t, dict) or not isinstance(t.get("dtype"), str) \
                or not isinstance(shape, list) or len(shape) > _RANK_MAX \
                or not all(isinstance(n, int) and not isinstance(n, bool) and n >= -1
                           for n in shape) \
                or shape.count(-1) > (1 if len(v) == 1 else 0):
            raise ProtocolError("LIST: %s[%d] is not a tensor {\"dtype\": ..., \"shape\": "
                                "[...]}: %r" % (where, k, t))
        specs.append(TensorSpec(t["dtype"], shape))
    return tuple(specs)


def _kind_specs(kind: Optional[str], params: Mapping[str, Any]) -> Tuple[Optional[Specs],
                                                                         Optional[Specs]]:
    """A built-in kind's frames as LIST would give them (for a LIST from a
    daemon older than "inputs", and Pipelines made by hand); (None, None)
    for any other kind."""
    if kind == "echo":
        b = (TensorSpec("uint8", (-1,)),)
        return b, b
    if kind in ("affine", "sincos"):
        f = (TensorSpec("float32", (-1,)),)
        return f, f
    if kind == "normalize_u8":
        h, w = int(params["height"]), int(params["width"])
        return ((TensorSpec("uint8", (h, w, _RGB_CHANNELS)),),
                (TensorSpec("float32", (_RGB_CHANNELS, h, w)),))
    return None, None


def _frame_bytes(specs: Optional[Specs]) -> Optional[int]:
    """The fixed length of a frame of `specs`; None when any is not fixed."""
    if specs is None:
        return None
    sizes = [t.nbytes for t in specs]
    return None if None in sizes else sum(s for s in sizes if s is not None)


class Pipeline:
    """One pipeline of the daemon: what a FRAME names by ``id``.

    Attributes:
        id: the number a FRAME carries (the pipeline's position in the daemon's
            configuration; it can change when the daemon restarts).
        name: unique name, as in ``gpuframe list`` (None for an id the LIST
            lacks, which :meth:`Client.pipeline` still lets you send to).
        kind: "echo", "affine", "sincos", "normalize_u8", or a newer kind
            (None as for ``name``).
        params: dict of every parameter with the value in force; for a
            pipeline of several stages, each stage's such dict under the
            stage's kind (a plugin's name; "affine#2" for a second affine).
        doc: one sentence for people.
        inputs: what a frame holds, a tuple of :class:`TensorSpec` (LIST's
            "inputs", or the kind's for a LIST without them); None when
            unknown.
        outputs: what a result holds, likewise.
        info: the whole LIST entry, keys this package does not know included.
    """

    __slots__ = ("id", "name", "kind", "params", "doc", "inputs", "outputs", "info")

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
        self.inputs: Optional[Specs]
        self.outputs: Optional[Specs]
        if "inputs" in self.info and "outputs" in self.info:
            self.inputs = _specs_from_json(self.info["inputs"], "%s.inputs" % name)
            self.outputs = _specs_from_json(self.info["outputs"], "%s.outputs" % name)
        else:
            self.inputs, self.outputs = _kind_specs(kind, self.params)

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
    def stages(self) -> Tuple[Dict[str, Any], ...]:
        """Each stage as LIST describes it, in order: "kind" ("plugin" for a
        plugin, whose name is then "plugin" and its file "path"), "params"
        and the rest; one for a pipeline of one stage."""
        stages = self.info.get("stages")
        if isinstance(stages, list):
            return tuple(dict(s) for s in stages)
        return ({k: v for k, v in self.info.items() if k not in ("id", "name")},)

    @property
    def input_bytes(self) -> Optional[int]:
        """The one input length the pipeline takes (normalize_u8:
        width*height*3), or None when it takes many or it is not known."""
        return _frame_bytes(self.inputs)

    def input_array(self) -> npt.NDArray[Any]:
        """A new zeroed array shaped as one frame (a record of several
        tensors for a frame of several; one element in place of a dimension
        the length decides).  Raises TypeError when the frame is not known."""
        layout = _array_layout(self.inputs)
        if layout is None:
            raise TypeError("pipeline %r does not describe its frames as tensors of known "
                            "dtypes" % self.name)
        dtype, shape = layout
        return np.zeros(tuple(1 if n == -1 else n for n in shape), dtype)

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
        # Any other pipeline: what its fixed frames say (a plugin's, a chain's).
        want, out = _frame_bytes(self.inputs), _frame_bytes(self.outputs)
        if want is not None and out is not None:
            if n != want:
                raise ValueError("pipeline %r takes frames of exactly %d bytes, not %d"
                                 % (self.name, want, n))
            return out
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
        names = [s.get("plugin") or s["kind"] for s in stages]
        kind = "+".join(names)
        # Each stage's parameters under its name ("normalize_u8", "mlp"),
        # a name a stage before it has already taken numbered ("affine#2").
        params = {}
        for k, (stage_name, s) in enumerate(zip(names, stages)):
            if not isinstance(s.get("params", {}), dict):
                raise ProtocolError("LIST: pipelines[%d].stages[%d].params is not an object"
                                    % (index, k))
            repeat = names[:k].count(stage_name)
            params[stage_name if repeat == 0 else "%s#%d" % (stage_name, repeat + 1)] = \
                dict(s.get("params", {}))
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


def _array_layout(specs: Optional[Specs]) -> Optional[Tuple[np.dtype[Any], Tuple[int, ...]]]:
    """(dtype, shape) of an array that holds one frame of `specs`: its tensor's
    own for one (shape with -1 where the length decides), a record with a
    field "t<k>" per tensor for several (shape ()); None when unknown or of a
    dtype this package does not know."""
    if specs is None or any(t.dtype is None for t in specs):
        return None
    if len(specs) == 1:
        dtype = specs[0].dtype
        assert dtype is not None
        return dtype, specs[0].shape
    return np.dtype([("t%d" % k, t.dtype, t.shape) for k, t in enumerate(specs)]), ()


def _resolve(shape: Optional[Tuple[int, ...]], dtype: np.dtype[Any],
             nbytes: int) -> Optional[Tuple[int, ...]]:
    """`shape` with its -1 (if any) made what nbytes of `dtype` give; None
    when nbytes cannot be that shape."""
    if shape is None:
        return None
    fixed = int(np.prod([n for n in shape if n != -1], dtype=np.int64)) * dtype.itemsize
    if -1 not in shape:
        return shape if fixed == nbytes else None
    if fixed == 0 or nbytes % fixed:
        return None
    return tuple(nbytes // fixed if n == -1 else n for n in shape)


def result_layout(pipeline: Pipeline, dtype: Optional[np.dtype[Any]],
                  shape: Optional[Tuple[int, ...]]) -> Tuple[np.dtype[Any],
                                                            Optional[Tuple[int, ...]]]:
    """(dtype, shape) of the result of an array frame of `dtype` and `shape`
    (None: raw bytes): echo gives the frame's own; a pipeline whose output is
    described as its input is, one tensor of a variable length (affine,
    sincos, a clamp plugin), the frame's shape; any other its outputs'
    (-1 resolved from the result's length; shape None: flat)."""
    if pipeline.kind == "echo" and dtype is not None:
        return dtype, shape
    layout = _array_layout(pipeline.outputs)
    if layout is None:
        return _U8, None
    out_dtype, out_shape = layout
    if shape is not None and pipeline.inputs == pipeline.outputs \
            and pipeline.outputs is not None and pipeline.outputs[0].variable:
        return out_dtype, shape
    return out_dtype, out_shape


def _array_output(dtype: np.dtype[Any], shape: Optional[Tuple[int, ...]]) -> MakeOutput:
    """make_output for a result read into a new array of dtype and shape (a
    -1 in it resolved from the result's length); a flat uint8 array when the
    length cannot be that shape."""
    def make(nbytes: int) -> Tuple[npt.NDArray[Any], memoryview]:
        resolved = _resolve(shape, dtype, nbytes)
        if resolved is None:
            return _flat_u8_output(nbytes)
        out = np.empty(resolved, dtype)
        return out, _bytes_view(out)
    return make


def input_dtype(pipeline: Pipeline, dtype: np.dtype[Any], *,
                in_place: bool = False) -> Optional[np.dtype[Any]]:
    """The dtype an array frame of `dtype` goes onto the wire as: the
    pipeline's input dtype (little-endian), or None to send its bytes as
    they are (echo, an unknown frame, a record or raw uint8 bytes for a
    frame of several tensors).  Raises TypeError for a dtype the frame does
    not hold; with `in_place` (a frame read where it lies, in shared memory)
    also for one that would need converting."""
    layout = _array_layout(pipeline.inputs)
    if pipeline.kind == "echo" or layout is None:
        return None
    want = layout[0]
    assert pipeline.inputs is not None
    if len(pipeline.inputs) > 1:
        if dtype == want or dtype == _U8:
            return None
        raise TypeError("%s pipeline %r takes records of its %d tensors (see "
                        "Pipeline.input_array()), or their bytes as uint8, not %s"
                        % (pipeline.kind, pipeline.name, len(pipeline.inputs), dtype))
    name = pipeline.inputs[0].dtype_name
    if dtype == want:
        return want
    byte_order = dtype.kind in "biuf" and dtype.kind == want.kind \
        and dtype.itemsize == want.itemsize
    if in_place:
        raise TypeError("%s pipeline %r takes %s%s, not %s: a frame by reference is read as it "
                        "lies in the region" % (pipeline.kind, pipeline.name,
                                                "little-endian " if want.itemsize > 1 else "",
                                                name, dtype.str if byte_order else dtype))
    if byte_order:
        return want  # another byte order: converted once
    hint = " (convert with .astype(numpy.%s))" % name if hasattr(np, name) else ""
    raise TypeError("%s pipeline %r takes %s arrays, not %s%s"
                    % (pipeline.kind, pipeline.name, name, dtype, hint))


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
    shape and dtype; every other pipeline takes arrays of its input's dtype
    (``Pipeline.inputs``: affine and sincos float32, normalize_u8 uint8 of any
    shape holding width*height*3 values, typically (height, width, 3); a
    frame of several tensors a record as ``Pipeline.input_array()`` makes, or
    its bytes as uint8) and returns arrays of its output's dtype and shape
    (``result_layout``: affine and sincos float32 of the frame's shape,
    normalize_u8 float32 (3, height, width), "classify" float32 (1, 10)).  An
    array that is already C-contiguous and in the wire's byte order is sent
    from its own memory; others are copied once into that layout.
    Other bytes-like objects are sent as they are and their results come back
    as bytearrays.  Raises TypeError for a frame of the wrong type or dtype.
    A length the pipeline refuses is not refused here: the daemon is the
    authority and answers bad_length for that frame.
    """
    if isinstance(frame, np.ndarray):
        if frame.dtype.hasobject:
            raise TypeError("a frame cannot hold Python objects (dtype %s)" % frame.dtype)
        wire = input_dtype(pipeline, frame.dtype)
        arr = np.asarray(frame, order="C") if wire is None \
            else frame.astype(wire, order="C", copy=False)
        out_dtype, out_shape = result_layout(pipeline, frame.dtype, frame.shape)
        make = _array_output(out_dtype, out_shape)
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
