# SPDX-License-Identifier: MIT
"""Plugin "torch" on a GPU (label gpu): models exported at test time by the
gpuframe-export command (a small CNN, an MLP, the MLP without a dynamic
batch, the MLP exported as PyTorch does by default (its batches start at 2:
PyTorch specialises sizes 0 and 1), a model of two input tensors, a model
whose call goes through the host's memory, and the CNN again with other
weights), then

- gf_torch.so driven directly (ctypes, as gpuframed drives it), with its
  CUDA graphs (DirectTest) and without (DirectEagerTest): batches of
  exactly 1, 7 and 64 frames and a mixed one whose frames do not all lie at
  one stride, against the module run eagerly, within gpuframe-export's
  stated tolerance (export.TOLERANCES: 5e-3 of the output's scale for
  float32), the guard bytes around every output intact, the package from 2
  running batches of 1 padded; and launches of every batch size 1..64 on
  every stream index after device_open taking no device memory (PyTorch's
  count of cudaMalloc, its reserved bytes and the device's free memory
  unchanged), from device_open's thread, and from another thread once its
  first launches made PyTorch's per-thread handles;
- a real gpuframed on the CUDA engine: LIST's shapes and dtypes, typed
  results from the Python client against eager PyTorch (one client, and 16
  at once so that submissions mix clients' frames), a normalize_u8 -> model
  chain, frames of the wrong length (bad_length naming both lengths), the
  package without a dynamic batch (frames one at a time, said once in the
  log), the package from 2 (single frames padded, said once), a pipeline
  with "cuda_graphs": 0 and a package a graph cannot capture (a step
  through the host's memory: run without graphs, said once), every size
  captured on every lane (the load lines), the device's
  free memory unchanged by a third pass of load, a
  reload to the CNN's other weights under streaming load with no failed
  frame;
- refusals, at start and at reload (the running pipelines kept), each one
  line naming the package and PyTorch's reason: a missing package, a
  truncated one, one whose kernels this GPU cannot load (as one built for
  another GPU), one whose model object needs a symbol this PyTorch lacks
  (as one built by another PyTorch), and parameters the package was not
  exported for.

So that a crash says where it happened and the rest still runs, every step
is a process of its own under Python's faulthandler (its Python traceback on
a fault; LD_PRELOAD=gf_crash_backtrace.so adds the native one): each
package is made by `python3 -X faulthandler -m gpuframe.export`, which says
its steps (export, compile, load, each checked batch) and checks the package
in a process of its own again; then each test class runs as
`test_torch_gpu.py --packages DIR CLASS`.  A failed test prints the log of
the daemon it ran.  Memory is compared device-wide, so ctest runs this alone
(RUN_SERIAL).

--quick (scripts/gpu-torch.sh --quick) makes all but the reload's package and
runs DirectTest and DaemonTest: the results against eager PyTorch (the
plugin's CUDA graphs, and the daemon's pipelines without them).

Skipped (exit 77, with the reason) without PyTorch, a GPU, or the plugin's
PyTorch side (gf_torch_aoti.so, built only with -DTorch_DIR).
"""

import ctypes
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import zipfile

import numpy as np

import support

PLUGIN_DIR = os.environ.get("GF_TEST_PLUGIN_DIR", os.path.join(support.REPO, "build", "plugins"))
PLUGIN_SO = os.path.join(PLUGIN_DIR, "gf_torch.so")
AOTI_SO = os.path.join(PLUGIN_DIR, "gf_torch_aoti.so")

# Set before any package's model object first runs (gf_torch.so sets it too).
os.environ["AOTI_RUNTIME_CHECK_INPUTS"] = "1"
# A daemon of these pipelines loads five packages before it listens.
support.START_TIMEOUT_S = max(support.START_TIMEOUT_S, 300.0)


def why_skip():
    """Why this suite cannot run here, or None."""
    try:
        import torch
    except ImportError as e:
        return "PyTorch does not import: %s" % e
    if not torch.cuda.is_available():
        return "no CUDA device for PyTorch"
    if not os.path.exists(AOTI_SO):
        return "%s was not built (configure with -DTorch_DIR=...)" % AOTI_SO
    return None


# ---- the models (factories gpuframe-export imports as test_torch_gpu:NAME) ----

def small_cnn():
    import torch.nn as nn
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))


def mlp():
    import torch.nn as nn
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 5))


def two_inputs():
    import torch

    class TwoInputs(torch.nn.Module):
        """A float16 vector and an int64 scale per frame: frames of two tensors."""

        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(8, 2)

        def forward(self, x, k):
            return self.lin(x) * (k.unsqueeze(1).to(x.dtype) + 1.0)

    return TwoInputs()


def host_step():
    import torch

    class HostStep(torch.nn.Module):
        """A step through the host's memory: a call that synchronises, which a
        CUDA graph cannot capture."""

        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(64, 5)

        def forward(self, x):
            return self.lin((x.cpu() * 2.0).to(x.device))

    return HostStep()


CNN_FRAME = "float32[3,32,32]"
CNN_OUT = "float32[10]"

# ---- gf_torch.so through ctypes ---------------------------------------------


class Value(ctypes.Structure):
    _fields_ = [("number", ctypes.c_double), ("string", ctypes.c_char_p)]


class Env(ctypes.Structure):
    _fields_ = [("max_input_bytes", ctypes.c_uint64), ("config_dir", ctypes.c_char_p)]


class Frame(ctypes.Structure):
    _fields_ = [("in_dev", ctypes.c_void_p), ("in_bytes", ctypes.c_uint64),
                ("out_dev", ctypes.c_void_p), ("out_bytes", ctypes.c_uint64)]


CREATE = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.POINTER(Value), ctypes.POINTER(Env),
                          ctypes.c_char_p, ctypes.c_size_t)
DESTROY = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
OUTPUT_BYTES = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_uint64,
                                ctypes.c_char_p, ctypes.c_size_t)
DEVICE_OPEN = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32,
                               ctypes.c_char_p, ctypes.c_size_t)
DEVICE_CLOSE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
LAUNCH_BATCH = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_uint32,
                                ctypes.POINTER(Frame), ctypes.c_uint32, ctypes.c_void_p)


class Plugin(ctypes.Structure):
    """gf_plugin of ABI version 3 (kernels/gpuframe_plugin.h), member for member."""
    _fields_ = [("abi_version", ctypes.c_uint32), ("name", ctypes.c_char_p),
                ("doc", ctypes.c_char_p), ("params", ctypes.c_void_p),
                ("param_count", ctypes.c_uint32), ("input_f32", ctypes.c_int),
                ("exact", ctypes.c_int), ("abs_tolerance", ctypes.c_float),
                ("rel_tolerance", ctypes.c_float), ("create", CREATE), ("destroy", DESTROY),
                ("output_bytes", OUTPUT_BYTES), ("max_output_bytes", ctypes.c_void_p),
                ("reference", ctypes.c_void_p), ("device_open", DEVICE_OPEN),
                ("device_close", DEVICE_CLOSE), ("launch", ctypes.c_void_p),
                ("launch_batch", LAUNCH_BATCH), ("max_batch_frames", ctypes.c_uint32),
                ("describe", ctypes.c_void_p), ("flags", ctypes.c_uint32)]


def load_plugin():
    lib = ctypes.CDLL(PLUGIN_SO, mode=os.RTLD_NOW | os.RTLD_LOCAL)
    lib.gf_plugin_entry.restype = ctypes.POINTER(Plugin)
    return lib, lib.gf_plugin_entry().contents


# ---- the suite ----------------------------------------------------------------


#: The packages: gpuframe-export's arguments for each (without -o, --plugin
#: and --name).
SPECS = {
    "cnn": ["test_torch_gpu:small_cnn", "--frame", "3,32,32", "--seed", "1"],
    "cnn_v2": ["test_torch_gpu:small_cnn", "--frame", "3,32,32", "--seed", "2"],
    "mlp": ["test_torch_gpu:mlp", "--frame", "64", "--seed", "3"],
    "mlp_static": ["test_torch_gpu:mlp", "--frame", "64", "--seed", "3", "--max-batch", "1"],
    "mlp_from2": ["test_torch_gpu:mlp", "--frame", "64", "--seed", "3", "--specialize-zero-one"],
    "two": ["test_torch_gpu:two_inputs", "--inputs", "float16[8];int64[]", "--seed", "4"],
    "host_step": ["test_torch_gpu:host_step", "--frame", "64", "--seed", "5"],
}
#: The test classes, each run in a process of its own, in this order.
CLASSES = ("DirectTest", "DirectEagerTest", "DaemonTest", "ReloadTest", "RefusalTest")
#: --quick: the classes that prove the results right against eager PyTorch,
#: and the packages they need (all but the reload's second version).
QUICK_CLASSES = ("DirectTest", "DaemonTest")
QUICK_PACKAGES = ("cnn", "mlp", "mlp_static", "mlp_from2", "two", "host_step")
#: Stream indices the direct tests open a device with (as 2 shards of 2 slots).
LANES = 4


def export_argv(tmp, name):
    return SPECS[name] + ["-o", os.path.join(tmp, name + ".pt2"), "--plugin", PLUGIN_SO,
                          "--name", name]


def child_env():
    """This environment, with this process's sys.path as PYTHONPATH (the
    models' factories are this file's functions)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [os.path.dirname(os.path.abspath(__file__))]
                                        + sys.path if p)
    return env


def exit_text(rc):
    if rc < 0:
        try:
            return "died of %s" % signal.Signals(-rc).name
        except ValueError:
            return "died of signal %d" % -rc
    return "exited with %d" % rc


def make_packages(tmp, names):
    """Makes the packages `names` (of SPECS) with the gpuframe-export command, all at once,
    each in a process of its own (4 compile workers each); prints each one's
    steps (its stderr) as it ends; returns {name: {"pipeline": ...} or
    {"error": why}}."""
    env = child_env()
    env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "4")
    # scripts/gpu-torch.sh sets them to what its link check found to load.
    print("== exports with GPUFRAME_EXPORT_LIBSTDCXX=%s, CXX=%s" % (
        env.get("GPUFRAME_EXPORT_LIBSTDCXX", "(unset: auto)"), env.get("CXX", "(unset)")),
        flush=True)
    procs = {}
    t0 = time.monotonic()
    for name in names:
        cmd = [sys.executable, "-X", "faulthandler", "-m", "gpuframe.export"] + \
            export_argv(tmp, name)
        print("== export %s: %s" % (name, " ".join(cmd)), flush=True)
        err = open(os.path.join(tmp, name + ".log"), "w+")
        procs[name] = (subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err,
                                        universal_newlines=True, env=env), err)
    made = {}
    deadline = t0 + 900 * support.TIMEOUT_SCALE
    for name, (proc, err) in procs.items():
        try:
            out = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))[0]
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            proc.kill()
            out, rc = proc.communicate()[0], None
        err.seek(0)
        for line in err.read().splitlines():
            print("[%s] %s" % (name, line))
        err.close()
        if rc == 0:
            made[name] = {"pipeline": json.loads(out)}
            print("exported %s (%.1f s in all): %s" % (name, time.monotonic() - t0,
                                                       json.dumps(made[name]["pipeline"])),
                  flush=True)
        else:
            why = "gpuframe-export %s (its output is above, [%s])" % (
                "timed out" if rc is None else exit_text(rc), name)
            made[name] = {"error": why}
            print("FAILED to export %s: %s" % (name, why), flush=True)
    return made


class Models:
    """The packages the parent process made (make_packages), and their
    modules, built again here from the same arguments (the same seed gives
    the same weights)."""

    def __init__(self, tmp, made):
        from gpuframe import export
        self.dir = tmp
        self.made = made
        self.args = {name: export.arguments(export_argv(tmp, name)) for name in SPECS}
        self.precision = {name: a.precision for name, a in self.args.items()}
        self.serve = {}

    def package(self, name):
        why = self.made.get(name, {"error": "not in the manifest"}).get("error")
        if why:
            raise AssertionError("the %s package was not made: %s" % (name, why))
        return os.path.join(self.dir, name + ".pt2")

    def reference(self, name, *xs):
        """The module's outputs for a batch: one numpy array per output."""
        import torch
        from gpuframe import export
        if name not in self.serve:
            self.serve[name] = export.serving_module(self.args[name])
        with torch.no_grad():
            ys = self.serve[name](*[torch.as_tensor(x).cuda() for x in xs])
        return [y.float().cpu().numpy() for y in ys]


MODELS = None


def memory_state():
    """(PyTorch's cudaMalloc calls, its reserved bytes, the device's free
    bytes), everything before synchronised."""
    import torch
    torch.cuda.synchronize()
    stats = torch.cuda.memory_stats()
    return (stats.get("num_device_alloc", stats.get("segment.all.allocated", 0)),
            torch.cuda.memory_reserved(), torch.cuda.mem_get_info()[0])


class ShowsDaemonLog:
    """A test case mixin: when a test fails, the log of every daemon it
    watched is printed (read when the test ends, before cleanups made
    earlier remove it)."""

    def watch(self, daemon):
        logs = self.__dict__.setdefault("_logs", [])

        def keep():
            if daemon.log_path and os.path.exists(daemon.log_path):
                logs.append((daemon.log_path, daemon.log_tail(80)))
        self.addCleanup(keep)
        return daemon

    def run(self, result=None):
        bad = (lambda: len(result.failures) + len(result.errors)) if result else (lambda: 0)
        before = bad()
        out = super().run(result)
        if bad() > before:
            for path, tail in self.__dict__.get("_logs", []):
                print("---- %s failed; the daemon's log (%s), its last 80 lines:\n%s\n----"
                      % (self.id(), path, tail), flush=True)
        return out


def assert_close(test, got, ref, precision, what):
    """got within gpuframe-export's tolerance of ref (export.TOLERANCES)."""
    import torch
    from gpuframe import export
    ok, err = export.within_tolerance(torch.as_tensor(np.asarray(got, np.float32)),
                                      torch.as_tensor(np.asarray(ref, np.float32)), precision)
    test.assertTrue(ok, "%s: error %.3g of the scale, tolerance %.3g"
                    % (what, err, export.TOLERANCES[precision]))


class DirectTest(unittest.TestCase):
    """gf_torch.so as gpuframed drives it: exact batch sizes, guard bytes,
    no device memory taken by launches; with CUDA graphs (the default)."""

    GUARD = 0xA5
    #: The cuda_graphs parameter.
    GRAPHS = 1

    def open(self, name, inputs, outputs):
        lib, api = load_plugin()
        self.assertEqual((api.abi_version, api.name, api.flags), (3, b"torch", 1))
        values = (Value * 5)(Value(string=MODELS.package(name).encode()),
                             Value(string=inputs.encode()), Value(string=outputs.encode()),
                             Value(number=0), Value(number=self.GRAPHS))
        env = Env(max_input_bytes=16 << 20, config_dir=b"/")
        why = ctypes.create_string_buffer(512)
        state = api.create(values, ctypes.byref(env), why, 512)
        self.assertTrue(state, why.value)
        dev = api.device_open(state, 0, LANES, why, 512)
        self.assertTrue(dev, why.value)
        self.addCleanup(api.destroy, state)
        self.addCleanup(api.device_close, dev)
        return api, state, dev

    def run_frames(self, api, dev, offsets, stride, in_bytes, out_bytes, inputs):
        """Lays `inputs` (bytes each) at `offsets` (multiples of 256) in a
        device buffer of guard bytes, launches them as one submission, and
        returns the output buffer's bytes."""
        import torch
        size = (max(offsets) + stride + 4096)
        in_buf = torch.full((size,), self.GUARD, dtype=torch.uint8, device="cuda")
        out_buf = torch.full((size,), self.GUARD, dtype=torch.uint8, device="cuda")
        for off, data in zip(offsets, inputs):
            in_buf[off:off + in_bytes] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        frames = (Frame * len(offsets))(*[
            Frame(in_buf.data_ptr() + off, in_bytes, out_buf.data_ptr() + off, out_bytes)
            for off in offsets])
        stream = torch.cuda.Stream()
        torch.cuda.synchronize()
        rc = api.launch_batch(dev, 0, frames, len(offsets), ctypes.c_void_p(stream.cuda_stream))
        stream.synchronize()
        self.assertEqual(rc, 0)
        return out_buf.cpu().numpy()

    def check_batches(self, name, inputs_text, outputs_text, make, in_bytes, out_bytes):
        api, _, dev = self.open(name, inputs_text, outputs_text)
        stride = -(-max(in_bytes, out_bytes) // 256) * 256
        rng = np.random.default_rng(7)
        layouts = {"1": [0], "7": [i * stride for i in range(7)],
                   "64": [i * stride for i in range(64)],
                   "mixed": [0, stride, 2 * stride, 5 * stride, 6 * stride, 9 * stride]}
        for label, offsets in layouts.items():
            xs = make(rng, len(offsets))  # a list of per-input batches
            frames = [b"".join(np.ascontiguousarray(x[i]).tobytes() for x in xs)
                      for i in range(len(offsets))]
            out = self.run_frames(api, dev, offsets, stride, in_bytes, out_bytes, frames)
            ref = MODELS.reference(name, *xs)[0]
            for i, off in enumerate(offsets):
                got = out[off:off + out_bytes].view(np.float32)
                assert_close(self, got, ref[i], MODELS.precision[name],
                             "%s, batch %s, frame %d" % (name, label, i))
            used = np.zeros(out.size, bool)
            for off in offsets:
                used[off:off + out_bytes] = True
            untouched = out[~used]
            self.assertTrue((untouched == self.GUARD).all(),
                            "%s, batch %s: %d guard bytes overwritten"
                            % (name, label, int((untouched != self.GUARD).sum())))

    def test_launches_take_no_device_memory(self):
        # device_open ran every batch size on every lane (a small model's
        # warm-up is well within its time budget): launches of any size on
        # any stream index, as contiguous batches and gathered, allocate
        # nothing more.  From device_open's thread; and from a thread of its
        # own (a shard's), after its first launches made PyTorch's
        # per-thread handles and workspaces.
        import torch
        api, _, dev = self.open("cnn", CNN_FRAME, CNN_OUT)
        in_bytes, out_bytes = 3 * 32 * 32 * 4, 40
        size = 64 * (in_bytes + 256)
        in_buf = torch.zeros(size, dtype=torch.uint8, device="cuda")
        out_buf = torch.zeros(size, dtype=torch.uint8, device="cuda")
        streams = [torch.cuda.Stream() for _ in range(LANES)]
        layouts = [(Frame * 64)(*[Frame(in_buf.data_ptr() + i * stride, in_bytes,
                                        out_buf.data_ptr() + i * stride, out_bytes)
                                  for i in range(64)])
                   for stride in (in_bytes, in_bytes + 256)]
        failures = []

        def sweep():
            for frames in layouts:
                for lane in range(LANES):
                    for n in range(1, 65):
                        rc = api.launch_batch(dev, lane, frames, n,
                                              ctypes.c_void_p(streams[lane].cuda_stream))
                        if rc != 0:
                            failures.append("lane %d, %d frames: error %d" % (lane, n, rc))
            return memory_state()

        def report(what, a, b):
            print("%s: %d cudaMalloc by PyTorch, its reserved bytes %+d, the device's free "
                  "bytes %+d" % (what, b[0] - a[0], b[1] - a[1], b[2] - a[2]), flush=True)

        before = memory_state()
        after = sweep()
        report("launches of every size 1..64 from device_open's thread", before, after)
        self.assertEqual(failures, [])
        self.assertEqual(after, before, "launches after device_open took device memory")
        states = []
        t = threading.Thread(target=lambda: states.extend([memory_state(), sweep(), sweep()]))
        t.start()
        t.join()
        self.assertEqual(failures, [])
        report("the first launches from another thread (PyTorch's per-thread state)",
               states[0], states[1])
        report("the next launches from that thread", states[1], states[2])
        self.assertEqual(states[2], states[1],
                         "launches from a thread that had launched before took device memory")

    def test_cnn_batches(self):
        self.check_batches("cnn", CNN_FRAME, CNN_OUT,
                           lambda rng, n: [rng.standard_normal((n, 3, 32, 32)).astype(np.float32)],
                           3 * 32 * 32 * 4, 40)

    def test_mlp_batches(self):
        self.check_batches("mlp", "float32[64]", "float32[5]",
                           lambda rng, n: [rng.standard_normal((n, 64)).astype(np.float32)],
                           256, 20)

    def test_two_input_batches(self):
        self.check_batches("two", "float16[8];int64[]", "float32[2]",
                           lambda rng, n: [rng.standard_normal((n, 8)).astype(np.float16),
                                           rng.integers(0, 5, n).astype(np.int64)],
                           24, 8)

    def test_package_from_two_runs_padded(self):
        # Exported as PyTorch does by default, the package refuses a batch
        # of one (PyTorch's 0/1 specialisation); the plugin runs 1 frame,
        # and the lone one of the mixed batch, padded to 2.
        import torch
        import torch._inductor
        model = torch._inductor.aoti_load_package(MODELS.package("mlp_from2"))
        with self.assertRaises(RuntimeError, msg="the package takes a batch of one: nothing "
                                                 "to pad (export it as PyTorch does by default)"):
            model(torch.zeros(1, 64, device="cuda"))
            torch.cuda.synchronize()
        self.check_batches("mlp_from2", "float32[64]", "float32[5]",
                           lambda rng, n: [rng.standard_normal((n, 64)).astype(np.float32)],
                           256, 20)

    def test_static_package_runs_frame_by_frame(self):
        self.check_batches("mlp_static", "float32[64]", "float32[5]",
                           lambda rng, n: [rng.standard_normal((n, 64)).astype(np.float32)],
                           256, 20)


class DirectEagerTest(DirectTest):
    """The same with "cuda_graphs": 0: each call runs the package on its lane."""

    GRAPHS = 0


def torch_stage(name, package=None, inputs="float32[64]", outputs="float32[5]", graphs=None):
    params = {"package": package or MODELS.package(name), "inputs": inputs, "outputs": outputs}
    if graphs is not None:
        params["cuda_graphs"] = graphs
    return {"kind": "plugin", "path": PLUGIN_SO, "params": params}


def daemon_config(cnn_package=None):
    cnn = dict(torch_stage("cnn", cnn_package, CNN_FRAME, CNN_OUT), name="cnn")
    # Two shards: four streams a device, four model instances a package.
    return {"shards": 2, "slots": 2, "log_level": "info", "pipelines": [
        cnn,
        {"name": "rgb_cnn", "stages": [
            {"kind": "normalize_u8", "params": {"width": 32, "height": 32}},
            torch_stage("cnn", None, CNN_FRAME, CNN_OUT)]},
        dict(torch_stage("mlp"), name="mlp"),
        dict(torch_stage("mlp_static"), name="mlp_static"),
        dict(torch_stage("mlp_from2"), name="mlp_from2"),
        dict(torch_stage("two", None, "float16[8];int64[]", "float32[2]"), name="two"),
        dict(torch_stage("cnn", None, CNN_FRAME, CNN_OUT, graphs=0), name="cnn_eager"),
        dict(torch_stage("host_step"), name="host_step"),
    ]}


class DaemonTest(ShowsDaemonLog, support.DaemonTestCase):
    """A real gpuframed serving the packages (stopped at the end with a check
    that it exited 0 and logged no failure)."""

    @classmethod
    def setUpClass(cls):
        cls.CONFIG = daemon_config()
        super().setUpClass()

    def setUp(self):
        self.watch(self.daemon)

    def test_list_publishes_shapes_and_dtypes(self):
        import gpuframe
        T = gpuframe.TensorSpec
        p = self.client().list()
        want = {
            "cnn": ((T("float32", (3, 32, 32)),), (T("float32", (10,)),)),
            "rgb_cnn": ((T("uint8", (32, 32, 3)),), (T("float32", (10,)),)),
            "mlp": ((T("float32", (64,)),), (T("float32", (5,)),)),
            "two": ((T("float16", (8,)), T("int64", ())), (T("float32", (2,)),)),
        }
        for name, (inputs, outputs) in want.items():
            self.assertEqual((p[name].inputs, p[name].outputs), (inputs, outputs), name)
        self.assertEqual(p["cnn"].info["plugin"], "torch")
        self.assertEqual(p["cnn"].info["inputs"], [{"dtype": "float32", "shape": [3, 32, 32]}])

    def test_results_match_eager(self):
        c = self.client()
        rng = np.random.default_rng(11)
        x = rng.standard_normal((20, 3, 32, 32)).astype(np.float32)
        results = c.map("cnn", list(x), window=8)
        ref = MODELS.reference("cnn", x)[0]
        for i, got in enumerate(results):
            self.assertEqual((got.dtype, got.shape), (np.float32, (10,)))
            assert_close(self, got, ref[i], "float32", "cnn frame %d" % i)
        v = rng.standard_normal((9, 64)).astype(np.float32)
        for i, got in enumerate(c.map("mlp", list(v), window=4)):
            assert_close(self, got, MODELS.reference("mlp", v)[0][i], "float32", "mlp %d" % i)
        for i, got in enumerate(c.map("mlp_static", list(v), window=4)):
            assert_close(self, got, MODELS.reference("mlp_static", v)[0][i], "float32",
                         "mlp_static %d" % i)
        # Batches from 2: single frames (window 1) run padded, the rest not.
        for window in (1, 4):
            for i, got in enumerate(c.map("mlp_from2", list(v), window=window)):
                assert_close(self, got, MODELS.reference("mlp_from2", v)[0][i], "float32",
                             "mlp_from2 %d, window %d" % (i, window))
        # Without graphs: by the parameter, and for a package whose calls
        # cannot be captured.
        for i, got in enumerate(c.map("cnn_eager", list(x), window=8)):
            assert_close(self, got, ref[i], "float32", "cnn_eager frame %d" % i)
        for i, got in enumerate(c.map("host_step", list(v), window=4)):
            assert_close(self, got, MODELS.reference("host_step", v)[0][i], "float32",
                         "host_step %d" % i)

    def test_cuda_graphs_said(self):
        # The CNN serves two pipelines with graphs, every batch size on each
        # of the 4 lanes (a small model is well within the time budget), and
        # one without; the package that goes through the host's memory is
        # said once to run without.
        log = self.daemon.log()
        loaded = re.findall(r"plugin torch: %s loaded in [0-9.]+ s: batches of 1\.\.64, "
                            r"(?:CUDA graphs of (\d+) of the 64 batch sizes on each of 4 lanes"
                            r"|(no CUDA graphs))" % re.escape(MODELS.package("cnn")), log)
        self.assertEqual(sorted(loaded), [("", "no CUDA graphs"), ("64", ""), ("64", "")],
                         log[-3000:])
        pattern = r"%s: its calls cannot be captured as CUDA graphs \(.+\): each call runs " \
                  r"the package\n" % re.escape(MODELS.package("host_step"))
        self.assertEqual(len(re.findall(pattern, log)), 1, log[-3000:])
        self.assertRegex(log, r"plugin torch: %s loaded in [0-9.]+ s: batches of 1\.\.64, no "
                              r"CUDA graphs" % re.escape(MODELS.package("host_step")))
        # Every other package replays graphs of every size it takes, so that
        # the direct tests' packages (two input tensors, batches from 2
        # padded, one frame at a time) are served by graphs too.
        for name, sizes in (("mlp", "1\\.\\.64, CUDA graphs of 64 of the 64"),
                            ("two", "1\\.\\.64, CUDA graphs of 64 of the 64"),
                            ("mlp_from2", "2\\.\\.64 \\(fewer frames padded\\), CUDA graphs of 63 "
                                          "of the 63"),
                            ("mlp_static", "1\\.\\.1, CUDA graphs of 1 of the 1")):
            self.assertRegex(log, r"plugin torch: %s loaded in [0-9.]+ s: batches of %s batch "
                                  r"sizes on each of 4 lanes" % (re.escape(MODELS.package(name)),
                                                                 sizes))

    def test_chain_from_rgb8(self):
        c = self.client()
        rng = np.random.default_rng(12)
        images = rng.integers(0, 256, (6, 32, 32, 3), dtype=np.uint8)
        params = {"width": 32, "height": 32, "mean": [0.485, 0.456, 0.406],
                  "std": [0.229, 0.224, 0.225]}
        planes = np.stack([support.ref_normalize_u8(params, im) for im in images])
        ref = MODELS.reference("cnn", planes)[0]
        for i, got in enumerate(c.map("rgb_cnn", list(images), window=3)):
            assert_close(self, got, ref[i], "float32", "rgb_cnn %d" % i)

    def test_two_input_records(self):
        c = self.client()
        p = c.list()["two"]
        rng = np.random.default_rng(13)
        frames = []
        for _ in range(5):
            f = p.input_array()
            f["t0"] = rng.standard_normal(8).astype(np.float16)
            f["t1"] = rng.integers(0, 5)
            frames.append(f)
        ref = MODELS.reference("two", np.stack([f["t0"] for f in frames]),
                               np.array([int(f["t1"]) for f in frames], np.int64))[0]
        for i, got in enumerate(c.map("two", frames, window=5)):
            self.assertEqual(got.shape, (2,))
            assert_close(self, got, ref[i], "float32", "two %d" % i)

    def test_serving_takes_no_device_memory(self):
        # The same load three times, batches of every size the daemon forms:
        # the third pass takes no device memory.  The first may (each
        # shard's thread makes PyTorch's cuBLAS and cuDNN handles, and a
        # workspace per lane, at its first call on it), and so, where the
        # first did not reach every slot of every shard, may the second;
        # both are printed.
        rng = np.random.default_rng(16)
        x = rng.standard_normal((16, 64, 3, 32, 32)).astype(np.float32)
        clients = [self.client() for _ in range(16)]
        windows = [1, 2, 4, 8, 16, 32, 64, 64] * 2
        errors = []

        def one(k):
            try:
                got = clients[k].map("cnn", list(x[k]), window=windows[k])
                if len(got) != 64:
                    errors.append("client %d: %d results" % (k, len(got)))
            except Exception as e:  # reported below, in the test's thread
                errors.append(repr(e))

        def load():
            threads = [threading.Thread(target=one, args=(k,)) for k in range(16)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            return memory_state()[2]

        start = memory_state()[2]
        first = load()
        second = load()
        third = load()
        self.assertEqual(errors, [])
        print("the device's free memory: %+d bytes over the first pass of load, %+d over the "
              "second, %+d over the third" % (first - start, second - first, third - second),
              flush=True)
        self.assertEqual(third, second, "a third pass of load took device memory")

    def test_sixteen_clients_share_batches(self):
        rng = np.random.default_rng(14)
        x = rng.standard_normal((16, 24, 3, 32, 32)).astype(np.float32)
        ref = [MODELS.reference("cnn", x[k])[0] for k in range(16)]
        got = [None] * 16
        errors = []

        clients = [self.client() for _ in range(16)]

        def one(k):
            try:
                got[k] = clients[k].map("cnn", list(x[k]), window=4)
            except Exception as e:  # reported below, in the test's thread
                errors.append(e)

        before = self.batches("cnn")
        threads = [threading.Thread(target=one, args=(k,)) for k in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        for k in range(16):
            for i in range(24):
                assert_close(self, got[k][i], ref[k][i], "float32", "client %d frame %d" % (k, i))
        after = self.batches("cnn")
        self.assertEqual(after["frames"] - before["frames"], 16 * 24)
        several = sum(after["counts"][1:]) - sum(before["counts"][1:])
        print("16 clients: %d submissions for %d frames, %d of several frames"
              % (after["submissions"] - before["submissions"], 16 * 24, several))
        self.assertGreater(several, 0, "no submission carried more than one frame")

    def batches(self, name):
        s = self.client().stats()
        return next(p["batches"] for p in s["pipelines"] if p["name"] == name)

    def test_wrong_lengths(self):
        import gpuframe
        c = self.client()
        with self.assertRaises(gpuframe.BadLengthError) as cm:
            c.process("cnn", bytes(100))
        self.assertEqual(cm.exception.text,
                         "pipeline cnn: length 100 is not the 12288 bytes of a frame (float32[3,32,32])")
        with self.assertRaises(gpuframe.BadLengthError) as cm:
            c.process("two", bytes(25))
        self.assertEqual(cm.exception.text,
                         "pipeline two: length 25 is not the 24 bytes of a frame (float16[8];int64[])")
        # The connection goes on.
        self.assertEqual(c.process("mlp", np.zeros(64, np.float32)).shape, (5,))

    def test_static_package_said_once(self):
        line = "%s takes no batch of several frames (its batch dimension is not dynamic): its " \
               "frames run one at a time" % MODELS.package("mlp_static")
        self.assertEqual(self.daemon.log().count(line), 1, self.daemon.log()[-3000:])

    def test_padding_said_once(self):
        pattern = r"%s takes batches of 2 to 64 frames, not fewer \(refusing one frame: .*dim " \
                  r"value is too small.*\): calls of fewer frames run padded with zeros to 2, " \
                  r"the padding's results dropped\n" % re.escape(MODELS.package("mlp_from2"))
        self.assertEqual(len(re.findall(pattern, self.daemon.log())), 1,
                         self.daemon.log()[-3000:])
        # The others take a batch of one: no such line.
        self.assertEqual(self.daemon.log().count("not fewer"), 1)


def reload_lines(d):
    """The log's lines that end a reload: taken, or rejected."""
    return [l for l in d.log().splitlines() if "]: info: reloaded " in l or "reload rejected" in l]


def reload_and_wait(d, config):
    """Writes `config`, SIGHUPs and waits for the reload to end; returns the
    log line that says how."""
    before = len(reload_lines(d))
    with open(os.path.join(d.dir, "gpuframed.json"), "w") as f:
        json.dump(config, f)
    d.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 120 * support.TIMEOUT_SCALE
    while time.monotonic() < deadline:
        lines = reload_lines(d)
        if len(lines) > before:
            return lines[before]
        time.sleep(0.05)
    raise AssertionError("no reload within 120 s; log:\n" + d.log()[-3000:])


def truncated_package(name):
    """The first half of the cnn package, as `name` beside it."""
    path = os.path.join(MODELS.dir, name)
    with open(MODELS.package("cnn"), "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data[:len(data) // 2])
    return path


class ReloadTest(ShowsDaemonLog, unittest.TestCase):
    """A new package version under load, and a bad one refused."""

    def test_new_version_under_load_and_a_bad_one_refused(self):
        import gpuframe
        d = support.Daemon(daemon_config(), "cuda").start()
        self.addCleanup(d.cleanup)
        self.watch(d)
        rng = np.random.default_rng(15)
        x = rng.standard_normal((8, 3, 32, 32)).astype(np.float32)
        v1, v2 = MODELS.reference("cnn", x)[0], MODELS.reference("cnn_v2", x)[0]
        self.assertGreater(float(np.abs(v1 - v2).max()), 0.05, "v1 and v2 must differ")
        stop = threading.Event()
        counts = {"v1": 0, "v2": 0}
        failures = []

        def stream():
            import torch
            from gpuframe import export
            try:
                c = gpuframe.Client(d.socket_path, timeout=support.REPLY_TIMEOUT_S)
                while not stop.is_set():
                    for i, got in enumerate(c.map("cnn", list(x), window=8)):
                        g = torch.as_tensor(got)
                        if export.within_tolerance(g, torch.as_tensor(v1[i]), "float32")[0]:
                            counts["v1"] += 1
                        elif export.within_tolerance(g, torch.as_tensor(v2[i]), "float32")[0]:
                            counts["v2"] += 1
                        else:
                            failures.append("frame %d matches neither version" % i)
                c.close()
            except Exception as e:
                failures.append(repr(e))

        threads = [threading.Thread(target=stream) for _ in range(4)]
        for t in threads:
            t.start()
        time.sleep(1.0)
        line = reload_and_wait(d, daemon_config(MODELS.package("cnn_v2")))
        self.assertIn("reloaded ", line)
        v2_at_reload = counts["v2"]
        time.sleep(1.0)
        # A bad version is refused with one line; the running ones stay.
        missing = os.path.join(MODELS.dir, "nonexistent.pt2")
        line = reload_and_wait(d, daemon_config(missing))
        self.assertIn("reload rejected", line)
        self.assertIn("package: %s: No such file or directory" % missing, line)
        truncated = truncated_package("truncated.pt2")
        line = reload_and_wait(d, daemon_config(truncated))
        self.assertIn("reload rejected", line)
        self.assertIn("package %s: cannot load: " % truncated, line)
        time.sleep(1.0)
        stop.set()
        for t in threads:
            t.join()
        self.assertEqual(failures, [])
        print("frames answered by v1 %d, by v2 %d (%d by the reload's end)"
              % (counts["v1"], counts["v2"], v2_at_reload))
        self.assertGreater(counts["v1"], 0)
        self.assertGreater(counts["v2"] - v2_at_reload, 0, "no frame ran v2 after the reload")
        with gpuframe.Client(d.socket_path) as c:
            s = c.stats()
        self.assertEqual((s["frames"]["failed"], s["rejected"]["engine"]), (0, 0))
        self.assertEqual(d.stop(), 0)



class RefusalTest(unittest.TestCase):
    """Packages refused at start, each with one line naming it and why."""

    def start_fails(self, package, inputs=CNN_FRAME, outputs=CNN_OUT):
        """Runs gpuframed on one cnn pipeline of `package`; asserts it exits
        non-zero at start and returns its output's line about the package."""
        tmp = tempfile.mkdtemp(prefix="gfrefuse.")
        self.addCleanup(shutil.rmtree, tmp, True)
        config = os.path.join(tmp, "gpuframed.json")
        with open(config, "w") as f:
            json.dump({"pipelines": [dict(torch_stage("cnn", package, inputs, outputs),
                                          name="cnn")]}, f)
        p = subprocess.run([support.daemon_path(), "--config", config, "--socket",
                            os.path.join(tmp, "s.sock"), "--engine", "cuda"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True, timeout=300 * support.TIMEOUT_SCALE)
        self.assertNotEqual(p.returncode, 0, p.stdout)
        lines = [l for l in p.stdout.splitlines() if package in l and "error" in l]
        self.assertEqual(len(lines), 1, p.stdout)
        print("refused: " + lines[0])
        return lines[0]

    def rewritten(self, name, change):
        """A copy of the cnn package with change(member_name, bytes) applied
        to each member (returning the new bytes, or None to keep them)."""
        path = os.path.join(MODELS.dir, name)
        changed = 0
        with zipfile.ZipFile(MODELS.package("cnn")) as src, \
                zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as dst:
            for info in src.infolist():
                data = src.read(info.filename)
                new = change(info.filename, data)
                changed += new is not None
                dst.writestr(info, data if new is None else new)
        return path, changed

    def test_missing(self):
        missing = os.path.join(MODELS.dir, "missing.pt2")
        line = self.start_fails(missing)
        self.assertIn("package: %s: No such file or directory" % missing, line)

    def test_truncated(self):
        path = truncated_package("half.pt2")
        self.assertIn("package %s: cannot load: " % path, self.start_fails(path))

    def test_kernels_for_another_gpu(self):
        # A kernel image this GPU cannot load, as a package compiled for
        # another architecture has.
        path, changed = self.rewritten(
            "othergpu.pt2",
            lambda n, b: (b"\x7fELF" + b"\0" * (len(b) - 4)) if n.endswith(".cubin") else None)
        if changed == 0:
            self.skipTest("this PyTorch puts no .cubin files in a package")
        line = self.start_fails(path)
        self.assertIn("package %s: it refuses a frame of float32[3,32,32] in every batch of 1 "
                      "to 64 frames and without a batch dimension: " % path, line)
        self.assertRegex(line.lower(), "kernel|image|cubin|module|cuda")

    def test_model_object_of_another_pytorch(self):
        # The model object needs a symbol this libtorch lacks, as one built
        # by another PyTorch does.
        sym = b"aoti_torch_empty_strided\0"

        def rename(n, b):
            if not n.endswith(".so") or sym not in b:
                return None
            return b.replace(sym, sym[:-2] + b"X\0")
        path, changed = self.rewritten("otherpytorch.pt2", rename)
        self.assertGreater(changed, 0, "no model object in the package names " + sym.decode())
        line = self.start_fails(path)
        self.assertIn("package %s: cannot load: " % path, line)
        self.assertRegex(line, r"undefined symbol: \S*strideX")

    def test_parameters_not_exported_for(self):
        # gpuframe-export's metadata names both; a package without it is
        # refused by AOTInductor's check of the first call's inputs, or by
        # the plugin's of its outputs.
        package = MODELS.package("cnn")
        line = self.start_fails(package, inputs="float32[3,16,16]")
        self.assertRegex(line, "package %s: (inputs is \"float32\\[3,16,16\\]\", but the "
                               "package was exported for \"float32\\[3,32,32\\]\"|it refuses "
                               "a frame of float32\\[3,16,16\\]: .*dim)" % re.escape(package))
        line = self.start_fails(package, outputs="float32[11]")
        self.assertRegex(line, "package %s: (outputs is \"float32\\[11\\]\", but the package "
                               "was exported for \"float32\\[10\\]\"|output 0 of a call of "
                               "[0-9]+ frame\\(s\\) is float32\\[[0-9]+,10\\], where outputs "
                               "says float32\\[11\\] a frame)" % re.escape(package))


def run_classes(tmp, classes):
    """Runs each of `classes` in a process of its own; True when all passed."""
    results = []
    for name in classes:
        cmd = [sys.executable, "-X", "faulthandler", os.path.abspath(__file__), "--packages",
               tmp, name]
        print("==== %s: %s" % (name, " ".join(cmd)), flush=True)
        t0 = time.monotonic()
        try:
            rc = subprocess.run(cmd, env=child_env(),
                                timeout=900 * support.TIMEOUT_SCALE).returncode
        except subprocess.TimeoutExpired:
            rc = None
        results.append((name, rc, time.monotonic() - t0))
    print("==== summary")
    for name, rc, s in results:
        print("%s: %s (%.1f s)" % (name, "ok" if rc == 0 else "timed out" if rc is None
                                   else "skipped" if rc == support.SKIP_CODE
                                   else "FAILED, " + exit_text(rc), s), flush=True)
    return all(rc in (0, support.SKIP_CODE) for _, rc, _ in results)


def main():
    """The suite: every package made at once, then each test class in a
    process of its own.  --quick: the packages and classes that prove the
    results right (DirectTest, DaemonTest), not the reload's and refusals'.
    --make DIR and --run DIR split the two halves (scripts/gpu-torch.sh
    --quick makes the benchmark's package meanwhile); --packages DIR CLASS
    is one class's process."""
    import argparse
    ap = argparse.ArgumentParser(description=main.__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--make", metavar="DIR", help="make the packages into DIR, run nothing")
    ap.add_argument("--run", metavar="DIR", help="run the classes on the packages in DIR")
    ap.add_argument("--packages", nargs=2, metavar=("DIR", "CLASS"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    global MODELS
    if a.packages:
        with open(os.path.join(a.packages[0], "manifest.json")) as f:
            MODELS = Models(a.packages[0], json.load(f))
        unittest.main(argv=[sys.argv[0], a.packages[1]], verbosity=2)
    names = QUICK_PACKAGES if a.quick else tuple(SPECS)
    classes = QUICK_CLASSES if a.quick else CLASSES
    tmp = a.make or a.run or tempfile.mkdtemp(prefix="gftorch.")
    try:
        if a.run:
            with open(os.path.join(tmp, "manifest.json")) as f:
                made = json.load(f)
        else:
            os.makedirs(tmp, exist_ok=True)
            made = make_packages(tmp, names)
            with open(os.path.join(tmp, "manifest.json"), "w") as f:
                json.dump(made, f)
        ok = all("error" not in m for m in made.values())
        if not a.make:
            ok = run_classes(tmp, classes) and ok
    finally:
        if not (a.make or a.run):
            shutil.rmtree(tmp, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    reason = why_skip()
    if reason:
        print("SKIP: %s" % reason)
        sys.exit(support.SKIP_CODE)
    sys.exit(main())
