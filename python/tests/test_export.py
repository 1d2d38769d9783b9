# SPDX-License-Identifier: MIT
"""gpuframe-export without PyTorch (CI has none): its help, its arguments,
the tensors' text it shares with the plugin's parameters, the pipeline it
prints, the one line it says where PyTorch is missing, and the way it
exports (size-obliviously, falling back to PyTorch's default) and pads a
batch the package refuses, against a stand-in for PyTorch's API.  Exporting
and checking a real model runs on a GPU machine, in test_torch_gpu.py."""

import argparse
import contextlib
import io
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import types
import unittest
from unittest import mock

import numpy as np

import support
from gpuframe import export


class ExportArgumentsTest(unittest.TestCase):

    def parse_error(self, argv):
        err = io.StringIO()
        with contextlib.redirect_stderr(err), self.assertRaises(SystemExit) as cm:
            export.arguments(argv)
        self.assertEqual(cm.exception.code, 2)
        return err.getvalue().strip().splitlines()[-1]

    def test_help_needs_no_torch(self):
        p = subprocess.run([sys.executable, "-c",
                            "import sys; sys.modules['torch'] = None\n"
                            "from gpuframe.export import main; main(['--help'])"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True, timeout=60 * support.TIMEOUT_SCALE)
        self.assertEqual(p.returncode, 0, p.stdout)
        self.assertIn("usage: gpuframe-export", p.stdout)
        self.assertIn("torchvision", p.stdout)

    def test_without_torch_it_says_so(self):
        p = subprocess.run([sys.executable, "-c",
                            "import sys; sys.modules['torch'] = None\n"
                            "from gpuframe.export import main\n"
                            "main(['resnet18', '--frame', '3,224,224', '-o', '/nonexistent/x'])"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=60 * support.TIMEOUT_SCALE)
        self.assertEqual(p.returncode, 1)
        self.assertEqual(p.stdout, "")
        self.assertRegex(p.stderr, r"^gpuframe-export needs PyTorch \(python3 -c 'import torch' "
                                   r"fails: .*\)\n$")

    def test_check_only_needs_the_package(self):
        # Before PyTorch is imported: the package is named, nothing printed.
        p = subprocess.run([sys.executable, "-c",
                            "import sys; sys.modules['torch'] = None\n"
                            "from gpuframe.export import main\n"
                            "main(['m:f', '--frame', '4', '-o', '/nonexistent/x.pt2', "
                            "'--check-only'])"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=60 * support.TIMEOUT_SCALE)
        self.assertEqual((p.returncode, p.stdout, p.stderr),
                         (1, "", "gpuframe-export: /nonexistent/x.pt2: no such package\n"))
        args = export.arguments(["m:f", "--frame", "4", "-o", "x.pt2", "--seed", "3"])
        self.assertEqual(args.argv, ["m:f", "--frame", "4", "-o", "x.pt2", "--seed", "3"])
        self.assertFalse(args.check_only)

    def test_argument_errors(self):
        self.assertEqual(self.parse_error(["m", "-o", "x.pt2"]),
                         "gpuframe-export: error: give one frame's tensors: --frame SHAPE "
                         "(with --dtype) or --inputs TENSORS")
        self.assertEqual(self.parse_error(["m", "-o", "x.pt2", "--frame", "3,0"]),
                         "gpuframe-export: error: --frame 3,0: dimensions are at least 1")
        self.assertEqual(self.parse_error(["m", "-o", "x.pt2", "--frame", "4", "--max-batch",
                                           "65"]),
                         "gpuframe-export: error: --max-batch 65: expected 1 to 64")
        self.assertEqual(self.parse_error(["m", "-o", "x.pt2", "--inputs", "float64[3]"]),
                         "gpuframe-export: error: 'float64[3]': expected dtype[d0,d1,...] with a "
                         "dtype of uint8, int32, int64, float16, bfloat16, float32")
        self.assertEqual(self.parse_error(["m", "-o", "x.pt2", "--frame", "224,224,3",
                                           "--rgb8"]),
                         "gpuframe-export: error: --rgb8 needs frames of float32[3,H,W] "
                         "(normalize_u8's output)")

    def test_tensors_text_round_trip(self):
        for text in ("float32[3,224,224]", "float16[2,3];int64[]", "uint8[1]"):
            self.assertEqual(export.tensors_text(export.parse_tensors(text)), text)
        self.assertEqual(export.parse_tensors(" bfloat16[ 4, 2 ] ; int32[]"),
                         [("bfloat16", (4, 2)), ("int32", ())])
        for bad in ("float32", "float32[-1]", "float32[0]", "f32[3]", "float32[3];"):
            with self.assertRaises(ValueError, msg=bad):
                export.parse_tensors(bad)

    def test_pipelines_to_paste(self):
        args = export.arguments(["resnet18", "--frame", "3,224,224", "--rgb8", "-o",
                                  "/models/resnet18.pt2", "--plugin", "/p/gf_torch.so"])
        self.assertEqual(args.name, "resnet18")
        self.assertEqual(export._pipeline(args, "/models/resnet18.pt2", "float32[3,224,224]",
                                          "float32[1000]"),
                         {"name": "resnet18", "stages": [
                             {"kind": "normalize_u8", "params": {"width": 224, "height": 224}},
                             {"kind": "plugin", "path": "/p/gf_torch.so",
                              "params": {"package": "/models/resnet18.pt2",
                                         "inputs": "float32[3,224,224]",
                                         "outputs": "float32[1000]"}}]})
        args = export.arguments(["pkg.m:make", "--inputs", "float16[8];int64[]", "-o",
                                  "m.pt2", "--plugin", "/p/gf_torch.so", "--max-batch", "1",
                                  "--name", "tiny"])
        self.assertEqual(export._pipeline(args, "/abs/m.pt2", "float16[8];int64[]",
                                          "float32[2]"),
                         {"name": "tiny", "kind": "plugin", "path": "/p/gf_torch.so",
                          "max_batch_frames": 1,
                          "params": {"package": "/abs/m.pt2", "inputs": "float16[8];int64[]",
                                     "outputs": "float32[2]", "max_batch": 1}})
        self.assertIsInstance(args, argparse.Namespace)

    def test_libstdcxx_mode(self):
        argv = ["m:f", "--frame", "4", "-o", "x.pt2"]
        env = os.environ.pop("GPUFRAME_EXPORT_LIBSTDCXX", None)
        try:
            self.assertEqual(export.arguments(argv).libstdcxx, "auto")
            self.assertEqual(export.arguments(argv + ["--libstdcxx", "shared"]).libstdcxx,
                             "shared")
            os.environ["GPUFRAME_EXPORT_LIBSTDCXX"] = "compiler"
            self.assertEqual(export.arguments(argv).libstdcxx, "compiler")
            self.assertEqual(export.arguments(argv + ["--libstdcxx", "auto"]).libstdcxx, "auto")
            os.environ["GPUFRAME_EXPORT_LIBSTDCXX"] = "static"
            self.assertEqual(self.parse_error(argv),
                             "gpuframe-export: error: --libstdcxx static (or "
                             "$GPUFRAME_EXPORT_LIBSTDCXX): expected auto, shared, compiler")
        finally:
            os.environ.pop("GPUFRAME_EXPORT_LIBSTDCXX", None)
            if env is not None:
                os.environ["GPUFRAME_EXPORT_LIBSTDCXX"] = env
        # "compiler" asks nothing of the compiler or of PyTorch.
        self.assertEqual(export.libstdcxx_configs("compiler"), {})

    def test_which_compilers_link_libstdcxx_statically(self):
        # Compilers as scripts: the linker's --trace names the archive, or
        # the shared library, or the link fails.  Each gets the arguments
        # of a shared object's link with --trace.
        with tempfile.TemporaryDirectory() as d:
            def compiler(name, trace, rc):
                path = os.path.join(d, name)
                with open(path, "w") as f:
                    f.write("#!/bin/sh\ncase \"$*\" in *'-shared -fPIC '*'-Wl,--trace') ;;\n"
                            "*) echo \"unexpected arguments: $*\"; exit 9 ;; esac\n"
                            "printf '%%s\\n' %s\nexit %d\n" % (shlex.quote(trace), rc))
                os.chmod(path, 0o755)
                return path
            self.assertTrue(export.links_libstdcxx_statically(compiler(
                "static", "/opt/gcc/lib64/libstdc++.a(string-inst.o)", 0)))
            self.assertFalse(export.links_libstdcxx_statically(compiler(
                "shared", "/usr/lib/gcc/x86_64-linux-gnu/12/libstdc++.so", 0)))
            self.assertFalse(export.links_libstdcxx_statically(compiler(
                "fails", "/opt/gcc/lib64/libstdc++.a(string-inst.o)", 1)))
            self.assertFalse(export.links_libstdcxx_statically(os.path.join(d, "missing")))
            if shutil.which("g++") is None:
                self.skipTest("no g++ here to probe for real")
            # Debian's g++ links libstdc++.so; told to link the archive, it does.
            self.assertFalse(export.links_libstdcxx_statically("g++"))
            static = os.path.join(d, "g++-static")
            with open(static, "w") as f:
                f.write('#!/bin/sh\nexec g++ -static-libstdc++ "$@"\n')
            os.chmod(static, 0o755)
            self.assertTrue(export.links_libstdcxx_statically(static))

    def test_tolerances_are_stated(self):
        self.assertEqual(export.TOLERANCES, {"float32": 5e-3, "float16": 2e-2,
                                             "bfloat16": 5e-2})
        self.assertEqual(export.CHECK_BATCHES, (1, 7, 64))


class FakeDtype:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return "torch." + self.name


class FakeTensor:
    """What export() reads of a tensor: its shape and dtype."""

    def __init__(self, shape, dtype="float32"):
        self.shape, self.dtype = tuple(shape), FakeDtype(dtype)

    def to(self, what):
        return FakeTensor(self.shape, what.name) if isinstance(what, FakeDtype) else self

    def dim(self):
        return len(self.shape)

    def is_floating_point(self):
        return "float" in self.dtype.name


class FakeTorch:
    """A stand-in for the part of PyTorch's API export() calls: it records
    each export and compile with whether backed_size_oblivious was on, and
    refuses them as told."""

    def __init__(self, refuse_export=False, refuse_compile=False):
        self.calls = []
        self.config = types.ModuleType("torch.fx.experimental._config")
        self.config.backed_size_oblivious = False

        @contextlib.contextmanager
        def patch(**kw):
            saved = {k: getattr(self.config, k) for k in kw}  # AttributeError as PyTorch's
            for k, v in kw.items():
                setattr(self.config, k, v)
            try:
                yield
            finally:
                for k, v in saved.items():
                    setattr(self.config, k, v)
        self.config.patch = patch
        torch = types.ModuleType("torch")
        torch.float32 = FakeDtype("float32")
        torch.Generator = lambda: types.SimpleNamespace(manual_seed=lambda s: None)
        torch.randn = lambda size, generator=None: FakeTensor(size)
        torch.no_grad = contextlib.nullcontext
        ex = types.ModuleType("torch.export")

        def dim(name, min=None, max=None):
            self.calls.append(("Dim", name, min, max))
            return (name, min, max)

        def export_(module, args, dynamic_shapes=None):
            oblivious = getattr(self.config, "backed_size_oblivious", False)
            self.calls.append(("export", oblivious, [a.shape for a in args], dynamic_shapes))
            if refuse_export and oblivious:
                raise RuntimeError("Could not guard on data-dependent expression u0 >= 2\nmore")
            return object()  # no graph: the floor is "?"
        ex.Dim, ex.export = dim, export_
        ind = types.ModuleType("torch._inductor")

        def compile_(program, package_path=None, inductor_configs=None):
            oblivious = getattr(self.config, "backed_size_oblivious", False)
            self.calls.append(("compile", oblivious, sorted(inductor_configs)))
            if refuse_compile and oblivious:
                raise AssertionError("lowering failed")
            return package_path
        ind.aoti_compile_and_package = compile_
        torch.export, torch._inductor = ex, ind
        fx = types.ModuleType("torch.fx")
        fx.experimental = types.ModuleType("torch.fx.experimental")
        fx.experimental._config = self.config
        self.modules = {"torch": torch, "torch.export": ex, "torch._inductor": ind,
                        "torch.fx": fx, "torch.fx.experimental": fx.experimental,
                        "torch.fx.experimental._config": self.config}


def serve_five(*xs):
    """A module of 5 float32 outputs a frame, as export() calls it."""
    return (FakeTensor((xs[0].shape[0], 5)),)


class ExportFlowTest(unittest.TestCase):
    """export() against FakeTorch: how the batch dimension is exported."""

    def export(self, fake, *extra):
        args = export.arguments(["m:f", "--frame", "4", "-o", "/tmp/gf-export-test.pt2",
                                 "--no-check", "--libstdcxx", "compiler"] + list(extra))
        err = io.StringIO()
        with mock.patch.dict(sys.modules, fake.modules), contextlib.redirect_stderr(err), \
                mock.patch.dict(os.environ):
            os.environ.pop("AOTI_RUNTIME_CHECK_INPUTS", None)
            entry = export.export(args, serve_five)
            # Set for the compile and the check, as gf_torch.so sets it.
            self.assertEqual(os.environ.get("AOTI_RUNTIME_CHECK_INPUTS"), "1")
        self.assertEqual(entry["params"]["package"], "/tmp/gf-export-test.pt2")
        self.assertEqual(entry["params"]["outputs"], "float32[5]")
        return err.getvalue()

    def test_size_oblivious_from_a_batch_of_two(self):
        fake = FakeTorch()
        said = self.export(fake)
        dims = {"x0": {0: ("batch", 1, 64)}}
        self.assertEqual(fake.calls, [
            ("Dim", "batch", 1, 64),
            ("export", True, [(2, 4)], dims),
            ("compile", True, ["aot_inductor.metadata"])])
        self.assertFalse(fake.config.backed_size_oblivious)  # restored
        self.assertIn("batches of 1 to 64, float32, size-obliviously (backed_size_oblivious)",
                      said)
        self.assertIn("exported in ", said)
        self.assertIn("batches from ?", said)
        self.assertNotIn("again as PyTorch does", said)

    def test_falls_back_where_the_model_does_not_export_so(self):
        for refusal in ("refuse_export", "refuse_compile"):
            fake = FakeTorch(**{refusal: True})
            said = self.export(fake)
            kinds = [(c[0], c[1]) for c in fake.calls if c[0] != "Dim"]
            self.assertEqual(kinds, [("export", True)] + (
                [("compile", True)] if refusal == "refuse_compile" else []) +
                [("export", False), ("compile", False)], refusal)
            self.assertRegex(said, r"the model does not export or compile size-obliviously "
                                   r"\((RuntimeError: Could not guard on data-dependent expression "
                                   r"u0 >= 2|AssertionError: lowering failed)\): again as PyTorch "
                                   r"does by default, whose package takes batches from 2 "
                                   r"\(gpuframed pads a single frame\)")
            self.assertFalse(fake.config.backed_size_oblivious)

    def test_specialize_zero_one_and_static_batches(self):
        fake = FakeTorch()
        said = self.export(fake, "--specialize-zero-one")
        self.assertEqual([c[:2] for c in fake.calls if c[0] != "Dim"],
                         [("export", False), ("compile", False)])
        self.assertIn("as PyTorch does by default (sizes 0 and 1 specialised)", said)
        fake = FakeTorch()
        self.export(fake, "--max-batch", "1")
        self.assertEqual(fake.calls, [("export", False, [(1, 4)], None),
                                      ("compile", False, ["aot_inductor.metadata"])])

    def test_a_pytorch_without_the_setting(self):
        # The config module without backed_size_oblivious: patch() raises
        # AttributeError, and the export goes on as PyTorch does by default.
        fake = FakeTorch()
        del fake.config.backed_size_oblivious
        said = self.export(fake)
        self.assertIn("AttributeError", said)
        self.assertEqual([c[0] for c in fake.calls if c[0] != "Dim"], ["export", "compile"])


class PaddingTest(unittest.TestCase):
    """The check's padding of a batch the package refuses, as the plugin's."""

    def test_smallest_batch(self):
        tried = []

        def run(size):
            tried.append(size)
            if size < 3:
                raise RuntimeError("run_func_( container_handle_, ...) API call failed")
            return "ran %d" % size
        self.assertEqual(export.smallest_batch(run, 1, 64), (3, "ran 3"))
        self.assertEqual(tried, [1, 2, 3])
        self.assertEqual(export.smallest_batch(run, 7, 64), (7, "ran 7"))
        with self.assertRaises(SystemExit) as cm:
            export.smallest_batch(run, 1, 2)
        self.assertEqual(str(cm.exception),
                         "gpuframe-export: the package refuses every batch of 1 to 2 frames: "
                         "run_func_( container_handle_, ...) API call failed (PyTorch's reason "
                         "is on stderr above)")

        def broken(size):
            raise ValueError("not a refusal")
        with self.assertRaises(ValueError):  # anything else is not a batch size's refusal
            export.smallest_batch(broken, 1, 64)

    def test_padded(self):
        class T:
            """numpy behind the two methods padded() calls."""

            def __init__(self, a):
                self.a, self.shape = a, a.shape

            def new_zeros(self, shape):
                return T(np.zeros(shape, self.a.dtype))
        torch = types.SimpleNamespace(cat=lambda ts: T(np.concatenate([t.a for t in ts])))
        x = T(np.arange(6, dtype=np.float32).reshape(1, 2, 3) + 1)
        k = T(np.array([7], dtype=np.int64))
        px, pk = export.padded(torch, [x, k], 4)
        self.assertEqual(px.a.shape, (4, 2, 3))
        self.assertTrue((px.a[0] == x.a[0]).all())
        self.assertTrue((px.a[1:] == 0).all())
        self.assertEqual(pk.a.tolist(), [7, 0, 0, 0])
        self.assertEqual(pk.a.dtype, np.int64)
        self.assertIs(export.padded(torch, [x], 1)[0], x)  # already big enough


if __name__ == "__main__":
    unittest.main(verbosity=2)
