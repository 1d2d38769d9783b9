# SPDX-License-Identifier: MIT
"""gpuframe-export without PyTorch (CI has none): its help, its arguments,
the tensors' text it shares with the plugin's parameters, the pipeline it
prints, and the one line it says where PyTorch is missing.  Exporting and
checking a model runs on a GPU machine, in test_torch_gpu.py."""

import argparse
import contextlib
import io
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import unittest

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


if __name__ == "__main__":
    unittest.main(verbosity=2)
