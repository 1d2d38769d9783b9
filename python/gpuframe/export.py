# SPDX-License-Identifier: MIT
"""gpuframe-export: a PyTorch model as a gpuframed pipeline.

Exports a module with torch.export, with a dynamic batch dimension (1 to
``--max-batch`` frames), compiles it with AOTInductor into a package (.pt2,
``torch._inductor.aoti_compile_and_package``), checks the package against the
module run eagerly on random batches of 1, 7 and 64 frames (each capped at
``--max-batch``), and prints the pipeline to paste into gpuframed's
configuration: a stage of the plugin "torch" (plugins/torch/README.md), after
a ``normalize_u8`` stage with ``--rgb8``.

torch.export specialises sizes 0 and 1: with a plain ``Dim("batch", min=1)``
the package is compiled for batches from 2, and AOTInductor refuses a batch
of one ("dim value is too small at 0, expected it to be >= 2").  So the
export and the compile run with ``torch.fx.experimental._config.
backed_size_oblivious`` (the batch symbol's range starts at 0, cut to 1 by
the Dim; shapes are reasoned about for the general size, as a batch
dimension is), from an example batch of 2; where the model does not export
or compile so, or with ``--specialize-zero-one``, as PyTorch does by default,
and the package takes batches from 2: gpuframed pads fewer frames with zeros
(plugins/torch/README.md), and the check here runs them padded the same way.

Each step says so on stderr as it starts and ends.  The check runs in a
process of its own (``--check-only``, as gpuframed loads a package: in
another process than the one that compiled it), under Python's faulthandler:
a package that crashes PyTorch is reported with that process's Python
traceback and signal, and the compiled package is kept.

The package's model object (a shared object AOTInductor compiles with the C++
compiler PyTorch finds: $CXX, else g++) must use the C++ runtime the process
already has, libstdc++.so.6.  A compiler with no shared libstdc++ of its own
(a GCC built into /opt, say) links libstdc++.a into it instead: a second copy
of the runtime's locale tables, which crashes the package's first std::regex
as it loads (a facet of one copy looked up by the other's index).  So by
default (``--libstdcxx auto``) such a compiler is told to link
libstdc++.so.6; plugins/README.md says more.

The module is ``pkg.module:factory`` (a callable of no arguments that returns
an ``nn.Module``; the current directory is importable) or a torchvision model
name (``resnet18``), built with random weights: nothing is downloaded.

This module imports PyTorch only when it runs, so that ``--help`` and the
package's tests work without it.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

__all__ = ["main", "arguments", "serving_module", "frame_outputs", "check_package",
           "check_in_child", "export", "links_libstdcxx_statically", "libstdcxx_configs",
           "TOLERANCES", "parse_tensors", "tensors_text", "within_tolerance", "padded",
           "smallest_batch"]

#: The frames' dtypes as gpuframed names them (PROTOCOL.md, "Frames as tensors").
DTYPE_NAMES = ("uint8", "int32", "int64", "float16", "bfloat16", "float32")
#: Batches the package is checked on against eager PyTorch (each capped at
#: --max-batch): one frame, an odd few, the daemon's largest submission.
CHECK_BATCHES = (1, 7, 64)
#: gpuframed's largest submission: more frames than this never form a batch.
MAX_BATCH_LIMIT = 64

#: A result matches eager PyTorch when max |got - ref| <= tolerance *
#: max(1, max |ref|), by the precision the model computes in.  The compiled
#: model fuses and orders sums its own way, and convolutions may run on TF32
#: (PyTorch's default for cuDNN): float32 results differ by about 1e-3 of
#: their scale; bfloat16 keeps 8 bits of mantissa, float16 11.  A wrong
#: weight, layout or batch mix-up is off by the scale itself.
TOLERANCES = {"float32": 5e-3, "float16": 2e-2, "bfloat16": 5e-2}

#: --libstdcxx: how the package's model object gets the C++ runtime.
LIBSTDCXX_MODES = ("auto", "shared", "compiler")

_TENSOR_RE = re.compile(r"^\s*([a-z0-9]+)\s*\[\s*([0-9,\s]*)\]\s*$")


def parse_tensors(text: str) -> List[Tuple[str, Tuple[int, ...]]]:
    """"float32[3,224,224];int64[]" as [(dtype, shape), ...], as the plugin's
    "inputs" and "outputs" parameters write them.  Raises ValueError."""
    out = []
    for part in text.split(";"):
        m = _TENSOR_RE.match(part)
        if m is None or m.group(1) not in DTYPE_NAMES:
            raise ValueError("%r: expected dtype[d0,d1,...] with a dtype of %s"
                             % (part.strip(), ", ".join(DTYPE_NAMES)))
        dims = tuple(int(d) for d in m.group(2).replace(" ", "").split(",") if d)
        if any(d < 1 for d in dims):
            raise ValueError("%r: dimensions are at least 1" % part.strip())
        out.append((m.group(1), dims))
    return out


def tensors_text(tensors: Sequence[Tuple[str, Sequence[int]]]) -> str:
    """The inverse of parse_tensors: "float32[3,224,224];int64[]"."""
    return ";".join("%s[%s]" % (d, ",".join(str(n) for n in s)) for d, s in tensors)


def within_tolerance(got: Any, ref: Any, precision: str) -> Tuple[bool, float]:
    """Whether tensor ``got`` matches ``ref`` under TOLERANCES[precision]
    (exactly for integer outputs), and max |got - ref| / max(1, max |ref|)."""
    torch = importlib.import_module("torch")
    if not ref.is_floating_point():
        return bool(torch.equal(got, ref)), 0.0 if torch.equal(got, ref) else float("inf")
    g, r = got.double(), ref.double()
    scale = max(1.0, float(r.abs().max())) if r.numel() else 1.0
    err = float((g - r).abs().max()) / scale if r.numel() else 0.0
    return err <= TOLERANCES[precision], err


def padded(torch: Any, xs: Sequence[Any], batch: int) -> List[Any]:
    """Inputs ``xs`` (each batch first) as a batch of ``batch`` frames: their
    frames, then zeros, as gpuframed pads a call for a package that refuses
    smaller batches."""
    return [torch.cat([x, x.new_zeros((batch - x.shape[0],) + tuple(x.shape[1:]))])
            if batch > x.shape[0] else x for x in xs]


def smallest_batch(run: Any, start: int, max_batch: int) -> Tuple[int, Any]:
    """The first batch size of start..max_batch that ``run(size)`` returns
    from without a RuntimeError (AOTInductor's refusal), and what it
    returned; SystemExit naming the first refusal when none does."""
    first = None
    for size in range(start, max_batch + 1):
        try:
            return size, run(size)
        except RuntimeError as e:
            first = first or e
    raise SystemExit("gpuframe-export: the package refuses every batch of %d to %d frames: %s "
                     "(PyTorch's reason is on stderr above)"
                     % (start, max_batch, str(first).strip().splitlines()[0] if first else "?"))


def _torch_dtype(torch: Any, name: str) -> Any:
    return getattr(torch, name)


def _dtype_name(dtype: Any) -> Optional[str]:
    name = str(dtype).replace("torch.", "")
    return name if name in DTYPE_NAMES else None


def _build_model(spec: str) -> Any:
    """The module ``spec`` names: pkg.module:factory, or a torchvision model
    with random weights."""
    if ":" in spec:
        module_name, _, attr = spec.partition(":")
        sys.path.insert(0, os.getcwd())
        factory = getattr(importlib.import_module(module_name), attr)
        return factory()
    try:
        torchvision = importlib.import_module("torchvision")
    except ImportError as e:
        raise SystemExit("gpuframe-export: %r is not pkg.module:factory, and torchvision, "
                         "which would build it, does not import: %s" % (spec, e)) from None
    try:
        return torchvision.models.get_model(spec, weights=None)
    except ValueError as e:
        raise SystemExit("gpuframe-export: %s (torchvision's models: "
                         "torchvision.models.list_models())" % e) from None


def _random_batch(torch: Any, inputs: Sequence[Tuple[str, Tuple[int, ...]]], n: int,
                  device: str, gen: Any) -> List[Any]:
    """Random inputs of n frames: integers over their range (bytes 0..255),
    floats normal."""
    xs = []
    for dtype, shape in inputs:
        size = (n,) + tuple(shape)
        if dtype == "uint8":
            x = torch.randint(0, 256, size, generator=gen, dtype=torch.uint8)
        elif dtype in ("int32", "int64"):
            x = torch.randint(0, 1000, size, generator=gen, dtype=_torch_dtype(torch, dtype))
        else:
            x = torch.randn(size, generator=gen).to(_torch_dtype(torch, dtype))
        xs.append(x.to(device))
    return xs


def _serving_module(torch: Any, model: Any, precision: str, output_dtype: Optional[str]) -> Any:
    """``model`` in eval mode at ``precision``, taking frames of any dtype
    (floats cast to the precision) and giving a tuple of tensors (floats
    cast to output_dtype when given)."""
    compute = _torch_dtype(torch, precision)
    out_dtype = _torch_dtype(torch, output_dtype) if output_dtype else None

    class Serve(torch.nn.Module):  # type: ignore[misc]
        # Named arguments (x0, x1, ...) rather than *xs: torch.export
        # matches dynamic_shapes to them by name.
        def __init__(self) -> None:
            super().__init__()
            self.model = model.eval().to(compute)

        def forward(self, x0: Any, x1: Any = None, x2: Any = None, x3: Any = None,
                    x4: Any = None, x5: Any = None, x6: Any = None, x7: Any = None) -> Any:
            xs = tuple(x.to(compute) if x.is_floating_point() else x
                       for x in (x0, x1, x2, x3, x4, x5, x6, x7) if x is not None)
            ys = self.model(*xs)
            ys = tuple(ys) if isinstance(ys, (tuple, list)) else (ys,)
            if out_dtype is not None:
                ys = tuple(y.to(out_dtype) if y.is_floating_point() else y for y in ys)
            return ys

    return Serve()


def _pipeline(args: argparse.Namespace, package: str, inputs_text: str,
              outputs_text: str) -> Dict[str, Any]:
    """The pipeline entry to paste into gpuframed.json: the plugin's stage,
    after a normalize_u8 stage with --rgb8."""
    stage: Dict[str, Any] = {"kind": "plugin", "path": args.plugin,
                             "params": {"package": package, "inputs": inputs_text,
                                        "outputs": outputs_text}}
    entry: Dict[str, Any] = {"name": args.name}
    if args.rgb8:
        shape = args.tensors[0][1]
        entry["stages"] = [
            {"kind": "normalize_u8", "params": {"width": shape[2], "height": shape[1]}}, stage]
    else:
        entry.update(stage)
    if args.max_batch < MAX_BATCH_LIMIT:
        stage["params"]["max_batch"] = args.max_batch
        entry["max_batch_frames"] = args.max_batch
    return entry


def arguments(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    """gpuframe-export's command line as a Namespace (argparse exits on an
    error); ``tensors`` holds the frame's [(dtype, shape), ...]."""
    p = argparse.ArgumentParser(
        prog="gpuframe-export",
        description="Exports a PyTorch model with a dynamic batch, compiles it with "
                    "AOTInductor into a package (.pt2), checks the package against eager "
                    "PyTorch on batches of 1, 7 and 64 frames, and prints the gpuframed "
                    "pipeline (JSON) that serves it.",
        epilog="Example: gpuframe-export resnet18 --frame 3,224,224 --rgb8 -o resnet18.pt2 "
               "--plugin /usr/local/lib/gpuframed/gf_torch.so > pipeline.json")
    p.add_argument("model", help="pkg.module:factory (a callable returning an nn.Module; "
                                 "the current directory is importable), or a torchvision "
                                 "model name such as resnet18 (random weights: nothing is "
                                 "downloaded)")
    p.add_argument("-o", "--output", required=True, help="the package to write (.pt2)")
    p.add_argument("--frame", help="one frame's shape, without the batch: 3,224,224")
    p.add_argument("--dtype", default="float32", choices=DTYPE_NAMES,
                   help="the frames' dtype (default float32)")
    p.add_argument("--inputs", help="in place of --frame and --dtype, a frame of several "
                                    "tensors: 'float32[3,224,224];int64[]'")
    p.add_argument("--max-batch", type=int, default=MAX_BATCH_LIMIT,
                   help="the most frames one call takes, 1 to 64 (default 64; 1 exports "
                        "without a dynamic batch: the daemon then runs frames one at a time)")
    p.add_argument("--precision", default="float32", choices=sorted(TOLERANCES),
                   help="the dtype the model's weights and arithmetic take (default "
                        "float32); float frames are cast to it inside the model")
    p.add_argument("--output-dtype", choices=DTYPE_NAMES,
                   help="cast float outputs to this dtype (default: as the model gives them)")
    p.add_argument("--rgb8", action="store_true",
                   help="frames arrive as interleaved RGB8 images: the pipeline starts with a "
                        "normalize_u8 stage of the frame's width and height (--frame 3,H,W, "
                        "float32)")
    p.add_argument("--name", help="the pipeline's name (default: the package's file name)")
    p.add_argument("--plugin", default=os.environ.get(
        "GPUFRAME_TORCH_PLUGIN", "/usr/local/lib/gpuframed/gf_torch.so"),
        help="gf_torch.so's path for the pipeline (default $GPUFRAME_TORCH_PLUGIN, else "
             "/usr/local/lib/gpuframed/gf_torch.so)")
    p.add_argument("--libstdcxx", default=os.environ.get("GPUFRAME_EXPORT_LIBSTDCXX", "auto"),
                   help="how the package's model object gets the C++ runtime: shared (linked "
                        "to libstdc++.so.6, as PyTorch is), compiler (as the C++ compiler "
                        "links by default), auto: shared where the compiler would link "
                        "libstdc++ statically, whose second copy crashes the package as it "
                        "loads (default $GPUFRAME_EXPORT_LIBSTDCXX, else auto)")
    p.add_argument("--specialize-zero-one", action="store_true",
                   help="export as PyTorch does by default, specialising sizes 0 and 1: the "
                        "package takes batches from 2, and gpuframed pads fewer frames with "
                        "zeros (by default the batch dimension is exported size-obliviously, "
                        "from 1, falling back to this where the model does not export so)")
    p.add_argument("--device", default="cuda", help="the device to export for (default cuda)")
    p.add_argument("--seed", type=int, default=0, help="seed of the checks' random frames")
    p.add_argument("--no-check", action="store_true", help="skip the check against eager PyTorch")
    p.add_argument("--check-only", action="store_true",
                   help="check the package already at --output against the module, without "
                        "making it (what gpuframe-export runs in a process of its own after "
                        "compiling); prints nothing on stdout")
    argv = list(sys.argv[1:] if argv is None else argv)
    args = p.parse_args(argv)
    args.argv = argv
    if (args.frame is None) == (args.inputs is None):
        p.error("give one frame's tensors: --frame SHAPE (with --dtype) or --inputs TENSORS")
    try:
        if args.inputs is not None:
            args.tensors = parse_tensors(args.inputs)
        else:
            shape = tuple(int(d) for d in args.frame.split(",") if d.strip())
            if any(d < 1 for d in shape):
                raise ValueError("--frame %s: dimensions are at least 1" % args.frame)
            args.tensors = [(args.dtype, shape)]
    except ValueError as e:
        p.error(str(e))
    if args.libstdcxx not in LIBSTDCXX_MODES:
        p.error("--libstdcxx %s (or $GPUFRAME_EXPORT_LIBSTDCXX): expected %s"
                % (args.libstdcxx, ", ".join(LIBSTDCXX_MODES)))
    if len(args.tensors) > 8:
        p.error("a frame holds at most 8 tensors, not %d" % len(args.tensors))
    if not 1 <= args.max_batch <= MAX_BATCH_LIMIT:
        p.error("--max-batch %d: expected 1 to %d" % (args.max_batch, MAX_BATCH_LIMIT))
    if args.rgb8 and (len(args.tensors) != 1 or args.tensors[0][0] != "float32"
                      or len(args.tensors[0][1]) != 3 or args.tensors[0][1][0] != 3):
        p.error("--rgb8 needs frames of float32[3,H,W] (normalize_u8's output)")
    if args.name is None:
        args.name = re.sub(r"[^A-Za-z0-9_.-]", "_", os.path.splitext(
            os.path.basename(args.output))[0]) or "model"
    return args


def _say(text: str) -> None:
    print("gpuframe-export: " + text, file=sys.stderr, flush=True)


def _import_torch() -> Any:
    """torch, with the submodules this module uses imported; and
    $AOTI_RUNTIME_CHECK_INPUTS set (unless set otherwise), as gf_torch.so
    sets it: the package checks every call's inputs against the shapes it
    was exported for (a batch below its smallest is refused, not run), in
    the compile's code and in the check's calls."""
    os.environ.setdefault("AOTI_RUNTIME_CHECK_INPUTS", "1")
    try:
        torch = importlib.import_module("torch")
        for sub in ("torch.export", "torch._inductor"):
            importlib.import_module(sub)
        return torch
    except ImportError as e:
        raise SystemExit("gpuframe-export needs PyTorch (python3 -c 'import torch' fails: %s)"
                         % e) from None


def links_libstdcxx_statically(cxx: str) -> bool:
    """Whether C++ compiler ``cxx`` links libstdc++.a into a shared object
    (it has no libstdc++.so to link): it links a small one with the linker's
    --trace, which names the archive when it takes members of it.  False
    where it cannot link at all (AOTInductor then fails on its own, naming
    the compiler)."""
    with tempfile.TemporaryDirectory(prefix="gpuframe-export.") as d:
        src = os.path.join(d, "probe.cpp")
        with open(src, "w") as f:
            f.write("#include <string>\n"
                    "std::string gf_probe(const char *s) { return std::string(s) + s; }\n")
        try:
            p = subprocess.run([cxx, "-shared", "-fPIC", src, "-o", os.path.join(d, "probe.so"),
                                "-Wl,--trace"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               universal_newlines=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired):
            return False
    return p.returncode == 0 and "libstdc++.a" in p.stdout


def _mapped_libstdcxx() -> Optional[str]:
    """The libstdc++.so.6 this process has loaded (PyTorch's), or None."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "/libstdc++.so" in line}
    except OSError:
        return None
    return min(paths) if paths else None


def libstdcxx_configs(mode: str, cxx: Optional[str] = None) -> Dict[str, Any]:
    """AOTInductor's options for --libstdcxx ``mode``: for shared, and for
    auto where ``cxx`` (default: the compiler AOTInductor uses) links
    libstdc++ statically, the model object is linked to libstdc++.so.6
    (ld's -l:libstdc++.so.6, ahead of the compiler's own -lstdc++, so that
    libstdc++.a adds nothing; $LIBRARY_PATH starts with the directory of
    the one this process maps); {} otherwise.  Says what it chose."""
    if mode == "compiler":
        return {}
    if mode == "auto":
        if cxx is None:
            try:
                cxx = importlib.import_module("torch._inductor.cpp_builder").get_cpp_compiler()
            except Exception:  # no compiler: AOTInductor says so when it compiles
                return {}
        if not links_libstdcxx_statically(cxx):
            return {}
        why = "%s links libstdc++ statically (--libstdcxx auto)" % cxx
    else:
        why = "--libstdcxx shared"
    # The linker looks first where this process's (PyTorch's) came from.
    mapped = _mapped_libstdcxx()
    if mapped:
        os.environ["LIBRARY_PATH"] = os.pathsep.join(
            [os.path.dirname(mapped)] + [d for d in [os.environ.get("LIBRARY_PATH")] if d])
    _say("linking the package's model object to %s, PyTorch's C++ runtime: %s"
         % (mapped or "libstdc++.so.6", why))
    config = importlib.import_module("torch._inductor.config")
    if not hasattr(config.aot_inductor, "custom_op_libs"):
        raise SystemExit("gpuframe-export: this PyTorch (%s) cannot add a library to the "
                         "package's link (aot_inductor.custom_op_libs, PyTorch 2.8): set $CXX "
                         "to a C++ compiler that links libstdc++.so"
                         % importlib.import_module("torch").__version__)
    return {"aot_inductor.custom_op_libs": [":libstdc++.so.6"]}


def serving_module(args: argparse.Namespace) -> Any:
    """The module ``args`` name, as it is exported: built with random
    weights from --seed (the same seed gives the same weights), in eval mode
    at --precision on --device, taking frames and giving a tuple."""
    torch = _import_torch()
    torch.manual_seed(args.seed)
    return _serving_module(torch, _build_model(args.model), args.precision,
                           args.output_dtype).to(args.device)


def frame_outputs(args: argparse.Namespace, serve: Any) -> List[Tuple[str, Tuple[int, ...]]]:
    """One frame's outputs of ``serve`` [(dtype, shape), ...], from a call
    on random frames; SystemExit for outputs frames cannot carry."""
    torch = _import_torch()
    gen = torch.Generator().manual_seed(args.seed)
    n = 2 if args.max_batch > 1 else 1
    with torch.no_grad():
        ys = serve(*_random_batch(torch, args.tensors, n, args.device, gen))
    outputs = []
    for k, y in enumerate(ys):
        name = _dtype_name(y.dtype)
        if name is None or y.dim() < 1 or y.shape[0] != n:
            raise SystemExit("gpuframe-export: output %d is %s %s: a frame's output must be a "
                             "tensor of %s with the batch first (--output-dtype converts floats)"
                             % (k, y.dtype, tuple(y.shape), ", ".join(DTYPE_NAMES)))
        outputs.append((name, tuple(y.shape[1:])))
    return outputs


def check_package(args: argparse.Namespace, serve: Any, package: str) -> None:
    """Runs ``package`` and ``serve`` (eagerly) on random batches of
    CHECK_BATCHES frames (capped at --max-batch), in this process, saying
    each step; SystemExit unless every output is within TOLERANCES.  A
    batch smaller than the package takes runs padded with zeros to the
    smallest it takes, as gpuframed runs it, its padding's outputs dropped."""
    torch = _import_torch()
    gen = torch.Generator().manual_seed(args.seed + 1)
    t0 = time.monotonic()
    _say("loading %s (torch._inductor.aoti_load_package)" % package)
    compiled = torch._inductor.aoti_load_package(package)
    _say("loaded in %.1f s" % (time.monotonic() - t0))
    floor = 1
    for n in sorted({min(b, args.max_batch) for b in CHECK_BATCHES}):
        xs = _random_batch(torch, args.tensors, n, args.device, gen)

        def run(size: int) -> Any:
            got = compiled(*padded(torch, xs, size))
            if args.device.startswith("cuda"):
                torch.cuda.synchronize()  # a fault in the package's kernels shows here
            return got

        with torch.no_grad():
            ref = serve(*xs)
            _say("batch of %d: running the package on %s" % (n, ", ".join(
                "%s%s" % (str(x.dtype).replace("torch.", ""), list(x.shape)) for x in xs)))
            size, got = smallest_batch(run, max(n, floor), args.max_batch)
        if size > n:
            floor = size
            _say("batch of %d: the package takes batches from %d (PyTorch specialised sizes 0 "
                 "and 1); ran padded with zeros to %d, as gpuframed runs it" % (n, size, size))
        got = tuple(got) if isinstance(got, (tuple, list)) else (got,)
        got = tuple(g[:n] for g in got)
        if len(got) != len(ref):
            raise SystemExit("gpuframe-export: the package gives %d outputs, eager PyTorch %d"
                             % (len(got), len(ref)))
        for k, (g, r) in enumerate(zip(got, ref)):
            ok, err = within_tolerance(g, r, args.precision) if g.shape == r.shape \
                else (False, float("inf"))
            tol = TOLERANCES[args.precision] if r.is_floating_point() else 0.0
            _say("batch of %d, output %d: max |diff| %.3g of its scale (tolerance %.3g)"
                 % (n, k, err, tol))
            if not ok:
                raise SystemExit("gpuframe-export: the package does not match eager PyTorch "
                                 "on a batch of %d (output %d: %s against %s, error %.3g)"
                                 % (n, k, tuple(g.shape), tuple(r.shape), err))


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "signal %d" % number


def check_in_child(args: argparse.Namespace, package: str) -> None:
    """check_package in a process of its own (this command with
    --check-only, under faulthandler, seeing this process's sys.path);
    SystemExit when it fails or dies, naming the signal."""
    argv = [a for a in args.argv if a != "--check-only"]
    cmd = [sys.executable, "-X", "faulthandler", "-m", "gpuframe.export"] + argv + [
        "--check-only", "--output", package]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [os.getcwd()] + sys.path if p)
    _say("checking in a process of its own: %s" % " ".join(cmd[1:]))
    rc = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL).returncode
    if rc < 0:
        raise SystemExit("gpuframe-export: the check of %s died of %s: the package crashed "
                         "PyTorch (that process's Python traceback is above; the package is "
                         "kept)" % (package, _signal_name(-rc)))
    if rc != 0:
        raise SystemExit("gpuframe-export: the check of %s failed (above)" % package)


def _size_oblivious(on: bool) -> Any:
    """A context in which torch.export and AOTInductor reason about backed
    sizes for the general case, not specialising 0 and 1
    (torch.fx.experimental._config.backed_size_oblivious), when ``on``."""
    if not on:
        return contextlib.nullcontext()
    config = importlib.import_module("torch.fx.experimental._config")
    return config.patch(backed_size_oblivious=True)


def _batch_floor(program: Any) -> Optional[int]:
    """The smallest batch ``program`` was exported for, as AOTInductor's
    input check will have it: the lower bound of its first input's batch
    symbol in the export's shape environment (a Dim's range_constraints
    say the Dim's min whatever the tracing made of it).  None where that
    cannot be read."""
    try:
        names = set(program.graph_signature.user_inputs)
        node = next(n for n in program.graph.nodes if n.op == "placeholder" and n.name in names)
        dim = node.meta["val"].shape[0]
        if isinstance(dim, int):
            return dim
        value_ranges = importlib.import_module("torch.utils._sympy.value_ranges")
        return int(value_ranges.bound_sympy(dim.node.expr, dim.node.shape_env.var_to_range).lower)
    except Exception:  # the message says "?" instead
        return None


def _compile(torch: Any, program: Any, package: str, configs: Dict[str, Any]) -> str:
    """aoti_compile_and_package of ``program`` into ``package`` with
    ``configs``; without the metadata where this PyTorch keeps none."""
    try:
        return str(torch._inductor.aoti_compile_and_package(
            program, package_path=package, inductor_configs=configs))
    except Exception as e:  # a PyTorch without the option: the plugin probes instead
        if "metadata" not in str(e):
            raise
        _say("this PyTorch keeps no metadata in a package (%s): compiling without" % e)
        configs = {k: v for k, v in configs.items() if k != "aot_inductor.metadata"}
        return str(torch._inductor.aoti_compile_and_package(
            program, package_path=package, inductor_configs=configs))


def export(args: argparse.Namespace, serve: Any = None, reuse: bool = False) -> Dict[str, Any]:
    """Exports ``serve`` (serving_module(args) when None), compiles it into
    --output, checks it in a process of its own (unless --no-check), and
    returns the pipeline entry.  The batch dimension is exported
    size-obliviously where the model allows (the module's docstring), else
    as PyTorch does by default.  With ``reuse``, the package already at
    --output (made by the same PyTorch from the same module: the caller
    knows) is checked here, in this process, not made again."""
    torch = _import_torch()
    if serve is None:
        serve = serving_module(args)
    outputs = frame_outputs(args, serve)
    inputs_text, outputs_text = tensors_text(args.tensors), tensors_text(outputs)
    package = os.path.abspath(args.output)
    if not reuse:
        gen = torch.Generator().manual_seed(args.seed)
        example = _random_batch(torch, args.tensors, 2 if args.max_batch > 1 else 1,
                                args.device, gen)
        dynamic: Any = None
        if args.max_batch > 1:
            batch = torch.export.Dim("batch", min=1, max=args.max_batch)
            dynamic = {"x%d" % k: {0: batch} for k in range(len(args.tensors))}
        # The frames, for the plugin to check its parameters against.
        configs: Dict[str, Any] = {"aot_inductor.metadata": {
            "gpuframe.inputs": inputs_text, "gpuframe.outputs": outputs_text,
            "gpuframe.max_batch": str(args.max_batch)}}
        configs.update(libstdcxx_configs(args.libstdcxx))
        ways = [False] if args.specialize_zero_one or dynamic is None else [True, False]
        for oblivious in ways:
            how = "size-obliviously (backed_size_oblivious)" if oblivious else \
                "as PyTorch does by default (sizes 0 and 1 specialised)"
            _say("exporting %s: frames %s -> %s, batches of 1 to %d, %s, %s (torch.export.export)"
                 % (args.model, inputs_text, outputs_text, args.max_batch, args.precision, how))
            t0 = time.monotonic()
            try:
                with _size_oblivious(oblivious), torch.no_grad():
                    program = torch.export.export(serve, tuple(example), dynamic_shapes=dynamic)
                    floor = _batch_floor(program) if dynamic is not None else 1
                    _say("exported in %.1f s: batches from %s; compiling with AOTInductor "
                         "(torch._inductor.aoti_compile_and_package; minutes for a large model)"
                         % (time.monotonic() - t0, "?" if floor is None else floor))
                    t0 = time.monotonic()
                    package = os.path.abspath(_compile(torch, program, package, configs))
                break
            except Exception as e:
                if not oblivious:
                    raise
                _say("the model does not export or compile size-obliviously (%s: %s): again as "
                     "PyTorch does by default, whose package takes batches from 2 (gpuframed "
                     "pads a single frame)" % (type(e).__name__, str(e).strip().splitlines()[0]
                                               if str(e).strip() else ""))
        _say("compiled %s in %.1f s" % (package, time.monotonic() - t0))
    if not args.no_check:
        if reuse:
            check_package(args, serve, package)
        else:
            check_in_child(args, package)
    _say("checked %s" % package if reuse else "wrote %s" % package)
    return _pipeline(args, package, inputs_text, outputs_text)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The console script: prints the pipeline JSON on stdout."""
    args = arguments(argv)
    if args.check_only:
        package = os.path.abspath(args.output)
        if not os.path.isfile(package):
            raise SystemExit("gpuframe-export: %s: no such package" % package)
        check_package(args, serving_module(args), package)
        _say("%s matches the module" % package)
        return 0
    print(json.dumps(export(args), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
