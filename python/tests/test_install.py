# SPDX-License-Identifier: MIT
"""`pip install ./python` works offline: with no index and no build isolation
(CI has no network beyond Debian's packages), pip builds the package with the
setuptools and wheel at hand and installs it into a directory of its own
(--target, so that the interpreter's own NumPy stays visible whether it is
Debian's python3 or a venv's).  The installed package, not the source tree,
then talks to a real daemon."""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import support


def project_version():
    """The version in the top-level CMakeLists.txt's project(), which the
    daemon reports: the Python package must carry the same."""
    with open(os.path.join(support.REPO, "CMakeLists.txt")) as f:
        return re.search(r"project\(gpuframed VERSION ([0-9.]+)", f.read()).group(1)


class InstallTest(unittest.TestCase):

    def run_ok(self, argv, **kw):
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True, timeout=120 * support.TIMEOUT_SCALE, **kw)
        self.assertEqual(p.returncode, 0, "%s failed:\n%s" % (" ".join(argv), p.stdout))
        return p.stdout

    def test_pip_install_offline(self):
        tmp = tempfile.mkdtemp(prefix="gfpyinstall.")
        self.addCleanup(shutil.rmtree, tmp, True)
        # A copy: setuptools writes build/ and *.egg-info next to the sources.
        src = os.path.join(tmp, "python")
        shutil.copytree(os.path.join(support.REPO, "python"), src,
                        ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
        site = os.path.join(tmp, "site")
        # Nothing from the source tree: only what pip installed may be imported.
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PIP_"))}
        env.update(PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
                   PIP_ROOT_USER_ACTION="ignore", PYTHONDONTWRITEBYTECODE="1")
        self.run_ok([sys.executable, "-m", "pip", "install", "--no-index",
                     "--no-build-isolation", "--no-deps", "--target", site, src],
                    env=env, cwd=tmp)
        # The PEP 561 marker travels with the package: its annotations are its types.
        self.assertTrue(os.path.isfile(os.path.join(site, "gpuframe", "py.typed")))
        env["PYTHONPATH"] = site
        meta = self.run_ok([sys.executable, "-c", (
            "import importlib.metadata as m\n"
            "print(m.version('gpuframe'))\n"
            "print(m.requires('gpuframe'))\n"
            "print(m.metadata('gpuframe')['License'])\n")], env=env, cwd=tmp)
        self.assertEqual(meta.splitlines(), [project_version(), "['numpy']", "MIT"])
        # The console script, which needs no PyTorch for its help.
        script = os.path.join(site, "bin", "gpuframe-export")
        self.assertTrue(os.access(script, os.X_OK), script)
        self.assertIn("pkg.module:factory", self.run_ok([script, "--help"], env=env, cwd=tmp))

        with support.Daemon({"pipelines": [{"name": "echo", "kind": "echo"},
                                           {"name": "half", "kind": "affine",
                                            "params": {"a": 0.5}}]}) as d:
            env["GPUFRAMED_SOCKET"] = d.socket_path
            out = self.run_ok([sys.executable, "-c", (
                "import gpuframe, numpy\n"
                "print(gpuframe.__file__)\n"
                "print(gpuframe.__version__)\n"
                "with gpuframe.Client() as c:\n"
                "    print(c.list().ids)\n"
                "    print(c.process('half', numpy.float32([2, 3])).tolist())\n")],
                env=env, cwd=tmp)
            status = d.stop()
            self.assertEqual(status, 0)
            self.assertEqual(d.failures(), [])
        lines = out.splitlines()
        self.assertTrue(lines[0].startswith(site + os.sep), lines[0])
        self.assertEqual(lines[1:], [project_version(), "{'echo': 0, 'half': 1}",
                                     "[1.0, 1.5]"])


if __name__ == "__main__":
    support.main()
